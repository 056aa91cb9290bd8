"""gymnax: ids: the dm_env adapter and the functional (compiled) form step the same
episodes; time limits are truncations; bad names and actions are one-line errors."""
import jax
import numpy as np
import pytest

from actorq import core
from actorq.components.envs import environments, gymnax_env


def _episode(env, actions):
  ts = env.reset()
  out = [ts]
  for a in actions:
    ts = env.step(a)
    out.append(ts)
    if ts.last():
      break
  return out


def test_cartpole_through_the_prefix_is_a_seeded_dm_env():
  env = environments.make_environment("gymnax:CartPole-v1", seed=3)
  assert env.observation_spec().shape == (4,) and env.observation_spec().dtype == np.float32
  assert env.action_spec().num_values == 2
  a = _episode(env, [0] * 100)
  b = _episode(environments.make_environment("gymnax:CartPole-v1", seed=3), [0] * 100)
  assert a[0].first() and a[-1].last() and len(a) == len(b) < 100  # falls over, same steps
  np.testing.assert_array_equal(np.stack([t.observation for t in a]),
                                np.stack([t.observation for t in b]))
  assert a[-1].discount == 0.0  # a termination
  assert all(t.reward == 1.0 for t in a[1:]) and a[1].observation.dtype == np.float32


def test_functional_step_matches_the_adapter_and_marks_the_time_limit_a_truncation():
  fn = gymnax_env.functional("CartPole-v1")
  assert fn.max_episode_steps == 500 and fn.num_actions == 2
  state, obs = fn.reset(jax.random.PRNGKey(0))
  # A state one step before the time limit, still upright: the step truncates.
  state = state.replace(time=499)
  _, _, reward, discount, last = fn.step(jax.random.PRNGKey(1), state, 1)
  assert bool(last) and float(discount) == 1.0 and float(reward) == 1.0
  # Knocked over at the time limit: a termination wins.
  fallen = state.replace(theta=1.0)
  _, _, _, discount, last = fn.step(jax.random.PRNGKey(1), fallen, 1)
  assert bool(last) and float(discount) == 0.0


def test_minatar_breakout_is_a_float_image_for_the_minatar_network():
  env = environments.make_environment("gymnax:Breakout-MinAtar", seed=0)
  spec = env.observation_spec()
  assert spec.shape == (10, 10, 4) and spec.name == "minatar_cnn"
  ts = env.reset()
  assert ts.observation.dtype == np.float32 and set(np.unique(ts.observation)) <= {0.0, 1.0}
  assert gymnax_env.functional("Breakout-MinAtar").storage_dtype == "uint8"


def test_bad_names_and_actions_are_one_line_errors():
  with pytest.raises(core.UnknownEnvironmentError, match="allowed: CartPole-v1, Acrobot-v1"):
    environments.make_environment("gymnax:Pong-v9")
  env = environments.make_environment("gymnax:Acrobot-v1")
  env.reset()
  with pytest.raises(environments.InvalidActionError, match=r"allowed: 0\.\.2"):
    env.step(3)
  # Its JAX form is what --launch anakin compiles; other prefixes have none.
  assert environments.PREFIXES["gymnax"].functional_environment("Acrobot-v1").num_actions == 3
  assert environments.PREFIXES["gym"].functional_environment("CartPole-v1") is None
