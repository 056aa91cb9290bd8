"""Case E2 (Gymnasium terminated/truncated -> dm_env) and environment ids."""
import dm_env
import gymnasium
import numpy as np
import pytest

from actorq.components import environments


class _Scripted(gymnasium.Env):
  """Returns Python ints/float64 on purpose; ends with the given flags on step 1."""
  observation_space = gymnasium.spaces.Box(-1, 1, (2,), np.float64)
  action_space = gymnasium.spaces.Discrete(2)

  def __init__(self, terminated, truncated):
    self._flags = (terminated, truncated)

  def reset(self, seed=None, options=None):
    return np.array([0.5, -0.5], np.float64), {}

  def step(self, action):
    return np.array([1, 0], np.int64), 3, self._flags[0], self._flags[1], {}


@pytest.mark.parametrize("terminated,truncated,step_type,discount", [
    (False, False, dm_env.StepType.MID, 1.0),
    (False, True, dm_env.StepType.LAST, 1.0),
    (True, False, dm_env.StepType.LAST, 0.0),
    (True, True, dm_env.StepType.LAST, 0.0),
])
def test_terminated_truncated_mapping(terminated, truncated, step_type, discount):
  env = environments.GymnasiumToDmEnv(_Scripted(terminated, truncated))
  first = env.reset()
  assert first.first() and first.observation.dtype == np.float32
  ts = env.step(np.int32(1))
  assert ts.step_type == step_type
  assert ts.discount == discount and ts.discount.dtype == np.float32
  assert ts.reward == 3.0 and ts.reward.dtype == np.float32
  assert ts.observation.dtype == np.float32
  np.testing.assert_array_equal(ts.observation, [1.0, 0.0])


def test_cartpole_spec_and_truncation_at_500():
  env = environments.make_environment("gym:CartPole-v1", seed=0)
  spec = environments.environment_spec(env)
  assert spec.actions.num_values == 2 and spec.observations.dtype == np.float32
  # Hold the pole up with a simple controller until the time limit truncates.
  ts, steps = env.reset(), 0
  while not ts.last():
    ts = env.step(np.int32(1 if ts.observation[2] + 0.5 * ts.observation[3] > 0 else 0))
    steps += 1
  assert steps == 500 and ts.discount == 1.0


def test_dm_control_flattens_to_float32():
  env = environments.make_environment("dmc:cartpole-balance", seed=0)
  ts = env.reset()
  assert ts.observation.shape == (5,) and ts.observation.dtype == np.float32
  ts = env.step(np.zeros(1, np.float32))
  assert ts.reward.dtype == np.float32 and ts.discount.dtype == np.float32


@pytest.mark.parametrize("env_id", ["CartPole-v1", "gym:NoSuchEnv-v0", "dmc:cartpole", "dmc:nosuch-task"])
def test_unknown_ids_raise_clear_errors(env_id):
  with pytest.raises(environments.UnknownEnvironmentError) as e:
    environments.make_environment(env_id)
  assert env_id.split(":")[-1] in str(e.value) or "gym:" in str(e.value)
