"""The in-process replay against a real embedded Reverb server: same distributions, same
n-step transitions and rollouts through unchanged adders, same batch layout; seeded
determinism, state/restore, case R2, signature checks and the errors of one process."""
import pickle

import dm_env
import numpy as np
import pytest
import reverb
import tree
from acme import specs, types
from acme.adders import reverb as adders_reverb
from scipy import stats

from actorq.components.replay import adders, local_replay, reverb_replay as replay, rollouts
from actorq.components.replay import priorities as priorities_lib

ENV_SPEC = specs.EnvironmentSpec(
    observations=specs.Array((2,), np.float32), actions=specs.DiscreteArray(2, dtype=np.int32),
    rewards=specs.Array((), np.float32), discounts=specs.BoundedArray((), np.float32, 0.0, 1.0))
EXTRAS = {"logits": specs.Array((2,), np.float32), "log_prob": specs.Array((), np.float32)}
GAMMA, N_STEP, T = 0.5, 3, 4
# (first observation, rewards, how the episode ends): E1's two episodes, a longer one,
# a one-step and a two-step one.
EPISODES = [(0, [1, 2, 4], "truncated"), (10, [1, 2, 4], "terminated"),
            (20, [1, 0, 0, 1, 2, 3], "terminated"), (30, [5], "truncated"),
            (40, [8, 16], "truncated")]


@pytest.fixture(name="reverb_client")
def _reverb_client():
  """Starts an embedded Reverb server on the tables passed to the returned function."""
  servers = []

  def start(tables):
    servers.append(reverb.Server(tables))
    return reverb.Client(f"localhost:{servers[-1].port}")

  yield start
  # The tests close their writers and adders (acme's SequenceAdder and the dataset
  # iterators go with the test's frame), so no stream holds Server.stop for 5 s and no
  # full gc.collect() (~1 s each) is needed.
  for server in servers:
    server.stop()


def _transition_table(name="t", sampler=None, max_size=100, min_size=1):
  return reverb.Table(name, sampler or reverb.selectors.Uniform(), reverb.selectors.Fifo(),
                      max_size, reverb.rate_limiters.MinSize(min_size),
                      signature=adders_reverb.NStepTransitionAdder.signature(ENV_SPEC))


def _transition_queue(name="q", max_size=100):
  return reverb.Table.queue(name, max_size, signature=adders_reverb.NStepTransitionAdder.signature(
      ENV_SPEC))


def _write_items(client, table, priorities, first=0):
  """Items first, first + 1, ... (observation = [i, i], reward = i) with `priorities`,
  through the writer API both clients share."""
  writer = client.trajectory_writer(num_keep_alive_refs=1)
  for i, p in enumerate(priorities, start=first):
    obs = np.full(2, i, np.float32)
    writer.append(types.Transition(obs, np.int32(i % 2), np.float32(i), np.float32(1.0), obs, ()))
    writer.create_item(table, float(p), tree.map_structure(lambda c: c[-1], writer.history))
  writer.flush()
  writer.close()


def _timestep(step_type, reward, discount, obs):
  return dm_env.TimeStep(step_type, np.float32(reward), np.float32(discount),
                         np.full(2, obs, np.float32))


def _run_episodes(adder, episodes, with_extras=False):
  for first, rewards, end in episodes:
    adder.add_first(dm_env.restart(np.full(2, first, np.float32)))
    for k, r in enumerate(rewards):
      last = k == len(rewards) - 1
      ts = _timestep(dm_env.StepType.LAST if last else dm_env.StepType.MID, r,
                     0.0 if last and end == "terminated" else 1.0, first + k + 1)
      if not with_extras:
        adder.add(np.int32(k % 2), ts)
      else:
        adder.add(np.int32(k % 2), ts, {"logits": np.full(2, k, np.float32),
                                        "log_prob": np.float32(-k)})


def _reverb_queue_items(client, table):
  """Every item of a Reverb queue, oldest first (cannot block: exactly current_size)."""
  size = client.server_info()[table].current_size
  items = client.sample(table, num_samples=size, emit_timesteps=False,
                        unpack_as_table_signature=True)
  return [s.data for s in items]


