"""Vectorized actors (issue 16): per-env n-step correctness of the batched adder, auto-reset
of the vector backends, batched inference against per-row inference at every precision,
determinism of a single-process run with B > 1, and the refusals."""
import subprocess
import sys
import warnings

import dm_env
import jax
import numpy as np
import pytest
import reverb
import tree
from acme import specs
from acme.adders import reverb as adders_reverb

from actorq.agents.dqn import builder as dqn_builder
from actorq.agents.dqn import config as dqn_config_lib
from actorq.benchmarks import vector_bench
from actorq.components.acting import actors
from actorq.components.acting import loop as loop_lib
from actorq.components.acting import variable_client as vc
from actorq.components.envs import environments, vector_env
from actorq.components.replay import adders, local_replay, reverb_replay as replay
from actorq.components.envs import single_agent
from actorq.launch import experiment, local
from actorq.quantization import network_spec as ns
from actorq.quantization import payload as pl
from actorq.quantization import runtimes
from actorq.testing import fakes

N_STEP, DISCOUNT = 3, 0.9
# (episode length, truncated?) per env: episodes shorter and longer than N, a 1-step one.
EPISODES = [(3, False), (5, True), (1, False), (7, False), (2, True)]


def scripted_envs():
  return [fakes.ScriptedEnvironment([0.1 * (i + 1) + 0.37 * t for t in range(length)],
                                    truncate=truncate, observation_offset=100.0 * i)
          for i, (length, truncate) in enumerate(EPISODES)]


SPEC = specs.make_environment_spec(scripted_envs()[0])


def table_client(seed=0):
  table = replay.transition_table("t", SPEC, max_size=100_000, min_size=1)
  return local_replay.LocalReplayClient([table], seed=seed)


def stored(client):
  """Every item of table "t", oldest first, as flattened columns [K, ...]."""
  t = client._table("t")  # pylint: disable=protected-access
  slots = t._live_slots()  # pylint: disable=protected-access
  return [c[slots] for c in t.columns]


