"""Case R2: prioritized sampling follows the priorities, and priorities are validated
before they reach Reverb (NaN, inf and negative updates raise; nothing is written)."""

import numpy as np
import pytest
import reverb
import tree
from acme import specs, types

from actorq.components.replay import priorities as priorities_lib
from actorq.components.replay import reverb_replay as replay

ENV_SPEC = specs.EnvironmentSpec(
    observations=specs.Array((2,), np.float32), actions=specs.DiscreteArray(2),
    rewards=specs.Array((), np.float32),
    discounts=specs.BoundedArray((), np.float32, 0.0, 1.0))
TABLE = "prioritized"


def _transition(index: int) -> types.Transition:
  """Item `index` carries its index as the reward."""
  obs = np.full((2,), index, np.float32)
  return types.Transition(observation=obs, action=np.int32(index % 2),
                          reward=np.float32(index), discount=np.float32(1.0),
                          next_observation=obs, extras=())


def _sample_indices(client, n):
  """(item index, priority) of `n` samples through the table's Prioritized selector."""
  rows = replay.sample(client.server_address, TABLE, num_samples=n, timeout_s=30)
  return (np.array([int(r.data.reward) for r in rows]),
          np.array([float(r.info.priority) for r in rows]),
          {int(r.data.reward): int(r.info.key) for r in rows})


@pytest.fixture(name="table", scope="module")
def _table():
  """A real prioritized transition table holding items 0..3 with priorities [0, 0, 3, 0]."""
  server = replay.make_server([replay.transition_table(
      TABLE, ENV_SPEC, max_size=10, min_size=1, prioritized=True, priority_exponent=0.6)])
  client = reverb.Client(f"localhost:{server.port}")
  with client.trajectory_writer(num_keep_alive_refs=1) as writer:
    for i, p in enumerate([1.0, 1.0, 1.0, 1.0]):  # equal first, to learn every item's key
      writer.append(_transition(i))
      writer.create_item(TABLE, p, trajectory=tree.map_structure(lambda c: c[-1],
                                                                 writer.history))
    writer.flush()
  # reverb 0.7's TrajectoryWriter.__exit__ only flushes: an open writer stream holds
  # Server.stop for 5 s, so close it here.
  writer.close()
  keys = {}
  while len(keys) < 4:
    keys.update(_sample_indices(client, 50)[2])
  ordered = np.array([keys[i] for i in range(4)], np.uint64)
  priorities_lib.update_priorities(client, TABLE, ordered, [0.0, 0.0, 3.0, 0.0])
  yield client, ordered
  server.stop()  # replay.sample's sampling streams end with its call


def test_only_the_item_with_positive_priority_is_sampled(table):
  client, _ = table
  indices, priorities, _ = _sample_indices(client, 10_000)
  assert len(indices) == 10_000
  np.testing.assert_array_equal(indices, 2)
  np.testing.assert_array_equal(priorities, 3.0)


def test_invalid_priority_updates_raise_and_write_nothing(table):
  client, keys = table
  for bad in [np.nan, np.inf, -np.inf, -1.0, -1e-12]:
    # A valid value for item 0 travels with the bad one for item 1: neither may be written.
    with pytest.raises(ValueError, match=r"finite and >= 0") as info:
      priorities_lib.update_priorities(client, TABLE, keys[:2], [5.0, bad])
    assert repr(float(bad)) in str(info.value) and f"key {int(keys[1])}" in str(info.value)
  indices, priorities, _ = _sample_indices(client, 10_000)
  np.testing.assert_array_equal(indices, 2)  # items 0, 1 (and 3) still have priority 0
  np.testing.assert_array_equal(priorities, 3.0)


def test_validate_priorities_values_and_errors():
  np.testing.assert_array_equal(priorities_lib.validate_priorities([0.0, 2.5]), [0.0, 2.5])
  with pytest.raises(ValueError, match=r"index 1: nan.*index 2: -3\.0.*finite and >= 0"):
    priorities_lib.validate_priorities(np.array([1.0, np.nan, -3.0], np.float32))
  with pytest.raises(ValueError, match="2 keys but 3 priorities"):
    priorities_lib.validate_priorities([1.0, 1.0, 1.0], keys=[1, 2])


class _RecordingClient:
  """A Reverb client stand-in that records what `mutate_priorities` receives."""

  def __init__(self):
    self.updates = []

  def mutate_priorities(self, table, updates):
    self.updates.append((table, dict(updates)))


# Reverb keys are uniform uint64: about half lie at or above 2**63 (case B12).
B12_KEYS = [2**63 + 12_345_678_901, 17, 2**64 - 3, 2**63 - 1, 9_007_199_254_740_993]


def test_b12_a_list_mixing_large_and_small_keys_reaches_reverb_exactly():
  # np.asarray(B12_KEYS) is float64: the three keys above 2**53 would be rounded and the
  # update would match no item (silently dropped by Reverb).
  assert np.asarray(B12_KEYS).dtype == np.float64
  client = _RecordingClient()
  priorities_lib.update_priorities(client, TABLE, B12_KEYS, [1.0, 2.0, 3.0, 4.0, 5.0])
  assert client.updates == [(TABLE, {k: float(i + 1) for i, k in enumerate(B12_KEYS)})]
  np.testing.assert_array_equal(priorities_lib.item_keys(B12_KEYS),
                                np.array(B12_KEYS, np.uint64))
  assert [int(k) for k in priorities_lib.item_keys(np.array(B12_KEYS, np.uint64))] == B12_KEYS


def test_b12_non_integer_keys_are_refused_and_nothing_is_written():
  client = _RecordingClient()
  for bad, what in [(np.asarray(B12_KEYS), "float64"), ([17, 2.5], "2.5"),
                    ([17, -1], "-1"), ([2**64], str(2**64)), ([True], "True")]:
    with pytest.raises(ValueError, match="replay item keys must be") as info:
      priorities_lib.update_priorities(client, TABLE, bad, [1.0] * len(bad))
    assert what in str(info.value)
  assert client.updates == []


def test_b12_keys_above_2_63_update_a_real_reverb_table(table):
  client, keys = table
  as_list = [int(k) for k in keys]  # whatever mix of large and small keys Reverb drew
  priorities_lib.update_priorities(client, TABLE, as_list, [0.0, 0.0, 0.0, 7.0])
  try:
    _, priorities, found = _sample_indices(client, 200)
    assert set(found) == {3} and set(priorities) == {7.0}
  finally:
    priorities_lib.update_priorities(client, TABLE, keys, [0.0, 0.0, 3.0, 0.0])