def _local_queue_items(client, table):
  size = client.server_info()[table].current_size
  batch = client.sample_batch(table, size).data
  return [tree.map_structure(lambda x, i=i: x[i], batch) for i in range(size)]


def _assert_same_items(a, b):
  assert len(a) == len(b)
  for x, y in zip(a, b):
    tree.map_structure(np.testing.assert_array_equal, x, y)


# --- the same adders, the same items ------------------------------------------------------


def _rows(transitions):
  """Transitions as sorted hashable rows (a multiset to compare)."""
  return sorted(tuple(np.asarray(x).tobytes() for x in tree.flatten(t)) for t in transitions)


@pytest.mark.parametrize("adder_cls", [adders.NStepTransitionAdder,
                                       adders_reverb.NStepTransitionAdder])
def test_nstep_adders_store_the_same_transitions(reverb_client, adder_cls):
  """Each transition goes to a queue (read back in order) and a uniform table."""
  tables = lambda: [_transition_queue(), _transition_table("t")]
  remote = reverb_client(tables())
  local = local_replay.LocalReplayClient(tables(), seed=0)
  for client in (remote, local):
    adder = replay.ValidatingAdder(adder_cls(client, n_step=N_STEP, discount=GAMMA,
                                             priority_fns={"q": None, "t": None}), ENV_SPEC)
    _run_episodes(adder, EPISODES)
    adder.close()
  ts = _local_queue_items(local, "q")
  _assert_same_items(_reverb_queue_items(remote, "q"), ts)
  # The uniform tables hold the same multiset (Reverb's read by sampling until every key
  # has been seen: 15 items through actorq's adder, a few more through acme's; 3,000 samples).
  size = remote.server_info()["t"].current_size
  assert size == local.server_info()["t"].current_size == len(ts)
  by_key = {int(s.info.key): s.data for s in remote.sample(
      "t", num_samples=3_000, emit_timesteps=False, unpack_as_table_signature=True)}
  assert len(by_key) == size
  local_rows = tree.unflatten_as(ts[0], local.state()["tables"]["t"]["columns"])
  assert _rows(by_key.values()) == _rows(
      [tree.map_structure(lambda x, i=i: x[i], local_rows) for i in range(size)]) == _rows(ts)
  if adder_cls is adders.NStepTransitionAdder:  # case E1: one transition per step
    assert len(ts) == sum(len(r) for _, r, _ in EPISODES)
    assert [float(t.observation[0]) for t in ts[:6]] == [0, 1, 2, 10, 11, 12]
    assert all(float(t.next_observation[0]) == 3 for t in ts[:3])
    assert all(float(t.next_observation[0]) == 13 for t in ts[3:6])
    np.testing.assert_allclose([float(t.reward) for t in ts[:6]], [3, 4, 4, 3, 4, 4])
    # truncated: gamma^(m-1) (the learner's extra gamma makes 0.125, 0.25, 0.5); terminated: 0
    np.testing.assert_allclose([float(t.discount) for t in ts[:6]], [0.25, 0.5, 1, 0, 0, 0])
    # the last episode (rewards 8, 16, truncated) is untouched by the ones before it
    np.testing.assert_allclose([float(t.reward) for t in ts[-2:]], [8 + 0.5 * 16, 16])
  else:  # acme's adder also writes the shortened transitions at each episode start
    assert len(ts) > sum(len(r) for _, r, _ in EPISODES)


