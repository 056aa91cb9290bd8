"""Case E1: n-step returns never cross an episode; truncation is not termination."""

import dm_env
import numpy as np
import pytest
import reverb
from acme import specs
from acme.adders import reverb as adders_reverb
from dm_env import specs as dm_specs

from actorq.components.replay import adders, reverb_replay as replay

GAMMA, N = 0.5, 3
V_S3 = 10.0  # an arbitrary bootstrap value V(s3)

ENV_SPEC = specs.EnvironmentSpec(
    observations=dm_specs.Array((1,), np.float32),
    actions=dm_specs.DiscreteArray(2, dtype=np.int32),
    rewards=dm_specs.Array((), np.float32),
    discounts=dm_specs.BoundedArray((), np.float32, 0.0, 1.0))


def _obs(i):
  return np.array([i], np.float32)


def _episode(adder, first_obs, rewards, truncated):
  adder.add_first(dm_env.restart(_obs(first_obs)))
  for k, r in enumerate(rewards):
    obs = _obs(first_obs + k + 1)
    if k < len(rewards) - 1:
      ts = dm_env.TimeStep(dm_env.StepType.MID, np.float32(r), np.float32(1.0), obs)
    else:
      ts = dm_env.TimeStep(dm_env.StepType.LAST, np.float32(r),
                           np.float32(1.0 if truncated else 0.0), obs)
    adder.add(np.int32(0), ts)


def _transitions(episodes):
  """Writes `episodes` [(first_obs, rewards, truncated)] and reads the items back in order."""
  table = reverb.Table.queue("q", 100, signature=adders_reverb.NStepTransitionAdder.signature(ENV_SPEC))
  server = reverb.Server([table])
  try:
    client = reverb.Client(f"localhost:{server.port}")
    adder = replay.ValidatingAdder(
        adders.NStepTransitionAdder(client, n_step=N, discount=GAMMA, priority_fns={"q": None}), ENV_SPEC)
    for ep in episodes:
      _episode(adder, *ep)
    adder.reset()
    size = client.server_info()["q"].current_size
    # The table holds `size` items, so this cannot block (replay.sample, with its timeout,
    # keeps a sampler stream open that delays the server's shutdown by ~5 s).
    items = client.sample("q", num_samples=size, emit_timesteps=False,
                          unpack_as_table_signature=True)
    data = [s.data for s in items]  # exhausts the generator: its sampler is released
    adder.close()  # close the writer's stream: an open one delays server.stop by ~5 s
    return data
  finally:
    server.stop()


def _target(t):
  # The DQN learner bootstraps with discount_t = gamma * transition.discount.
  return float(t.reward) + GAMMA * float(t.discount) * V_S3


@pytest.mark.parametrize("truncated", [True, False])
def test_nstep_targets_truncated_vs_terminated(truncated):
  ts = _transitions([(0, [1, 2, 4], truncated)])
  assert [float(t.observation[0]) for t in ts] == [0, 1, 2]
  assert all(float(t.next_observation[0]) == 3 for t in ts)
  if truncated:
    expected = [3 + 0.125 * V_S3, 4 + 0.25 * V_S3, 4 + 0.5 * V_S3]
  else:
    expected = [3.0, 4.0, 4.0]
  np.testing.assert_allclose([_target(t) for t in ts], expected, rtol=0, atol=1e-6)


@pytest.mark.parametrize("truncated", [True, False])
def test_second_episode_changes_nothing_of_the_first(truncated):
  alone = _transitions([(0, [1, 2, 4], truncated)])
  both = _transitions([(0, [1, 2, 4], truncated), (10, [8, 16], False)])
  assert len(both) == 5
  for a, b in zip(alone, both[:3]):
    for x, y in zip(a, b):
      np.testing.assert_array_equal(x, y)
  # The second episode's transitions start at its own first observation.
  assert [float(t.observation[0]) for t in both[3:]] == [10, 11]
  np.testing.assert_allclose([float(t.reward) for t in both[3:]], [8 + 0.5 * 16, 16])


@pytest.mark.parametrize("rewards,expected", [([1, 0, 0, 0], 1.0), ([0, 0, 1, 0], 0.25)])
def test_nstep_return_order(rewards, expected):
  ts = _transitions([(0, rewards, True)])
  assert float(ts[0].reward) == expected
