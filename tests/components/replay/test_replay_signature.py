"""Case E3: the table signature includes actor extras; bad writes name the column."""

import numpy as np
import pytest
import reverb
from acme import specs
from dm_env import specs as dm_specs

from actorq.components.acting import actors
from actorq.components.envs import environments
from actorq.components.replay import adders, reverb_replay as replay

EXTRAS_SPEC = {"logp": dm_specs.Array((), np.float32)}


class _ConstantRuntime:
  version = 0

  def __call__(self, obs):
    return np.zeros((obs.shape[0], 2), np.float32)


def _logp_selector(outputs, rng, step):
  return np.int32(rng.integers(2)), {"logp": np.float32(np.log(0.5))}


@pytest.fixture()
def setup():
  env = environments.make_environment("gym:CartPole-v1", seed=3)
  env_spec = environments.environment_spec(env)
  table = replay.transition_table("t", env_spec, EXTRAS_SPEC, max_size=10_000, min_size=1)
  server = replay.make_server([table])
  client = reverb.Client(f"localhost:{server.port}")
  adder = replay.ValidatingAdder(
      adders.NStepTransitionAdder(client, n_step=1, discount=0.99, priority_fns={"t": None}),
      env_spec, EXTRAS_SPEC)
  yield [env, env_spec, client, adder]
  # An open writer stream holds Reverb's Server.stop for 5 s: close it first (no full
  # garbage collection needed, which costs ~1 s).
  adder.close()
  server.stop()


def test_full_episode_with_extras_is_written(setup):
  env, _, client, adder = setup
  actor = actors.FeedForwardActor(_ConstantRuntime(), _logp_selector, adder=adder, seed=0)
  ts = env.reset()
  actor.observe_first(ts)
  steps = 0
  while not ts.last():
    action = actor.select_action(ts.observation)
    ts = env.step(action)
    actor.observe(action, ts)
    steps += 1
  adder.reset()
  assert client.server_info()["t"].current_size == steps
  item = replay.sample(client.server_address, "t", 1, timeout_s=5)[0]
  assert item.data.extras["logp"].dtype == np.float32
  np.testing.assert_allclose(item.data.extras["logp"], np.log(0.5), rtol=1e-6)


@pytest.mark.parametrize("bad,column,error", [
    ({"logp": np.float64(0.0)}, "extras/logp", TypeError),
    ({"logp": np.zeros(3, np.float32)}, "extras/logp", ValueError),
])
def test_bad_extras_raise_python_errors_naming_the_column(setup, bad, column, error):
  env, _, _, adder = setup
  ts = env.reset()
  adder.add_first(ts)
  with pytest.raises(error, match=column):
    adder.add(np.int32(0), env.step(np.int32(0)), extras=bad)


def test_bad_observation_dtype_names_the_column(setup):
  env, _, _, adder = setup
  ts = env.reset()
  adder.add_first(ts)
  nxt = env.step(np.int32(0))
  with pytest.raises(TypeError, match="'observation'.*float64"):
    adder.add(np.int32(0), nxt._replace(observation=nxt.observation.astype(np.float64)), extras={"logp": np.float32(0)})


def test_column_checker_all_fine_is_true_only_where_every_check_passes():
  """`ColumnChecker.all_fine` (issue 40's fast path): True for K rows of the right dtypes
  and shapes with finite floats; False for a NaN or inf anywhere, another dtype or shape,
  a list, a nested column, and for finite float64 values whose sum overflows (where
  `check` passes: False only sends the caller to the exact checks)."""
  spec = specs.EnvironmentSpec(
      observations=dm_specs.Array((2,), np.float32), actions=dm_specs.Array((), np.int32),
      rewards=dm_specs.Array((), np.float32), discounts=dm_specs.Array((), np.float32))
  checker = replay.ColumnChecker(spec, EXTRAS_SPEC)
  columns = ("action", "observation", "reward", "discount")

  def values(**change):
    out = {"action": np.zeros(3, np.int32), "observation": np.ones((3, 2), np.float32),
           "reward": np.full(3, 0.5, np.float32), "discount": np.ones(3, np.float32)}
    out.update(change)
    return tuple(out[c] for c in columns)

  assert checker.all_fine(columns, values(), 3)
  assert not checker.all_fine(columns, values(), 2)  # 3 rows given, 2 said
  for change in ({"reward": np.array([0.5, np.nan, 0.5], np.float32)},
                 {"observation": np.array([[1, 1], [1, np.inf], [1, 1]], np.float32)},
                 {"discount": np.array([1, -np.inf, 1], np.float32)},
                 {"action": np.zeros(3, np.int64)},
                 {"observation": np.ones((3, 3), np.float32)},
                 {"reward": [0.5, 0.5, 0.5]}):
    assert not checker.all_fine(columns, values(**change), 3), change
  big = np.full((3, 2), 3e38, np.float32)  # finite; summed in float64: no overflow
  assert checker.all_fine(columns, values(observation=big), 3)
  wide = replay.ColumnChecker(specs.EnvironmentSpec(
      observations=dm_specs.Array((2,), np.float64), actions=spec.actions,
      rewards=spec.rewards, discounts=spec.discounts))
  huge = np.full((3, 2), 1e308)  # finite; the float64 sum overflows
  with np.errstate(over="ignore"):
    assert not wide.all_fine(columns, values(observation=huge), 3)
  wide.check("observation", huge, rows=3)  # the exact check passes
  assert not checker.all_fine(("extras",), ({"logp": np.zeros(3, np.float32)},), 3)