def test_rollout_adder_fills_the_same_queue_in_the_same_order(reverb_client):
  tables = lambda: [rollouts.rollout_queue("r", ENV_SPEC, EXTRAS, T, max_size=50)]
  remote = reverb_client(tables())
  local = local_replay.LocalReplayClient(tables(), seed=0)
  counts = []
  for client in (remote, local):
    adder = rollouts.make_rollout_adder(client, "r", ENV_SPEC, EXTRAS, T)
    _run_episodes(adder, EPISODES, with_extras=True)
    counts.append(adder.items_written)
    adder.close()
  assert counts[0] == counts[1] == 4  # (15 actions + 5 terminal steps - 1) // T
  assert remote.server_info()["r"].current_size == local.server_info()["r"].current_size == 4
  it = rollouts.RolloutIterator(remote.server_address, "r", batch_size=4, timeout_ms=5_000)
  theirs = next(it)
  del it
  ours = next(local.iterator("r", 4))
  tree.map_structure(np.testing.assert_array_equal, theirs.data, ours.data)
  np.testing.assert_array_equal(theirs.info.table_size, ours.info.table_size)  # 4, 3, 2, 1
  np.testing.assert_array_equal(ours.info.key, np.arange(4))
  np.testing.assert_array_equal(ours.data.observation[0, :, 0], [0, 1, 2, 3, 10])
  np.testing.assert_array_equal(ours.data.start_of_episode[0], [1, 0, 0, 0, 1])
  assert local.server_info()["r"].current_size == 0  # a queue's samples leave it


def test_acme_zero_pad_sequence_adder_stores_the_same_sequences(reverb_client):
  """acme's default end behaviour pads with `history[-2].numpy()`-shaped zeros."""
  signature = adders_reverb.SequenceAdder.signature(ENV_SPEC, sequence_length=4)
  remote = reverb_client([reverb.Table.queue("s", 100, signature=signature)])
  local = local_replay.LocalReplayClient([reverb.Table.queue("s", 100, signature=signature)], 0)
  for client in (remote, local):
    adder = adders_reverb.SequenceAdder(client, sequence_length=4, period=2,
                                        priority_fns={"s": None})
    _run_episodes(adder, EPISODES)
    adder.reset()
  _assert_same_items(_reverb_queue_items(remote, "s"), _local_queue_items(local, "s"))


def test_batches_have_the_dtypes_and_shapes_of_the_reverb_dataset(reverb_client):
  remote = reverb_client([_transition_table()])
  local = local_replay.LocalReplayClient([_transition_table()], seed=0)
  for client in (remote, local):
    _write_items(client, "t", [1.0] * 6)
  it = replay.make_iterator(remote, "t", 4)  # numpy_iterator(make_dataset(...))
  theirs = next(it)
  del it
  ours = next(replay.make_iterator(local, "t", 4))  # local.iterator("t", 4)
  describe = lambda s: tree.map_structure(lambda x: (x.dtype, x.shape), s)
  assert describe(ours) == describe(theirs)
  # Both rebuild the signature's namedtuple from the table's proto (a class named Transition,
  # made by TF's structure coder, with acme's fields).
  assert type(ours.data).__name__ == type(theirs.data).__name__ == "Transition"
  assert ours.data._fields == theirs.data._fields == types.Transition._fields
  assert ours.data.extras == theirs.data.extras == ()


# --- the same distribution ----------------------------------------------------------------

PRIORITIES = [0.5, 1.0, 2.0, 3.0, 0.25, 5.0, 1.5, 4.0]
NUM_SAMPLES = 12_000