def per_env(columns):
  """Item columns split by env (observation // 100), each in write order."""
  env = (columns[0][:, 0] // 100).astype(int)
  return {i: [c[env == i] for c in columns] for i in sorted(set(env.tolist()))}


class CountPerEnv(loop_lib.Hook):
  def __init__(self):
    self.steps = {}

  def on_step(self, loop, action, timestep):
    i = int(timestep.observation[0] // 100)
    self.steps[i] = self.steps.get(i, 0) + 1


def run_batched(adder, iterations_steps=120):
  envs = scripted_envs()
  venv = fakes.ScriptedVectorEnvironment(envs)
  runtime = fakes.FixedRuntime([0.0, 1.0])
  actor = actors.BatchedFeedForwardActor(runtime, actors.greedy, adder=adder,
                                         dummy_action=np.int32(0))
  counts = CountPerEnv()
  loop = loop_lib.VectorActorLoop(venv, actor, hooks=[counts])
  loop.run(num_steps=iterations_steps)
  return envs, runtime, counts, loop


def run_alone(i, steps, n_step=N_STEP, envs=None):
  """Env i (of `envs()`, default `scripted_envs()`) alone through the one-env path:
  ActorLoop + ValidatingAdder(NStepTransitionAdder)."""
  client = table_client()
  adder = replay.ValidatingAdder(adders.NStepTransitionAdder(
      client, n_step=n_step, discount=DISCOUNT, priority_fns={"t": None}), SPEC)
  actor = actors.FeedForwardActor(fakes.FixedRuntime([0.0, 1.0]), actors.greedy, adder=adder)
  loop_lib.ActorLoop((envs or scripted_envs)()[i], actor).run(num_steps=steps)
  return stored(client)


def test_batched_adder_gives_each_env_exactly_its_transitions_alone():
  client = table_client()
  adder = adders.BatchedNStepTransitionAdder(client, "t", len(EPISODES), N_STEP, DISCOUNT, SPEC)
  _, runtime, counts, loop = run_batched(adder)
  assert set(runtime.calls) == {len(EPISODES)}  # one inference for all rows per step
  assert loop.steps == 120 and sum(counts.steps.values()) == 120
  batched = per_env(stored(client))
  assert adder.items_written == sum(len(cols[0]) for cols in batched.values())
  for i, (length, _) in enumerate(EPISODES):
    alone = run_alone(i, counts.steps[i])
    assert len(alone[0]) > length  # several episodes each
    for got, want in zip(batched[i], alone):
      np.testing.assert_array_equal(got, want)  # bit for bit, every column


def test_batched_adder_discount_set_later_equals_one_given_at_construction():
  """PBT mutates a member's discount (issue 43): the n-step returns written after the
  change are those of an adder built with the new discount, bit for bit."""
  given, changed = table_client(), table_client()
  run_batched(adders.BatchedNStepTransitionAdder(given, "t", len(EPISODES), N_STEP, 0.5, SPEC))
  adder = adders.BatchedNStepTransitionAdder(changed, "t", len(EPISODES), N_STEP, DISCOUNT, SPEC)
  assert adder.discount == pytest.approx(DISCOUNT)
  adder.discount = 0.5
  assert adder.discount == 0.5
  run_batched(adder)
  for got, want in zip(stored(changed), stored(given), strict=True):
    np.testing.assert_array_equal(got, want)
  assert DISCOUNT != 0.5


# Eight envs whose episodes end together now and then (lengths 1, 2, 4 and 8 align).
EPISODES_8 = [(1, False), (2, True), (3, False), (4, False), (5, True), (2, False), (8, True),
              (4, True)]


def scripted_envs_8():
  return [fakes.ScriptedEnvironment([0.3 * (i + 1) - 0.11 * t for t in range(length)],
                                    truncate=truncate, observation_offset=100.0 * i)
          for i, (length, truncate) in enumerate(EPISODES_8)]


def run_vector(n_step, hooks, num_steps=203):
  """The eight scripted envs through VectorActorLoop and a batched adder of `n_step`."""
  client = table_client()
  adder = adders.BatchedNStepTransitionAdder(client, "t", 8, n_step, DISCOUNT, SPEC)
  actor = actors.BatchedFeedForwardActor(fakes.FixedRuntime([0.0, 1.0]), actors.greedy,
                                         adder=adder, dummy_action=np.int32(0))
  loop = loop_lib.VectorActorLoop(fakes.ScriptedVectorEnvironment(scripted_envs_8()), actor,
                                  hooks=hooks)
  finished = loop.run(num_steps=num_steps)
  return client, adder, loop, finished


@pytest.mark.parametrize("n_step", [1, 3, 5])
def test_vectorized_adder_writes_what_b_independent_adders_write(n_step):
  """Every env's items (all columns, in time order) are bit for bit those acme's n-step
  adder writes for that env alone, with windows shorter and longer than n, episodes
  ending together, truncations and terminations, and rows skipped while they reset."""
  counts = CountPerEnv()
  client, adder, loop, _ = run_vector(n_step, [counts])
  assert loop.steps == 203 and sum(counts.steps.values()) == 203
  batched = per_env(stored(client))
  assert adder.items_written == sum(len(cols[0]) for cols in batched.values())
  for i, (length, _) in enumerate(EPISODES_8):
    alone_client = table_client()
    alone = replay.ValidatingAdder(adders.NStepTransitionAdder(
        alone_client, n_step=n_step, discount=DISCOUNT, priority_fns={"t": None}), SPEC)
    actor = actors.FeedForwardActor(fakes.FixedRuntime([0.0, 1.0]), actors.greedy, adder=alone)
    loop_lib.ActorLoop(scripted_envs_8()[i], actor).run(num_steps=counts.steps[i])
    want = stored(alone_client)
    assert len(want[0]) >= 3 * min(length, n_step)  # several episodes each
    for got, w in zip(batched[i], want):
      np.testing.assert_array_equal(got, w)


@pytest.mark.parametrize("n_step", [1, 3])
def test_vector_loop_without_per_step_hooks_writes_and_counts_the_same(n_step):
  """The loop's path without per-step hooks (one `update_steps` per run of rows) leaves
  the table, the step and episode counts and the finished episodes of the per-row path,
  in the same order."""
  class EndsOnly(loop_lib.Hook):  # no on_step: the batched path
    def __init__(self):
      self.seen = []

    def on_episode_end(self, loop, stats):
      self.seen.append((loop.steps, loop.episodes, stats.episode_length))

  per_row_hook, ends = CountPerEnv(), EndsOnly()
  want_client, _, want_loop, want = run_vector(n_step, [per_row_hook, EndsOnly()])
  got_client, _, got_loop, got = run_vector(n_step, [ends])
  assert (got_loop.steps, got_loop.episodes) == (want_loop.steps, want_loop.episodes) == (
      203, len(want))
  assert [(e.episode_return, e.episode_length) for e in got] == [
      (e.episode_return, e.episode_length) for e in want]
  assert ends.seen == want_loop._hooks[1].seen  # pylint: disable=protected-access
  for g, w in zip(stored(got_client), stored(want_client)):
    np.testing.assert_array_equal(g, w)


def run_alone_single_env_adder(i, steps):
  """Env i alone through ActorLoop + SingleEnvAdder (the single-process path's adder)."""
  client = table_client()
  adder = adders.SingleEnvAdder(adders.BatchedNStepTransitionAdder(client, "t", 1, N_STEP,
                                                                   DISCOUNT, SPEC))
  actor = actors.FeedForwardActor(fakes.FixedRuntime([0.0, 1.0]), actors.greedy, adder=adder)
  loop_lib.ActorLoop(scripted_envs()[i], actor).run(num_steps=steps)
  assert adder.items_written == len(stored(client)[0])
  return stored(client)


@pytest.mark.parametrize("i", range(len(EPISODES)))
def test_single_env_adder_writes_acmes_transitions_bit_for_bit(i):
  want, got = run_alone(i, 40), run_alone_single_env_adder(i, 40)
  assert len(want[0]) > 10
  for g, w in zip(got, want):
    np.testing.assert_array_equal(g, w)
    assert g.dtype == w.dtype


def test_single_env_adder_writes_at_the_same_steps_and_checks_the_same_way():
  acme_client, fast_client = table_client(), table_client()
  acme = replay.ValidatingAdder(adders.NStepTransitionAdder(
      acme_client, n_step=N_STEP, discount=DISCOUNT, priority_fns={"t": None}), SPEC)
  fast = adders.SingleEnvAdder(adders.BatchedNStepTransitionAdder(fast_client, "t", 1, N_STEP,
                                                                  DISCOUNT, SPEC))
  env = scripted_envs()[3]  # 7-step episodes
  timestep = env.reset()
  acme.add_first(timestep)
  fast.add_first(timestep)
  for _ in range(20):  # after every step both tables hold the same number of items
    timestep = env.step(np.int32(1))
    acme.add(np.int32(1), timestep)
    fast.add(np.int32(1), timestep)
    assert acme.items_written == fast.items_written == len(stored(fast_client)[0])
    if timestep.last():
      timestep = env.reset()
      acme.add_first(timestep)
      fast.add_first(timestep)
  bad = timestep._replace(step_type=dm_env.StepType.MID, reward=np.float32(np.nan))
  for adder in (acme, fast):
    with pytest.raises(replay.NonFiniteValueError, match="reward"):
      adder.add(np.int32(1), bad)
    with pytest.raises(TypeError, match="action"):
      adder.add(np.float32(1), timestep._replace(step_type=dm_env.StepType.MID))
  assert acme.items_written == fast.items_written


def test_the_single_process_builder_uses_the_single_env_adder():
  builder = dqn_builder.DQNBuilder(dqn_config_lib.DQNConfig())
  assert isinstance(builder.make_adder(table_client(), SPEC), adders.SingleEnvAdder)


def test_per_env_adders_match_the_batched_adder():
  client = table_client()
  per = adders.PerEnvAdders([replay.ValidatingAdder(adders.NStepTransitionAdder(
      client, n_step=N_STEP, discount=DISCOUNT, priority_fns={"t": None}), SPEC)
                             for _ in EPISODES])
  run_batched(per)
  other = table_client()
  run_batched(adders.BatchedNStepTransitionAdder(other, "t", len(EPISODES), N_STEP, DISCOUNT,
                                                 SPEC))
  a, b = per_env(stored(client)), per_env(stored(other))
  assert a.keys() == b.keys()
  for i in a:
    for x, y in zip(a[i], b[i]):
      np.testing.assert_array_equal(x, y)


def test_batched_adder_writes_the_same_items_to_reverb():
  local = table_client()
  run_batched(adders.BatchedNStepTransitionAdder(local, "t", len(EPISODES), N_STEP, DISCOUNT,
                                                 SPEC), 40)
  want = stored(local)
  queue = reverb.Table.queue("t", 10_000, signature=adders_reverb.NStepTransitionAdder.signature(
      SPEC))
  server = reverb.Server([queue])
  try:
    client = reverb.Client(f"localhost:{server.port}")
    adder = adders.BatchedNStepTransitionAdder(client, "t", len(EPISODES), N_STEP, DISCOUNT, SPEC)
    run_batched(adder, 40)
    adder.close()
    got = replay.sample(f"localhost:{server.port}", "t", len(want[0]), timeout_s=10)
    columns = [np.stack(c) for c in zip(*[
        [np.asarray(x) for x in tree.flatten(s.data)] for s in got])]
    for g, w in zip(columns, want):
      np.testing.assert_array_equal(g, w)
  finally:
    server.stop()


# ---------------------------------------------------------------------------------------
# The block adder (issue 40): the same items, computed and written every K steps.


def run_vector_blocks(adder, hooks, runs=(203,)):
  """The eight scripted envs through VectorActorLoop with `adder`, one `run` per entry of
  `runs` (each a new run: the envs reset, open episodes abandoned)."""
  actor = actors.BatchedFeedForwardActor(fakes.FixedRuntime([0.0, 1.0]), actors.greedy,
                                         adder=adder, dummy_action=np.int32(0))
  loop = loop_lib.VectorActorLoop(fakes.ScriptedVectorEnvironment(scripted_envs_8()), actor,
                                  hooks=hooks)
  for steps in runs:
    loop.run(num_steps=steps)
  return loop


@pytest.mark.parametrize("n_step,block", [(1, 1), (1, 7), (3, 1), (3, 2), (3, 5), (3, 16),
                                          (5, 3), (5, 64)])
def test_block_adder_writes_what_acme_writes_per_env(n_step, block):
  """Every env's items, bit for bit acme's n-step adder's for that env alone, for blocks
  that do not divide the episode lengths, blocks shorter than n, one longer than the run
  (everything written by `close`), episodes ending together and rows skipped while they
  reset; and the same per-env items as `BatchedNStepTransitionAdder`'s."""
  counts = CountPerEnv()
  client = table_client()
  adder = adders.BatchedNStepTransitionAdder(client, "t", 8, n_step, DISCOUNT,
                                             SPEC).in_blocks(block)
  assert isinstance(adder, adders.BlockNStepTransitionAdder) and adder.block_steps == block
  run_vector_blocks(adder, [counts])
  # 203 steps = 26 loop iterations: whole blocks are written, the staged rest on close.
  iterations = 26
  assert client.server_info()["t"].current_size == adder.items_written
  written_before_close = adder.items_written
  adder.close()
  if block > iterations:
    assert written_before_close == 0
  got = per_env(stored(client))
  assert adder.items_written == sum(len(cols[0]) for cols in got.values())
  want_client, _, _, _ = run_vector(n_step, [])
  batched = per_env(stored(want_client))
  for i, (length, _) in enumerate(EPISODES_8):
    want = run_alone(i, counts.steps[i], n_step, scripted_envs_8)
    assert len(want[0]) >= 3 * min(length, n_step)
    for g, w, v in zip(got[i], want, batched[i], strict=True):
      np.testing.assert_array_equal(g, w)
      np.testing.assert_array_equal(g, v)
      assert g.dtype == w.dtype


def test_block_adder_writes_whole_blocks_late_by_less_than_a_block():
  """Between two block boundaries nothing is written; at each boundary the table holds
  exactly what the per-step batched adder's held after the same step."""
  block = 4
  steady, blocked = table_client(), table_client()
  both = [adders.BatchedNStepTransitionAdder(steady, "t", 8, N_STEP, DISCOUNT, SPEC),
          adders.BlockNStepTransitionAdder(blocked, "t", 8, N_STEP, DISCOUNT, SPEC,
                                           block_steps=block)]
  venv = fakes.ScriptedVectorEnvironment(scripted_envs_8())
  batch = venv.reset()
  for adder in both:
    adder.add_first(np.arange(8), batch.observation)
  resetting, at_boundary = np.zeros(8, bool), 0
  for iteration in range(1, 31):
    actions = np.ones(8, np.int32)
    batch = venv.step(actions)
    moving, fresh = np.flatnonzero(~resetting), np.flatnonzero(resetting)
    last = batch.step_type == vector_env.LAST
    for adder in both:
      adder.add(moving, actions[moving], batch.reward[moving], batch.discount[moving],
                batch.observation[moving], last[moving], [()] * len(moving))
      adder.flush()
      if len(fresh):
        adder.add_first(fresh, batch.observation[fresh])
    sizes = [c.server_info()["t"].current_size for c in (steady, blocked)]
    if iteration % block == 0:
      assert sizes[1] == sizes[0] == both[0].items_written == both[1].items_written
      at_boundary = sizes[1]
    else:
      assert sizes[1] == at_boundary < sizes[0]
    resetting = last
  assert at_boundary > 100


def test_block_adder_drops_abandoned_episodes_as_the_batched_adder_does():
  """Runs that stop mid-episode (the next run resets every env): the steps of the
  abandoned episodes are never written, by either adder, with blocks across the cut."""
  runs = (37, 50, 29)
  want_client = table_client()
  run_vector_blocks(adders.BatchedNStepTransitionAdder(want_client, "t", 8, N_STEP, DISCOUNT,
                                                       SPEC), [], runs)
  got_client = table_client()
  adder = adders.BlockNStepTransitionAdder(got_client, "t", 8, N_STEP, DISCOUNT, SPEC,
                                           block_steps=5)
  run_vector_blocks(adder, [], runs)
  adder.drain()
  want, got = per_env(stored(want_client)), per_env(stored(got_client))
  assert want.keys() == got.keys()
  for i in want:
    for g, w in zip(got[i], want[i], strict=True):
      np.testing.assert_array_equal(g, w)


def test_block_adder_writes_the_same_items_to_reverb():
  local = table_client()
  run_batched(adders.BatchedNStepTransitionAdder(local, "t", len(EPISODES), N_STEP, DISCOUNT,
                                                 SPEC), 40)
  want = per_env(stored(local))
  queue = reverb.Table.queue("t", 10_000, signature=adders_reverb.NStepTransitionAdder.signature(
      SPEC))
  server = reverb.Server([queue])
  try:
    client = reverb.Client(f"localhost:{server.port}")
    adder = adders.BlockNStepTransitionAdder(client, "t", len(EPISODES), N_STEP, DISCOUNT, SPEC,
                                             block_steps=3)
    run_batched(adder, 40)
    adder.close()
    count = sum(len(c[0]) for c in want.values())
    assert adder.items_written == count
    got = replay.sample(f"localhost:{server.port}", "t", count, timeout_s=10)
    columns = [np.stack(c) for c in zip(*[
        [np.asarray(x) for x in tree.flatten(s.data)] for s in got])]
    got = per_env(columns)
    for i in want:
      for g, w in zip(got[i], want[i], strict=True):
        np.testing.assert_array_equal(g, w)
  finally:
    server.stop()


def test_block_adder_refuses_an_add_before_add_first_and_bad_settings():
  client = table_client()
  adder = adders.BlockNStepTransitionAdder(client, "t", 2, N_STEP, DISCOUNT, SPEC, block_steps=1)
  with pytest.raises(RuntimeError, match="env 0: add before add_first"):
    adder.add([0, 1], np.zeros(2, np.int32), np.ones(2, np.float32), np.ones(2, np.float32),
              np.ones((2, 1), np.float32), np.zeros(2, bool), [(), ()])
  adder.add_first([0, 1], np.zeros((2, 1), np.float32))  # the rows' checks: the next test
  adder.drain()
  assert adder.items_written == 0 and adder.steps_seen == 2
  for bad in (0, -1, True):
    with pytest.raises(ValueError, match="block_steps must be an integer >= 1"):
      adders.BlockNStepTransitionAdder(client, "t", 2, N_STEP, DISCOUNT, SPEC, block_steps=bad)



@pytest.mark.parametrize("block", [None, 1, 4])
def test_mask_form_of_add_checks_only_the_stepping_rows(block):
  """`add(mask, ...)` with whole-batch arrays: a row that does not step is neither
  checked nor stored (a NaN there is ignored); a stepping row is checked as in the int
  form (nothing stored on a refusal); the items equal the int form's."""
  def adder_of(client):
    adder = adders.BatchedNStepTransitionAdder(client, "t", 3, 1, DISCOUNT, SPEC)
    return adder if block is None else adder.in_blocks(block)

  got_client, want_client = table_client(), table_client()
  got, want = adder_of(got_client), adder_of(want_client)
  for adder in (got, want):
    adder.add_first([0, 1, 2], np.arange(3, dtype=np.float32)[:, None])
  mask = np.array([True, False, True])
  actions = np.array([1, 0, 1], np.int32)
  rewards = np.array([0.5, np.nan, 0.25], np.float32)
  discounts = np.ones(3, np.float32)
  nxt = np.array([[10.0], [np.inf], [12.0]], np.float32)
  got.add(mask, actions, rewards, discounts, nxt, np.zeros(3, bool), [(), ()])
  want.add([0, 2], actions[[0, 2]], rewards[[0, 2]], discounts[[0, 2]], nxt[[0, 2]],
           np.zeros(2, bool), [(), ()])
  bad = np.array([np.nan, 0.0, 0.0], np.float32)
  with pytest.raises(replay.NonFiniteValueError, match="'reward'"):
    got.add(mask, actions, bad, discounts, nxt, np.zeros(3, bool), [(), ()])
  for adder in (got, want):
    adder.close() if block else adder.flush()
  assert got.steps_seen == want.steps_seen == 5
  assert got.items_written == want.items_written == 2
  for g, w in zip(stored(got_client), stored(want_client), strict=True):
    np.testing.assert_array_equal(g, w)
  np.testing.assert_array_equal(stored(got_client)[4][:, 0], [10.0, 12.0])


def _vector_training_adder(config):
  env = single_agent.make_training_environment(config, 0)
  try:
    spec = single_agent.training_environment_spec(env)
    parts = experiment.agent_parts(config, spec)
    client = local_replay.LocalReplayClient(config.builder.make_replay_tables(spec), 0)
    source = fakes.FixedPolicySource(vector_bench.random_params(parts.networks.spec))
    adder, _ = single_agent.make_training_actor(config, parts, jax.random.PRNGKey(0), client,
                                              vc.PolicyServer(source, parts.networks.spec))
  finally:
    env.close()
  return adder


def test_vector_training_actor_stages_in_blocks():
  adder = _vector_training_adder(dqn_config(4))
  assert isinstance(adder, adders.BlockNStepTransitionAdder)
  assert adder.block_steps == adders.BLOCK_STEPS


def test_a_batched_adder_without_in_blocks_is_used_as_it_is(monkeypatch):
  config = dqn_config(4)
  plain = object()  # a user's batched adder: `in_blocks` is optional (core.VectorBuilder)
  monkeypatch.setattr(config.builder, "make_batched_adder", lambda *args: plain)
  assert _vector_training_adder(config) is plain


@pytest.mark.parametrize("block", [None, 1])  # the per-step adder; the block adder (issue 40)
def test_batched_adder_refuses_bad_rows_before_writing(block):
  client = table_client()
  adder = adders.BatchedNStepTransitionAdder(client, "t", 2, N_STEP, DISCOUNT, SPEC)
  adder = adder if block is None else adder.in_blocks(block)
  adder.add_first([0, 1], np.zeros((2, 1), np.float32))
  nan = np.array([1.0, np.nan], np.float32)
  with pytest.raises(replay.NonFiniteValueError, match="'reward'"):
    adder.add([0, 1], np.zeros(2, np.int32), nan, np.ones(2, np.float32),
              np.ones((2, 1), np.float32), np.zeros(2, bool), [(), ()])
  with pytest.raises(TypeError, match="'observation'"):
    adder.add([0, 1], np.zeros(2, np.int32), np.ones(2, np.float32), np.ones(2, np.float32),
              np.ones((2, 1), np.float64), np.zeros(2, bool), [(), ()])
  adder.flush()
  if block:
    adder.drain()  # the staged block too
  assert adder.items_written == 0 and client.server_info()["t"].current_size == 0


def test_local_insert_batch_equals_single_inserts():
  a, b = table_client(), table_client()
  ta = a._table("t")  # pylint: disable=protected-access
  ta.max_size = 5
  b._table("t").max_size = 5  # pylint: disable=protected-access
  rng = np.random.default_rng(0)
  for k in (3, 4, 9):
    cols = [rng.normal(size=(k, 1)).astype(np.float32), np.arange(k, dtype=np.int32),
            rng.random(k).astype(np.float32), rng.random(k).astype(np.float32),
            rng.normal(size=(k, 1)).astype(np.float32)]
    pr = rng.random(k) + 0.1
    a.insert_batch("t", cols, pr)
    for j in range(k):
      b._insert("t", pr[j], [c[j] for c in cols])  # pylint: disable=protected-access
  assert a.state()["tables"]["t"].keys() == b.state()["tables"]["t"].keys()
  for x, y in zip(stored(a), stored(b)):
    np.testing.assert_array_equal(x, y)
  assert a.server_info()["t"].current_size == 5


# ---------------------------------------------------------------------------------------
# Auto-reset.


def test_scripted_vector_env_resets_a_row_on_the_step_after_its_last():
  envs = [fakes.ScriptedEnvironment(episode_length=2), fakes.ScriptedEnvironment(episode_length=3)]
  venv = fakes.ScriptedVectorEnvironment(envs)
  types = [venv.reset().step_type.tolist()]
  for _ in range(6):
    batch = venv.step(np.array([1, 1], np.int32))
    types.append(batch.step_type.tolist())
    first = batch.step_type == vector_env.FIRST
    assert (batch.reward[first] == 0).all() and (batch.discount[first] == 1).all()
  F, M, L = vector_env.FIRST, vector_env.MID, vector_env.LAST
  assert [t[0] for t in types] == [F, M, L, F, M, L, F]
  assert [t[1] for t in types] == [F, M, M, L, F, M, M]
  assert len(envs[0].actions) == 4 and len(envs[1].actions) == 5  # reset steps send none


def episodes_of(venv, steps, action):
  """Per row: [(length, discount at LAST)] of the episodes that ended, checking the
  FIRST -> MID* -> LAST -> FIRST order on the way."""
  batch = venv.reset()
  previous = batch.step_type.copy()
  lengths = np.zeros(venv.num_envs, int)
  out = [[] for _ in range(venv.num_envs)]
  for _ in range(steps):
    batch = venv.step(np.stack([action] * venv.num_envs))
    for i, st in enumerate(batch.step_type.tolist()):
      if previous[i] == vector_env.LAST:
        assert st == vector_env.FIRST
        assert batch.reward[i] == 0 and batch.discount[i] == 1
        lengths[i] = 0
        continue
      assert st in (vector_env.MID, vector_env.LAST)
      lengths[i] += 1
      if st == vector_env.LAST:
        out[i].append((int(lengths[i]), float(batch.discount[i])))
    previous = batch.step_type.copy()
  return out, batch


def test_importing_envpool_leaves_the_process_warning_filters_as_they_were():
  # envpool imports gym 0.23, whose gym.logger calls warnings.simplefilter("once",
  # DeprecationWarning): without the restore `actorq pbt` printed haiku's, tensorflow's and
  # pyparsing's DeprecationWarnings. A fresh process, so that envpool is imported anew.
  script = ("import warnings\n"
            "from actorq.components.envs import vector_env\n"
            "before = list(warnings.filters)\n"
            "vector_env._envpool()\n"
            "import sys\n"
            "assert 'gym' in sys.modules, 'envpool no longer imports gym'\n"
            "print(list(warnings.filters) == before)\n")
  out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                       check=True, timeout=300)
  assert out.stdout.strip().splitlines()[-1] == "True"


@pytest.mark.parametrize("env_id,backend", [("gym:CartPole-v1", "envpool"),
                                            ("dmc:cartpole-balance", "envpool"),
                                            ("gym:FrozenLake-v1", "gymnasium")])
def test_backends_auto_reset_and_time_limit(env_id, backend):
  cap = 6
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    venv = vector_env.make_vector_environment(env_id, 3, seed=4, max_episode_steps=cap)
    again = vector_env.make_vector_environment(env_id, 3, seed=4, max_episode_steps=cap)
  assert venv.backend == backend
  spec = venv.environment_spec()
  action = spec.actions.generate_value()
  episodes, last = episodes_of(venv, 40, action)
  assert last.observation.dtype == spec.observations.dtype
  assert last.observation.shape == (3,) + spec.observations.shape
  assert all(len(e) >= 2 for e in episodes)
  for length, discount in sum(episodes, []):
    assert 1 <= length <= cap
    if length < cap:
      assert discount == 0.0  # ended before the cap: a termination
  if backend == "envpool" and env_id.startswith("dmc"):
    assert {d for e in episodes for _, d in e} == {1.0}  # dm_control ends only by the limit
  repeat, last2 = episodes_of(again, 40, action)
  assert repeat == episodes  # seeded
  np.testing.assert_array_equal(last.observation, last2.observation)
  venv.close()
  again.close()


def test_no_vector_backend_and_bad_num_envs_are_refused():
  with pytest.raises(vector_env.NoVectorBackendError, match="atari:Pong has no vector backend"):
    vector_env.check_num_envs("atari:Pong", 4)
  assert vector_env.check_num_envs("atari:Pong", 1) == 1
  with pytest.raises(vector_env.NoVectorBackendError, match="action repeat .* one-env path"):
    vector_env.check_num_envs("dmc:cartpole-balance@repeat=4", 2)
  assert vector_env.vector_backend("dmc:cartpole-balance@repeat=4") is None
  assert vector_env.vector_backend("dmc:cartpole-balance") == "envpool"
  # The suffix is parsed where it is defined (environments.split_action_repeat): a
  # malformed one is named, not taken for "no vector backend".
  with pytest.raises(environments.UnknownEnvironmentError, match="only suffix allowed"):
    vector_env.check_num_envs("dmc:cartpole-balance@frameskip=4", 2)
  for bad in (0, -1, 1.5, True):
    with pytest.raises(ValueError, match="num_envs must be an integer >= 1"):
      vector_env.check_num_envs("gym:CartPole-v1", bad)


# ---------------------------------------------------------------------------------------
# Batched inference.


@pytest.mark.parametrize("precision,tol", [("fp32", 1e-6), ("fp16", 2e-3), ("bf16", 2e-2),
                                           ("int8", 1e-5)])
def test_batched_inference_equals_per_row(precision, tol):
  spec = ns.mlp(8, [64, 64], 3)
  rng = np.random.default_rng(0)
  params = {n: {k: rng.normal(0, 0.3, s).astype(np.float32) for k, s in shp.items()}
            for n, shp in pl.expected_shapes(spec).items()}
  runtime = runtimes.make_runtime(precision, spec)
  runtime.load(pl.make_payload(params, spec, runtime.payload_precision, 1))
  obs = rng.normal(size=(16, 8)).astype(np.float32)
  batched = runtime(obs)
  rows = np.concatenate([runtime(obs[i:i + 1]) for i in range(16)])
  scale = np.abs(rows).max()
  assert np.abs(batched - rows).max() <= tol * scale
  if precision == "int8":  # and both within int8's error of the fp32 policy
    fp32 = runtimes.make_runtime("fp32", spec)
    fp32.load(pl.make_payload(params, spec, "fp32", 1))
    assert np.abs(batched - fp32(obs)).max() <= 0.05 * scale


def test_batched_actor_selects_per_row_with_one_generator():
  """A selector without a batch form runs row by row, in row order, on the one generator
  (what K one-env actors' calls draw)."""
  runtime = fakes.FixedRuntime([0.2, 0.1, 0.7])
  inner = actors.epsilon_greedy(lambda step: 0.5)
  selector = lambda outputs, rng, step: inner(outputs, rng, step)  # no `batch` attribute
  batched = actors.BatchedFeedForwardActor(runtime, selector, seed=3, dummy_action=np.int32(0))
  single = actors.FeedForwardActor(runtime, selector, seed=3)
  active = np.array([True, False, True, True])
  got = batched.select_actions(np.zeros((4, 1), np.float32), active)
  want = [single.select_action(np.zeros(1, np.float32)) for _ in range(3)]
  assert got.tolist() == [want[0], 0, want[1], want[2]] and got.dtype == np.int32
  assert batched.num_steps == 3


def test_batched_epsilon_greedy_draws_the_rows_uniforms_then_the_explorers_actions():
  """epsilon_greedy's batch form: one `random(K)` for the K active rows, then one
  `integers(A, size=M)` for the M exploring rows, on the actor's seeded generator; the
  schedule is read at each row's own actor step."""
  runtime = fakes.FixedRuntime([0.2, 0.1, 0.7])
  epsilon = actors.linear_schedule(1.0, 0.0, 4)  # steps 0..3: 1.0, 0.75, 0.5, 0.25
  batched = actors.BatchedFeedForwardActor(runtime, actors.epsilon_greedy(epsilon), seed=3,
                                           dummy_action=np.int32(0))
  active = np.array([True, True, False, True, True])
  got = batched.select_actions(np.zeros((5, 1), np.float32), active)
  rng = np.random.default_rng(3)
  u = rng.random(4)
  explore = u < np.array([1.0, 0.75, 0.5, 0.25])
  want = np.full(4, 2, np.int32)  # argmax of [0.2, 0.1, 0.7]
  want[explore] = rng.integers(3, size=int(explore.sum()))
  assert explore.any() and not explore.all()  # both branches are taken with seed 3
  assert got.tolist() == [want[0], want[1], 0, want[2], want[3]] and got.dtype == np.int32
  assert batched.num_steps == 4
  assert batched.rng_state == rng.bit_generator.state  # nothing else drawn


# ---------------------------------------------------------------------------------------
# Runs.


def dqn_config(num_envs, **kw):
  cfg = dqn_config_lib.DQNConfig(min_replay_size=64, batch_size=32, hidden_sizes=(32, 32),
                                 epsilon_decay_steps=300, **kw)
  return experiment.ExperimentConfig(builder=dqn_builder.DQNBuilder(cfg),
                                     env_id="gym:CartPole-v1", num_steps=240, seed=3,
                                     eval_every=120, eval_episodes=1, checkpoint_every=None,
                                     num_envs=num_envs)


def test_experiment_config_refuses_num_envs_without_a_backend_or_builder():
  config = dqn_config(1)
  with pytest.raises(ValueError, match="no vector backend"):
    experiment.ExperimentConfig(builder=config.builder, env_id="atari:Pong", num_envs=2)

  class OneEnvBuilder:  # a builder without make_batched_adder
    def __getattr__(self, name):
      if name == "make_batched_adder":
        raise AttributeError(name)
      return getattr(config.builder, name)
  with pytest.raises(ValueError, match="has no make_batched_adder"):
    experiment.ExperimentConfig(builder=OneEnvBuilder(), env_id="gym:CartPole-v1", num_envs=2)


@pytest.mark.slow
def test_single_process_run_with_b_gt_1_is_a_function_of_its_seed():
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    first = local.run(dqn_config(8))
    second = local.run(dqn_config(8))
  # 240 actor steps = 30 steps of 8 envs: the learner ran and every env ended an episode or so.
  assert first.learner_steps > 100 and first.episodes >= 8 and len(first.evaluations) == 2
  assert first.params_checksum == second.params_checksum
  assert [r["episode_return"] for r in first.evaluations] == \
      [r["episode_return"] for r in second.evaluations]
  assert (first.actor_steps, first.episodes) == (second.actor_steps, second.episodes)


# ---------------------------------------------------------------------------------------
# Batch forms of the selectors.


def _box():
  return specs.BoundedArray((2,), np.float32, minimum=[-1.0, 0.0], maximum=[1.0, 10.0])


def _batch_cases():
  from actorq.agents.dqn import builder as dqn_b  # pylint: disable=g-import-not-at-top
  from actorq.agents.onpolicy_common import networks as onp  # pylint: disable=g-import-not-at-top
  from actorq.components.acting import continuous  # pylint: disable=g-import-not-at-top
  rng = np.random.default_rng(11)
  k = 7
  q = rng.normal(size=(k, 4)).astype(np.float32)
  tanh = np.tanh(rng.normal(size=(k, 2)) * 2).astype(np.float32)
  gauss = rng.normal(size=(k, 4)).astype(np.float32)
  box = _box()
  cont = onp.PolicyHead(False, 2, np.array([-1.0, 0.0], np.float32),
                        np.array([1.0, 10.0], np.float32), np.float32)
  disc = onp.PolicyHead(True, 4, action_dtype=np.int64)
  return {
      "greedy": (actors.greedy, q),
      "dueling greedy": (dqn_b.q_value_selector(actors.greedy), q),
      "deterministic_bounded": (continuous.deterministic_bounded(box), tanh),
      "gaussian_bounded": (continuous.gaussian_bounded(box, 0.3), tanh),
      "tanh_gaussian_bounded": (continuous.tanh_gaussian_bounded(box), gauss),
      "tanh_gaussian_bounded eval": (continuous.tanh_gaussian_bounded(box, True), gauss),
      "uniform_warmup across its end": (continuous.uniform_warmup(
          continuous.gaussian_bounded(box, 0.3), box, 13), tanh),
      "shared schedule": (actors.on_shared_schedule(continuous.uniform_warmup(
          continuous.gaussian_bounded(box, 0.3), box, 25), 2), tanh),
      "categorical": (onp.categorical_selector(disc), q),
      "categorical eval": (onp.categorical_selector(disc, True), q),
      "gaussian": (onp.gaussian_selector(cont), gauss),
      "gaussian eval": (onp.gaussian_selector(cont, True), gauss),
  }


@pytest.mark.parametrize("name", sorted(_batch_cases()))
def test_batch_forms_select_what_the_rows_select_bit_for_bit(name):
  """Each selector's batch form gives, on K rows, the actions and extras of K one-row
  calls in row order, drawing the same numbers (the generators end in the same state)."""
  selector, outputs = _batch_cases()[name]
  steps = np.arange(10, 10 + len(outputs), dtype=np.int64)  # across the warm-ups' ends
  by_row, by_batch = np.random.default_rng(5), np.random.default_rng(5)
  rows = [selector(outputs[k], by_row, int(steps[k])) for k in range(len(outputs))]
  actions, extras = selector.batch(outputs, by_batch, steps)
  want = np.stack([np.asarray(a) for a, _ in rows])
  np.testing.assert_array_equal(actions, want)
  assert actions.dtype == want.dtype and actions.shape == want.shape
  if rows[0][1] == ():
    assert extras == ()
  else:
    for key in rows[0][1]:
      column = np.stack([np.asarray(e[key]) for _, e in rows])
      np.testing.assert_array_equal(extras[key], column)
      assert extras[key].dtype == column.dtype
  assert by_row.bit_generator.state == by_batch.bit_generator.state


def test_batched_actor_splits_stacked_extras_per_row_for_the_adder():
  """A selector with extras (on-policy): the adder gets each active row's own nest."""
  from actorq.agents.onpolicy_common import networks as onp  # pylint: disable=g-import-not-at-top
  head = onp.PolicyHead(True, 3, action_dtype=np.int32)
  selector = onp.categorical_selector(head)
  runtime = fakes.FixedRuntime([0.2, 0.1, 0.7])
  batched = actors.BatchedFeedForwardActor(runtime, selector, seed=4, dummy_action=np.int32(0))
  active = np.array([True, False, True])
  got = batched.select_actions(np.zeros((3, 1), np.float32), active)
  rng = np.random.default_rng(4)
  want = [selector(np.array([0.2, 0.1, 0.7], np.float32), rng, s) for s in range(2)]
  assert got.tolist() == [int(want[0][0]), 0, int(want[1][0])]
  extras = batched._row_extras  # pylint: disable=protected-access
  assert extras[1] == ()
  for row, (_, e) in zip((0, 2), want):
    np.testing.assert_array_equal(extras[row]["logits"], e["logits"])
    assert extras[row]["log_prob"] == e["log_prob"]


def test_block_adder_with_extras_writes_the_batched_adders_items():
  """Actor extras (a nest per row) go through the block adder's grids: per env, the same
  items, extras included, as `BatchedNStepTransitionAdder`'s, for random episode ends."""
  extras_spec = {"logp": specs.Array((), np.float32), "mu": specs.Array((2,), np.float32)}
  table = replay.transition_table("t", SPEC, extras_spec, max_size=100_000, min_size=1)
  clients = [local_replay.LocalReplayClient([table], seed=0) for _ in range(2)]
  batched = adders.BatchedNStepTransitionAdder(clients[0], "t", 4, N_STEP, DISCOUNT, SPEC,
                                               extras_spec)
  both = [batched, adders.BlockNStepTransitionAdder(clients[1], "t", 4, N_STEP, DISCOUNT, SPEC,
                                                    extras_spec, block_steps=3)]
  rng = np.random.default_rng(7)
  obs = (100.0 * np.arange(4, dtype=np.float32))[:, None]
  for adder in both:
    adder.add_first(np.arange(4), obs)
  fresh = np.zeros(4, bool)
  for t in range(1, 40):
    rows = np.flatnonzero(~fresh)
    k = len(rows)
    step = (obs[rows] + t, rng.integers(2, size=k).astype(np.int32),
            rng.random(k).astype(np.float32), np.ones(k, np.float32), rng.random(k) < 0.2)
    extras = [{"logp": np.float32(-t - i), "mu": np.array([t, i], np.float32)} for i in rows]
    for adder in both:
      adder.add(rows, step[1], step[2], step[3], step[0], step[4], extras)
      adder.flush()
      if fresh.any():
        adder.add_first(np.flatnonzero(fresh), obs[fresh] + t)
    ended = np.zeros(4, bool)
    ended[rows[step[4]]] = True
    fresh = ended
  both[1].close()
  want, got = per_env(stored(clients[0])), per_env(stored(clients[1]))
  assert want.keys() == got.keys() == {0, 1, 2, 3}
  assert both[0].items_written == both[1].items_written > 60
  for i in want:
    assert len(want[i]) == len(got[i]) == 7  # obs, action, reward, discount, 2 extras, next
    for g, w in zip(got[i], want[i], strict=True):
      np.testing.assert_array_equal(g, w)
