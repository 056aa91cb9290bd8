"""Case E2 (Gymnasium terminated/truncated -> dm_env) and environment ids."""
import dm_env
import gymnasium
import numpy as np
import pytest

from actorq.components.envs import environments


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


def _run(env, action, max_steps=10_000):
  """(observations after each step, rewards, discounts) of one episode under `action`."""
  ts, obs, rewards, discounts = env.reset(), [], [], []
  while not ts.last() and len(obs) < max_steps:
    ts = env.step(action)
    obs.append(ts.observation)
    rewards.append(ts.reward)
    discounts.append(ts.discount)
  return obs, rewards, discounts


def test_action_repeat_sums_rewards_and_stops_at_termination():
  # CartPole pushed right every step falls (terminates, discount 0) after a few steps.
  plain = _run(environments.make_environment("gym:CartPole-v1", seed=3), np.int32(1))
  repeated = _run(environments.make_environment("gym:CartPole-v1@repeat=4", seed=3),
                  np.int32(1))
  n = len(plain[0])
  assert plain[2][-1] == 0.0 and n % 4 != 0  # terminated mid-repeat
  assert len(repeated[0]) == -(-n // 4)  # ceil: the last agent step is cut short
  for i, obs in enumerate(repeated[0]):  # agent step i ends at base step min(4i + 4, n)
    np.testing.assert_array_equal(obs, plain[0][min(4 * i + 4, n) - 1])
  assert [float(r) for r in repeated[1]] == [4.0] * (len(repeated[1]) - 1) + [float(n % 4)]
  assert repeated[2][-1] == 0.0 and all(d == 1.0 for d in repeated[2][:-1])
  assert all(r.dtype == np.float32 for r in repeated[1] + repeated[2])


def test_action_repeat_on_dm_control_keeps_the_return():
  action = np.full((1,), 0.3, np.float32)
  plain = _run(environments.make_environment("dmc:cartpole-swingup", seed=1), action)
  env = environments.make_environment("dmc:cartpole-swingup@repeat=8", seed=1)
  repeated = _run(env, action)
  assert len(plain[1]) == 1000 and len(repeated[1]) == 125
  np.testing.assert_allclose(sum(repeated[1]), sum(plain[1]), rtol=1e-5)
  np.testing.assert_array_equal(repeated[0][-1], plain[0][-1])
  spec = environments.environment_spec(env)
  assert spec.observations.shape == (5,) and spec.rewards.dtype == np.float32


@pytest.mark.parametrize("env_id", ["dmc:cartpole-swingup@repeat=1", "dmc:cartpole-swingup@repeat=",
                                    "gym:CartPole-v1@repeat=x", "gym:CartPole-v1@skip=4"])
def test_bad_action_repeat_suffix_names_the_allowed_form(env_id):
  with pytest.raises(environments.UnknownEnvironmentError, match=r"@repeat=K|>= 2"):
    environments.make_environment(env_id)


def test_split_action_repeat():
  assert environments.split_action_repeat("dmc:cartpole-swingup@repeat=8") == (
      "dmc:cartpole-swingup", 8)
  assert environments.split_action_repeat("gym:CartPole-v1") == ("gym:CartPole-v1", 1)