@pytest.mark.parametrize("sampler,alpha", [("uniform", None), ("prioritized", 0.6)])
def test_sampling_distribution_matches_reverb(reverb_client, sampler, alpha):
  make = lambda: _transition_table(sampler=(reverb.selectors.Uniform() if alpha is None
                                            else reverb.selectors.Prioritized(alpha)))
  remote = reverb_client([make()])
  local = local_replay.LocalReplayClient([make()], seed=1)
  for client in (remote, local):
    _write_items(client, "t", PRIORITIES)
  p = np.asarray(PRIORITIES) ** (0.0 if alpha is None else alpha)
  expected = p / p.sum()  # Schaul et al. 2016, eq. 1 (uniform: alpha = 0)
  it = replay.numpy_iterator(replay.make_dataset(remote.server_address, "t", 1_000))
  theirs = [next(it) for _ in range(NUM_SAMPLES // 1_000)]
  del it
  ours = local.sample_batch("t", NUM_SAMPLES)
  for name, items, probs in (
      ("reverb", np.concatenate([s.data.reward for s in theirs]).astype(int),
       np.concatenate([s.info.probability for s in theirs])),
      ("local", ours.data.reward.astype(int), ours.info.probability)):
    counts = np.bincount(items, minlength=len(PRIORITIES))
    pvalue = stats.chisquare(counts, NUM_SAMPLES * expected).pvalue
    assert pvalue > 1e-4, (name, counts, NUM_SAMPLES * expected)
    np.testing.assert_allclose(probs, expected[items], rtol=1e-9, err_msg=name)
  assert set(ours.info.table_size) == {len(PRIORITIES)}
  np.testing.assert_array_equal(ours.info.priority,
                                np.asarray(PRIORITIES)[ours.data.reward.astype(int)])


# --- determinism and checkpoints ----------------------------------------------------------


def _client(seed, max_size=100):
  return local_replay.LocalReplayClient(
      [_transition_table("u", max_size=max_size),
       _transition_table("p", reverb.selectors.Prioritized(0.6), max_size=max_size),
       _transition_queue(max_size=max_size + 500)], seed=seed)


def _fill(client, first, count):
  rng = np.random.default_rng(first)
  for table in ("u", "p", "q"):
    _write_items(client, table, rng.random(count) + 0.1, first=first)


def _stream(client, batches=5):
  out = []
  for _ in range(batches):
    for table in ("u", "p"):
      s = client.sample_batch(table, 16)
      out.append((s.info.key.copy(), s.info.probability.copy(), s.data.observation.copy()))
    client.mutate_priorities("p", updates={int(k): float(k % 7 + 1) for k in s.info.key})
  out.append(tuple(client.sample_batch("q", 3).info.key))
  return out


def test_the_same_seed_gives_the_same_stream_and_another_seed_another():
  a, b, c = _client(7), _client(7), _client(8)
  for client in (a, b, c):
    _fill(client, 0, 40)
  sa, sb, sc = _stream(a), _stream(b), _stream(c)
  _assert_same_items(sa, sb)
  assert not all(np.array_equal(x[0], y[0]) for x, y in zip(sa[:-1], sc[:-1]))


def test_state_and_restore_continue_the_identical_stream():
  # max_size past the first allocation (1,024 slots): the tables grow, then evict
  a = _client(3, max_size=1_100)
  _fill(a, 0, 1_050)
  _stream(a)
  state = pickle.loads(pickle.dumps(a.state()))
  expected = _stream(a)
  _fill(a, 1_050, 300)
  expected += _stream(a)
  b = _client(99, max_size=1_100)  # another seed and other contents: all of it is replaced
  _fill(b, 5_000, 30)
  b.restore(state)
  got = _stream(b)
  _fill(b, 1_050, 300)
  got += _stream(b)
  _assert_same_items(expected, got)
  tree.map_structure(np.testing.assert_array_equal, a.state(), b.state())
  info = b.server_info()
  assert info["u"].current_size == 1_100 and info["u"].num_inserted == 1_350
  assert b.sample_batch("u", 1_000).info.key.min() >= 250  # the oldest 250 were evicted
  with pytest.raises(ValueError, match="tables"):
    local_replay.LocalReplayClient([_transition_queue()], seed=0).restore(state)
  state["tables"]["p"]["columns"][0] = state["tables"]["p"]["columns"][0][:, :1]
  with pytest.raises(ValueError, match="state column 'observation'"):
    b.restore(state)


# --- case R2, signatures, errors ----------------------------------------------------------


def test_r2_only_the_positive_priority_is_sampled_and_bad_updates_write_nothing():
  client = local_replay.LocalReplayClient(
      [_transition_table("p", reverb.selectors.Prioritized(0.6))], seed=0)
  _write_items(client, "p", [1.0, 1.0, 1.0, 1.0])
  client.mutate_priorities("p", updates={0: 0.0, 1: 0.0, 2: 3.0, 3: 0.0})
  for bad in (np.nan, np.inf, -np.inf, -1.0):
    with pytest.raises(ValueError, match="finite and >= 0"):
      client.mutate_priorities("p", updates={0: 5.0, 1: bad})
    with pytest.raises(ValueError, match="finite and >= 0"):
      priorities_lib.update_priorities(client, "p", np.array([0, 1], np.uint64), [5.0, bad])
  s = client.sample_batch("p", 10_000)
  np.testing.assert_array_equal(s.info.key, 2)
  np.testing.assert_array_equal(s.info.priority, 3.0)
  np.testing.assert_array_equal(s.info.probability, 1.0)
  np.testing.assert_array_equal(client.state()["tables"]["p"]["priorities"], [0, 0, 3, 0])
  with pytest.raises(ValueError, match="finite and >= 0"):  # an insert is checked too
    _write_items(client, "p", [float("nan")], first=4)
  assert client.server_info()["p"].current_size == 4
  client.mutate_priorities("p", updates={0: 0.0, 1: 0.0, 2: 0.0, 3: 0.0})  # all zero: uniform
  s = client.sample_batch("p", 4_000)
  assert set(s.info.key.tolist()) == {0, 1, 2, 3}
  np.testing.assert_array_equal(s.info.probability, 0.25)


def test_a_zero_priority_is_never_drawn_even_with_exponent_zero():
  """Reverb's Prioritized(0) takes 0^0 as 0, not 1 (checked on reverb 0.7.0)."""
  client = local_replay.LocalReplayClient(
      [_transition_table("p", reverb.selectors.Prioritized(0.0))], seed=0)
  _write_items(client, "p", [0.0, 1.0, 2.0])
  s = client.sample_batch("p", 2_000)
  assert set(s.info.key.tolist()) == {1, 2}
  np.testing.assert_array_equal(s.info.probability, 0.5)


@pytest.mark.parametrize("obs,message", [
    (np.zeros(2, np.float64), r"column 'observation' is float64 \[2\] but the table signature "
                              r"says float32 \[2\]"),
    (np.zeros(3, np.float32), r"column 'observation' is float32 \[3\] but the table signature "
                              r"says float32 \[2\]")])
def test_signature_violations_raise_naming_the_column_and_store_nothing(obs, message):
  client = local_replay.LocalReplayClient([_transition_table()], seed=0)
  writer = client.trajectory_writer(num_keep_alive_refs=2)
  writer.append({"o": obs, "a": np.int32(0), "r": np.float32(0)})
  h = writer.history
  item = types.Transition(h["o"][-1], h["a"][-1], h["r"][-1], h["r"][-1], h["o"][-1], ())
  with pytest.raises(ValueError, match=message):
    writer.create_item("t", 1.0, item)
  with pytest.raises(ValueError, match="has 1 columns but the table signature has 5"):
    writer.create_item("t", 1.0, [h["o"][-1]])
  assert client.server_info()["t"].current_size == 0
  # acme's adder behind no validation: the table's check names the column
  adder = adders.NStepTransitionAdder(client, n_step=1, discount=1.0, priority_fns={"t": None})
  adder.add_first(dm_env.restart(np.zeros(2, np.float32)))
  with pytest.raises(ValueError, match="column 'reward' is float64"):
    adder.add(np.int32(0), dm_env.transition(np.float64(1.0), np.zeros(2, np.float32),
                                             np.float32(1.0)))
  assert client.server_info()["t"].current_size == 0


def test_writer_history_and_episode_steps_follow_reverb(reverb_client):
  remote = reverb_client([_transition_table()])
  local = local_replay.LocalReplayClient([_transition_table()], seed=0)
  seen = []
  for client in (remote, local):
    w = client.trajectory_writer(num_keep_alive_refs=3)
    log = []
    w.append({"a": np.int32(1)}, partial_step=True)
    log.append(w.episode_steps)
    w.append({"b": np.float32(2)})  # a new column, in the open step
    log.append(w.episode_steps)
    for i in range(3, 7):
      w.append({"a": np.int32(i), "b": np.float32(i)})
    log += [w.episode_steps, len(w.history["a"]), w.history["a"][-3:].numpy().tolist(),
            w.history["b"][3].numpy().tolist(), w.history["a"][[-1, -2]].shape]
    with pytest.raises(ValueError):  # older than num_keep_alive_refs
      w.history["a"][0]  # pylint: disable=pointless-statement
    with pytest.raises(ValueError):  # a column keeps its first dtype
      w.append({"a": np.float64(1.0)})
    w.append({"a": np.int32(7)}, partial_step=True)
    with pytest.raises(ValueError, match="already been set"):
      w.append({"a": np.int32(8)})
    w.end_episode(clear_buffers=True)
    log.append(w.episode_steps)
    w.close()
    seen.append(log)
  assert seen[0] == seen[1] == [0, 1, 5, 5, [4, 5, 6], 5.0, (2,), 0]


def test_one_process_errors_are_raised_not_waited_for():
  client = local_replay.LocalReplayClient(
      [_transition_table("t", min_size=5), reverb.Table.queue(
          "q", 3, signature=adders_reverb.NStepTransitionAdder.signature(ENV_SPEC))], seed=0)
  _write_items(client, "t", [1.0, 1.0])
  with pytest.raises(local_replay.NotEnoughItemsError, match="holds 2 items.*needs 5"):
    client.sample_batch("t", 1)
  _write_items(client, "q", [1.0, 1.0, 1.0])
  with pytest.raises(local_replay.TableFullError, match="queue 'q' is full"):
    _write_items(client, "q", [1.0], first=3)
  with pytest.raises(local_replay.NotEnoughItemsError, match="needs 4"):
    client.sample_batch("q", 4)
  assert client.server_info()["q"].current_size == 3  # nothing was taken
  with pytest.raises(ValueError, match='Could not find table "nope"'):
    client.iterator("nope", 1)
  with pytest.raises(NotImplementedError, match="lifo"):
    local_replay.LocalReplayClient([reverb.Table.stack(
        "s", 3, signature=adders_reverb.NStepTransitionAdder.signature(ENV_SPEC))], seed=0)
  with pytest.raises(NotImplementedError, match="deletes"):
    client.mutate_priorities("t", deletes=[0])


def test_fifo_remover_keeps_the_newest_items():
  client = local_replay.LocalReplayClient([_transition_table("t", max_size=5)], seed=0)
  _write_items(client, "t", [1.0] * 8)
  assert client.server_info()["t"].current_size == 5
  keys = client.sample_batch("t", 500).info.key
  assert set(keys.tolist()) == {3, 4, 5, 6, 7}


def test_priority_arrays_write_what_the_dict_writes_repeated_keys_last():
  """`mutate_priority_arrays` (the learner's write-back path) leaves the table, and so the
  sampled stream, exactly as `mutate_priorities` with the dict of the same pairs: a
  repeated key takes its last priority, keys not in the table are ignored."""
  a, b = (local_replay.LocalReplayClient(
      [_transition_table("p", reverb.selectors.Prioritized(0.6))], seed=3) for _ in range(2))
  for client in (a, b):
    _write_items(client, "p", [1.0, 1.0, 1.0, 1.0])
  keys = np.array([2, 0, 2, 7, 1], np.uint64)  # 2 twice, 7 never written
  values = [5.0, 0.5, 9.0, 4.0, 0.0]
  a.mutate_priorities("p", updates=dict(zip(keys.tolist(), values)))
  priorities_lib.update_priorities(b, "p", keys, values)
  np.testing.assert_array_equal(b.state()["tables"]["p"]["priorities"], [0.5, 0.0, 9.0, 1.0])
  np.testing.assert_array_equal(a.state()["tables"]["p"]["tree_nodes"],
                                b.state()["tables"]["p"]["tree_nodes"])
  np.testing.assert_array_equal(a.sample_batch("p", 64).info.key,
                                b.sample_batch("p", 64).info.key)
  with pytest.raises(ValueError, match="integers in 0 .. 2\\*\\*64 - 1"):
    b.mutate_priority_arrays("p", np.array([-1, 0]), [1.0, 1.0])
  with pytest.raises(ValueError, match="one priority per key"):
    b.mutate_priority_arrays("p", np.array([0, 1], np.uint64), [1.0])
