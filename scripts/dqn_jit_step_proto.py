"""Issue 40, item 4 (DQN part): can one jitted JAX call per iteration bring the vector
actors' select + adder + other under 25% of env + inference at B = 32?

A measurement script, not a library (it reaches into the block adder's grids): it builds
the DQN training actor of `actorq bench --num-envs 32` (the default config, int8 actors,
gym:CartPole-v1, the in-process prioritized replay), records a few hundred real iterations
(EnvPool batches and the int8 runtime's outputs), then times, in one process, process-CPU
microseconds per 32-env iteration (medians of ROUNDS rounds) of:

  floor     EnvPool's step, the LiteRT invoke, one trivial jitted call (its dispatch, with
            and without the result back as numpy; 7 numpy inputs; 1 and 12 device arrays
            carried in and out), `np.asarray` of a jax array, `LocalReplayClient`'s
            `insert_batch` of one block and the block's returns (`_compute`), per iteration
  current   the code's selection (`select_actions` less the invoke), adder (`observe` +
            `observe_first`, the block's work amortized) and `update_steps`
  jit       one jitted function doing epsilon-greedy selection from the runtime's outputs
            (dueling Q, the linear epsilon schedule, jax.random) AND staging the step's
            columns into [K, B, ...] grids held as a functional carry: 7 grids (with and
            without buffer donation) or one packed record grid
  numpy     the same selection and staging in as few numpy calls as possible

and then whole iterations, interleaved: env step + invoke alone (the floor), the current
`VectorActorLoop`, a lean numpy loop, the lean loop with a jitted selection, and the lean
loop with one packed jitted call (the lean loops skip the checks the real loop keeps: they
are lower bounds). Results: docs/results/vector_actors/README.md, "A jitted acting step".

Usage (from the repository root):  .venv/bin/python scripts/dqn_jit_step_proto.py
"""
from __future__ import annotations

import os
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np

from actorq.agents.dqn import builder as dqn_builder
from actorq.agents.dqn import config as dqn_config
from actorq.benchmarks import vector_bench
from actorq.components.acting import variable_client as vc
from actorq.components.replay import local_replay
from actorq.components.envs import single_agent
from actorq.launch import experiment

B, K, ITERS, ROUNDS = 32, 16, 320, 7


def median_us(fn, iters, reps=ROUNDS):
  """Median over `reps` rounds of the mean process CPU microseconds (all threads: the
  wall clock moves several-fold with the other jobs on this shared 2-core machine) per
  call of `fn(i)`, i < iters."""
  out = []
  for _ in range(reps):
    start = time.process_time()
    for i in range(iters):
      fn(i)
    out.append(1e6 * (time.process_time() - start) / iters)
  return statistics.median(out)


def build(precision="int8"):
  builder = dqn_builder.DQNBuilder(dqn_config.DQNConfig(actor_precision=precision))
  config = experiment.ExperimentConfig(builder=builder, env_id="gym:CartPole-v1",
                                       num_steps=4000, seed=0, checkpoint_every=None,
                                       num_envs=B)
  env = single_agent.make_training_environment(config, 0)
  spec = single_agent.training_environment_spec(env)
  parts = experiment.agent_parts(config, spec)
  client = local_replay.LocalReplayClient(builder.make_replay_tables(spec, parts.policy), 0)
  source = vc.PolicyServer(vector_bench._FixedSource(  # pylint: disable=protected-access
      vector_bench.random_params(parts.networks.spec, 0)), parts.networks.spec)
  adder, actor = single_agent.make_training_actor(config, parts, jax.random.PRNGKey(0), client,
                                                source)
  return builder, env, spec, client, adder, actor


def record(env, actor, iters):
  """`iters` real iterations: observations, runtime outputs, the step's batch columns."""
  batch = env.reset()
  actor.observe_first(np.arange(B), batch.observation)
  rec = []
  resetting = np.zeros(B, bool)
  for _ in range(iters):
    obs = np.array(batch.observation)
    active = ~resetting
    actions = actor.select_actions(obs, active)
    batch = env.step(actions)
    last = batch.step_type == 2
    rec.append(dict(obs=obs, out=np.array(actor.runtime(obs)), active=active,
                    actions=np.array(actions), reward=np.array(batch.reward),
                    discount=np.array(batch.discount), next_obs=np.array(batch.observation),
                    last=last, step_type=np.array(batch.step_type), batch=batch,
                    fresh=np.flatnonzero(resetting)))
    resetting = last
  return rec


def make_jit_step(num_actions, obs_dim, donate):
  """One jitted call: stage the previous step's columns at row r, select this step's
  actions (dueling Q, epsilon-greedy with the linear schedule, jax.random)."""
  eps0, eps1, decay = 1.0, 0.01, 20_000  # the default config's linear schedule

  def step(carry, outputs, active, reward, discount, next_obs, last, prev_actions):
    key, grids, r, current, steps = carry
    g_obs, g_next, g_act, g_rew, g_disc, g_last, g_valid = grids
    g_obs = g_obs.at[r].set(current)
    g_next = g_next.at[r].set(next_obs)
    g_act = g_act.at[r].set(prev_actions)
    g_rew = g_rew.at[r].set(reward)
    g_disc = g_disc.at[r].set(discount)
    g_last = g_last.at[r].set(last)
    g_valid = g_valid.at[r].set(active)
    current = jnp.where(active[:, None], next_obs, current)
    value, adv = outputs[:, :1], outputs[:, 1:]
    q = value + adv - jnp.sum(adv, axis=-1, keepdims=True) / adv.shape[-1]
    greedy = jnp.argmax(q, axis=-1).astype(jnp.int32)
    key, k1, k2 = jax.random.split(key, 3)
    count = jnp.cumsum(active) - 1 + steps
    eps = eps0 + jnp.minimum(jnp.maximum(count, 0) / decay, 1.0) * (eps1 - eps0)
    explore = jax.random.uniform(k1, (B,)) < eps
    random_a = jax.random.randint(k2, (B,), 0, num_actions, jnp.int32)
    actions = jnp.where(explore, random_a, greedy)
    steps = steps + jnp.sum(active)
    grids = (g_obs, g_next, g_act, g_rew, g_disc, g_last, g_valid)
    return (key, grids, (r + 1) % K, current, steps), actions

  kw = {"donate_argnums": (0,)} if donate else {}
  fn = jax.jit(step, **kw)
  carry = (jax.random.PRNGKey(0),
           (jnp.zeros((K, B, obs_dim), jnp.float32), jnp.zeros((K, B, obs_dim), jnp.float32),
            jnp.zeros((K, B), jnp.int32), jnp.zeros((K, B), jnp.float32),
            jnp.zeros((K, B), jnp.float32), jnp.zeros((K, B), bool), jnp.zeros((K, B), bool)),
           jnp.int32(0), jnp.zeros((B, obs_dim), jnp.float32), jnp.int32(0))
  return fn, carry


def main():
  print(f"jax {jax.__version__}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}")
  builder, env, spec, client, adder, actor = build()
  rec = record(env, actor, ITERS + 8)
  num_actions = int(spec.actions.num_values)
  obs_dim = int(spec.observations.shape[0])
  results = {}

  # ---- floor: calls that must remain -------------------------------------------------
  const_actions = np.zeros(B, np.int32)
  results["floor: EnvPool step (32 envs)"] = median_us(lambda i: env.step(const_actions), ITERS)
  runtime = actor.runtime
  results["floor: int8 LiteRT invoke"] = median_us(lambda i: runtime(rec[i]["obs"]), ITERS)
  trivial = jax.jit(lambda x: x + 1)
  x32 = rec[0]["out"]
  trivial(x32).block_until_ready()
  results["floor: trivial jit call, numpy in (jax array out)"] = median_us(
      lambda i: trivial(x32), ITERS)
  results["floor: trivial jit call + np.asarray(out)"] = median_us(
      lambda i: np.asarray(trivial(x32)), ITERS)
  eight = jax.jit(lambda *xs: xs[0] + 1)
  args8 = [rec[0][k] for k in ("out", "active", "reward", "discount", "next_obs", "last",
                               "actions")]
  eight(*args8)
  results["floor: jit call, 7 numpy args"] = median_us(lambda i: eight(*args8), ITERS)
  for count in (1, 12):  # device arrays carried through a call: in and out
    carried = [jnp.zeros(B) for _ in range(count)]
    through = jax.jit(lambda *xs: tuple(x + 1 for x in xs))
    through(*carried)
    results[f"floor: jit call carrying {count} device array(s) in and out"] = median_us(
        lambda i, through=through, carried=carried: through(*carried), ITERS)
  y = trivial(x32)
  results["floor: np.asarray(jax array)"] = median_us(lambda i: np.asarray(y), ITERS)

  # The table write of one block (K x B transitions) through the in-process sum tree.
  block = adder  # the current block adder, fed the recorded steps, gives real columns
  block.reset()
  block.add_first(np.arange(B), rec[0]["obs"])
  columns = None
  for i in range(K + 4):
    r = rec[i]
    block.add(r["active"], r["actions"], r["reward"], r["discount"], r["next_obs"], r["last"])
    if len(r["fresh"]):
      block.add_first(r["fresh"], r["next_obs"][r["fresh"]])
    if block._pending:  # pylint: disable=protected-access
      columns = block._pending[0]  # pylint: disable=protected-access
  table = block._table  # pylint: disable=protected-access
  ones = np.ones(len(columns[0]))
  results["floor: insert_batch of one block / K"] = median_us(
      lambda i: client.insert_batch(table, columns, ones), 40) / K
  # The block's n-step returns and gather (`_compute`) on a staged block of real steps.
  c = block._carry  # pylint: disable=protected-access
  saved = {name: getattr(block, name)[c:c + K].copy()
           for name in ("_g_obs", "_g_next", "_g_act", "_g_rew", "_g_disc", "_g_last",
                        "_g_valid")}

  def compute_block(i):
    for name, value in saved.items():
      getattr(block, name)[c:c + K] = value
    block._staged = K  # pylint: disable=protected-access
    block._compute()  # pylint: disable=protected-access
    block._pending = []  # pylint: disable=protected-access

  restage = median_us(lambda i: [getattr(block, n).__setitem__(slice(c, c + K), v)
                                 for n, v in saved.items()], 40)
  results["floor: block returns + gather (_compute) / K"] = (
      median_us(compute_block, 40) - restage) / K

  # ---- current code -------------------------------------------------------------------
  sel = actor._batch  # pylint: disable=protected-access

  def current_select(i):
    r = rec[i]
    out = r["out"]
    np.isfinite(out).all()
    index = np.flatnonzero(r["active"])
    if len(index) == B:
      sel(out, actor._rng, actor.num_steps + actor._offsets[:B])  # pylint: disable=protected-access
    else:
      sel(out[index], actor._rng, actor.num_steps + actor._offsets[:len(index)])  # pylint: disable=protected-access

  actor._offsets = np.arange(B, dtype=np.int64)  # pylint: disable=protected-access
  results["current: select (selector + actor bookkeeping)"] = median_us(current_select, ITERS)

  def current_full_select(i):
    actor.select_actions(rec[i]["obs"], rec[i]["active"])

  results["current: select_actions incl. invoke"] = median_us(current_full_select, ITERS)

  def current_adder(i):
    r = rec[i]
    actor.observe(r["active"], r["actions"], r["batch"])
    if len(r["fresh"]):
      actor.observe_first(r["fresh"], r["next_obs"][r["fresh"]])

  adder.reset()
  adder.add_first(np.arange(B), rec[0]["obs"])
  results["current: adder (observe + observe_first, block work amortized)"] = median_us(
      current_adder, ITERS, reps=1)
  results["current: update_steps(32) (variable client)"] = median_us(
      lambda i: actor.update_steps(B), ITERS)

  # ---- jitted step ----------------------------------------------------------------------
  for donate in (False, True):
    fn, carry0 = make_jit_step(num_actions, obs_dim, donate)
    state = {"carry": carry0}
    r0 = rec[0]
    state["carry"], _ = fn(state["carry"], r0["out"], r0["active"], r0["reward"],
                           r0["discount"], r0["next_obs"], r0["last"], r0["actions"])

    def jit_iter(i, fn=fn, state=state):
      r = rec[i]
      state["carry"], actions = fn(state["carry"], r["out"], r["active"], r["reward"],
                                   r["discount"], r["next_obs"], r["last"], r["actions"])
      return np.asarray(actions)

    name = "jit: select + stage, one call" + (" (donated carry)" if donate else "")
    results[name] = median_us(jit_iter, ITERS)

    def jit_block(i, state=state):
      """Every K-th iteration: the grids to numpy (the block's returns and write stay in
      the numpy code of the current adder: measured above per block / K)."""
      grids = state["carry"][1]
      return [np.asarray(g) for g in grids]

    results["jit: grids to numpy per block / K" + (" (donated)" if donate else "")] = (
        median_us(jit_block, 40) / K)

  fn, carry = make_packed_step(num_actions, obs_dim)
  pk = {"c": carry}
  r0 = rec[0]
  pk["c"], _ = fn(pk["c"], r0["out"], r0["active"], r0["reward"], r0["discount"],
                  r0["next_obs"], r0["last"])

  def packed_iter(i):
    r = rec[i]
    pk["c"], actions = fn(pk["c"], r["out"], r["active"], r["reward"], r["discount"],
                          r["next_obs"], r["last"])
    return np.asarray(actions)

  results["jit: select + stage, one packed call (6 carry leaves, donated)"] = median_us(
      packed_iter, ITERS)

  # ---- lean numpy: fewest calls; argmax of the advantages (argmax Q up to float rounding),
  # randoms drawn ahead, a fixed epsilon (the lean loop below draws per block, with the schedule)
  g = np.zeros((K, B, 2 * obs_dim + 5), np.float64)  # one record grid
  rng = np.random.default_rng(0)
  ub = {"u": rng.random((ITERS + 8, B)), "a": rng.integers(num_actions, size=(ITERS + 8, B))}
  cur = np.array(rec[0]["obs"], np.float64)

  def lean(i):
    r = rec[i]
    out = r["out"]
    greedy = np.argmax(out[:, 1:], axis=-1)  # argmax Q = argmax A (dueling)
    actions = np.where(ub["u"][i] < 0.5, ub["a"][i], greedy)
    row = g[i % K]
    row[:, :obs_dim] = cur
    row[:, obs_dim:2 * obs_dim] = r["next_obs"]
    row[:, 2 * obs_dim] = r["actions"]
    row[:, 2 * obs_dim + 1] = r["reward"]
    row[:, 2 * obs_dim + 2] = r["discount"]
    row[:, 2 * obs_dim + 3] = r["last"]
    row[:, 2 * obs_dim + 4] = r["active"]
    np.copyto(cur, r["next_obs"], where=r["active"][:, None])
    return actions

  results["numpy lean: select + stage (7 copies, pre-drawn randoms)"] = median_us(lean, ITERS)

  width = max(len(k) for k in results)
  print(f"load at the end {os.getloadavg()[0]:.2f}; us per 32-env iteration (median of "
        f"{ROUNDS} rounds of {ITERS} iterations):")
  for k, v in results.items():
    print(f"  {k:<{width}}  {v:8.1f}  ({v / B:.2f} per env step)")
  loop = single_agent.make_training_loop(
      experiment.ExperimentConfig(builder=builder, env_id="gym:CartPole-v1", num_steps=4000,
                                  seed=0, checkpoint_every=None, num_envs=B), env, actor, [])
  whole, wall, ratio, wratio = whole_iterations(env, actor, adder, num_actions, loop)
  print(f"whole iterations, us per 32-env iteration, process CPU | wall (median of 9 "
        f"interleaved rounds), load {os.getloadavg()[0]:.2f}; overhead = median over the "
        f"rounds of (x - floor) / floor:")
  for k, v in whole.items():
    w = wall[k]
    extra = ("" if k.startswith("floor") else
             f"  overhead {ratio[k]:.0f}% | {wratio[k]:.0f}%")
    print(f"  {k:<30} {v:8.1f} | {w:8.1f}  ({v / B:.2f} | {w / B:.2f} per env step){extra}")
  env.close()


# ---- whole iterations ---------------------------------------------------------------------
# Each variant runs ITERS loop iterations end to end (env step, invoke, select, stage,
# bookkeeping, the block's returns and table write every K iterations); the floor (env step
# + invoke alone) is run in the same rounds, so overhead = (variant - floor) / floor.


def lean_loop(env, runtime, adder, num_actions, iters, jit_fn=None):
  """`iters` iterations of the leanest loop: selection from pre-drawn per-block randoms
  (numpy) or one jitted select + stage call (`jit_fn`), staging into the block adder's
  grids, the loop's returns/lengths/resets, the block computed and written every K."""
  batch = env.reset()
  adder.reset()
  b = env.num_envs
  adder.add_first(np.arange(b), batch.observation)
  rng = np.random.default_rng(0)
  c = adder._carry  # pylint: disable=protected-access
  g_obs, g_next, g_act = adder._g_obs, adder._g_next, adder._g_act  # pylint: disable=protected-access
  g_rew, g_disc, g_last, g_valid = (adder._g_rew, adder._g_disc, adder._g_last,  # pylint: disable=protected-access
                                    adder._g_valid)  # pylint: disable=protected-access
  current = np.array(batch.observation)
  returns, lengths = np.zeros(b), np.zeros(b, np.int64)
  resetting = np.zeros(b, bool)
  steps = 0
  state = {}
  if jit_fn is not None:
    fn, carry = jit_fn
    state["carry"] = carry
  obs = batch.observation
  for it in range(iters):
    j = it % K
    active = ~resetting
    out = runtime(obs)
    if jit_fn is None:
      if j == 0:
        u, ra = rng.random((K, b)), rng.integers(num_actions, size=(K, b))
        eps = np.maximum(1.0 - (steps + np.arange(K * b)) / 20_000, 0.01).reshape(K, b)
      actions = np.where(u[j] < eps[j], ra[j],
                         np.argmax(out[:, 1:], axis=-1)).astype(np.int32)
    else:
      state["carry"], actions = fn(state["carry"], out, active)
      actions = np.asarray(actions)
    batch = env.step(actions)
    last = batch.step_type == 2
    r = c + j
    g_obs[r] = current
    g_next[r] = batch.observation
    g_act[r] = actions
    g_rew[r] = batch.reward
    g_disc[r] = batch.discount
    g_last[r] = last
    g_valid[r] = active
    np.copyto(current, batch.observation, where=active[:, None])
    returns += batch.reward
    lengths += active
    count = int(np.count_nonzero(active))
    steps += count
    if resetting.any():
      fresh = np.flatnonzero(resetting)
      returns[fresh], lengths[fresh] = 0.0, 0
      adder._open[fresh] = True  # pylint: disable=protected-access
    if last.any():
      for i in np.flatnonzero(last).tolist():  # the episode's stats, as the loop's
        loop_stats = (float(returns[i]), int(lengths[i]))
      adder._open[last] = False  # pylint: disable=protected-access
    resetting = last
    obs = batch.observation
    if j == K - 1:
      adder._staged = K  # pylint: disable=protected-access
      adder._compute()  # pylint: disable=protected-access
      adder.flush()
  del loop_stats
  return steps


def make_jit_select(num_actions, decay=20_000):
  """One jitted call: dueling Q, epsilon-greedy on the linear schedule, jax.random;
  carry = (key, actor steps)."""

  def select(carry, outputs, active):
    key, steps = carry
    value, adv = outputs[:, :1], outputs[:, 1:]
    q = value + adv - jnp.sum(adv, axis=-1, keepdims=True) / adv.shape[-1]
    greedy = jnp.argmax(q, axis=-1).astype(jnp.int32)
    key, k1, k2 = jax.random.split(key, 3)
    count = jnp.cumsum(active) - 1 + steps
    eps = jnp.maximum(1.0 - count / decay, 0.01)
    explore = jax.random.uniform(k1, (B,)) < eps
    actions = jnp.where(explore, jax.random.randint(k2, (B,), 0, num_actions, jnp.int32),
                        greedy)
    return (key, steps + jnp.sum(active)), actions

  return jax.jit(select), (jax.random.PRNGKey(0), jnp.int32(0))


def make_packed_step(num_actions, obs_dim, decay=20_000):
  """One jitted call per iteration, fewest arrays across the boundary: stages the previous
  step's columns (its env outputs come in; its actions and row mask are in the carry)
  into one float32 record grid [K, B, 2 D + 5] and selects this step's actions.
  carry = (grid, current observations [B, D], key, int32 [4]: row, actor steps, -, -)."""
  width = 2 * obs_dim + 5

  def step(carry, outputs, active, reward, discount, next_obs, last):
    grid, current, key, ctr, prev_act, prev_active = carry
    r = ctr[0]
    rec = jnp.concatenate(
        [current, next_obs, prev_act[:, None].astype(jnp.float32), reward[:, None],
         discount[:, None], last[:, None].astype(jnp.float32),
         prev_active[:, None].astype(jnp.float32)], axis=1)
    grid = jax.lax.dynamic_update_slice(grid, rec[None], (r, 0, 0))
    current = jnp.where(prev_active[:, None], next_obs, current)
    value, adv = outputs[:, :1], outputs[:, 1:]
    q = value + adv - jnp.sum(adv, axis=-1, keepdims=True) / adv.shape[-1]
    greedy = jnp.argmax(q, axis=-1).astype(jnp.int32)
    key, k1, k2 = jax.random.split(key, 3)
    count = jnp.cumsum(active) - 1 + ctr[1]
    eps = jnp.maximum(1.0 - count / decay, 0.01)
    explore = jax.random.uniform(k1, (B,)) < eps
    actions = jnp.where(explore, jax.random.randint(k2, (B,), 0, num_actions, jnp.int32),
                        greedy)
    ctr = ctr.at[0].set((r + 1) % K).at[1].add(jnp.sum(active).astype(jnp.int32))
    return (grid, current, key, ctr, actions, active), actions

  carry = (jnp.zeros((K, B, width), jnp.float32), jnp.zeros((B, obs_dim), jnp.float32),
           jax.random.PRNGKey(0), jnp.zeros(4, jnp.int32), jnp.zeros(B, jnp.int32),
           jnp.zeros(B, bool))
  return jax.jit(step, donate_argnums=(0,)), carry


def packed_loop(env, runtime, adder, iters, packed):
  """The lean loop with `make_packed_step`'s one call per iteration; every K iterations
  the record grid is unpacked into the block adder's grids, computed and written."""
  fn, carry = packed
  batch = env.reset()
  adder.reset()
  b = env.num_envs
  adder.add_first(np.arange(b), batch.observation)
  c = adder._carry  # pylint: disable=protected-access
  d = batch.observation.shape[1]
  returns, lengths = np.zeros(b), np.zeros(b, np.int64)
  resetting = np.zeros(b, bool)
  zeros_f, zeros_b = np.zeros(b, np.float32), np.zeros(b, bool)
  reward, discount, last = zeros_f, zeros_f, zeros_b
  obs = batch.observation
  for it in range(iters):
    active = ~resetting
    out = runtime(obs)
    carry, actions = fn(carry, out, active, reward, discount, obs, last)
    batch = env.step(np.asarray(actions))
    reward, discount, obs = batch.reward, batch.discount, batch.observation
    last = batch.step_type == 2
    returns += reward
    lengths += active
    count = int(np.count_nonzero(active))
    if resetting.any():
      fresh = np.flatnonzero(resetting)
      returns[fresh], lengths[fresh] = 0.0, 0
    if last.any():
      for i in np.flatnonzero(last).tolist():
        loop_stats = (float(returns[i]), int(lengths[i]))
    resetting = last
    if it % K == K - 1:
      g = np.asarray(carry[0])
      rows = slice(c, c + K)
      adder._g_obs[rows] = g[:, :, :d]  # pylint: disable=protected-access
      adder._g_next[rows] = g[:, :, d:2 * d]  # pylint: disable=protected-access
      adder._g_act[rows] = g[:, :, 2 * d]  # pylint: disable=protected-access
      adder._g_rew[rows] = g[:, :, 2 * d + 1]  # pylint: disable=protected-access
      adder._g_disc[rows] = g[:, :, 2 * d + 2]  # pylint: disable=protected-access
      adder._g_last[rows] = g[:, :, 2 * d + 3] > 0  # pylint: disable=protected-access
      adder._g_valid[rows] = g[:, :, 2 * d + 4] > 0  # pylint: disable=protected-access
      adder._staged = K  # pylint: disable=protected-access
      adder._compute()  # pylint: disable=protected-access
      adder.flush()
  del loop_stats, count
  return carry


def whole_iterations(env, actor, adder, num_actions, builder_loop):
  """process-CPU us per iteration of: the floor, the current loop, the lean numpy loop
  and the lean loop with the jitted selection (interleaved rounds)."""
  runtime = actor.runtime
  const = np.zeros(B, np.int32)
  jit_sel = make_jit_select(num_actions)
  names = ("floor: env step + invoke", "current VectorActorLoop", "lean numpy loop",
           "lean loop, jitted select", "one packed jitted call")
  out = {k: [] for k in names}
  wall = {k: [] for k in names}

  def floor():
    obs = env.reset().observation
    for _ in range(ITERS):
      runtime(obs)
      obs = env.step(const).observation

  lean_loop(env, runtime, adder, num_actions, 2 * K, jit_sel)  # compile
  packed = {"p": make_packed_step(num_actions, int(env.environment_spec().observations.shape[0]))}
  packed["p"] = (packed["p"][0], packed_loop(env, runtime, adder, 2 * K, packed["p"]))

  def run_packed():
    packed["p"] = (packed["p"][0], packed_loop(env, runtime, adder, ITERS, packed["p"]))
  for _ in range(9):
    for name, fn in (("floor: env step + invoke", floor),
                     ("current VectorActorLoop", lambda: builder_loop.run(num_steps=ITERS * B)),
                     ("lean numpy loop", lambda: lean_loop(env, runtime, adder, num_actions, ITERS)),
                     ("lean loop, jitted select",
                      lambda: lean_loop(env, runtime, adder, num_actions, ITERS, jit_sel)),
                     ("one packed jitted call", run_packed)):
      adder.reset()
      start, w0 = time.process_time(), time.perf_counter()
      fn()
      out[name].append(1e6 * (time.process_time() - start) / ITERS)
      wall[name].append(1e6 * (time.perf_counter() - w0) / ITERS)
  floor_name = names[0]
  ratio = {k: statistics.median(100 * (x - f) / f for x, f in zip(v, out[floor_name]))
           for k, v in out.items()}
  wratio = {k: statistics.median(100 * (x - f) / f for x, f in zip(v, wall[floor_name]))
            for k, v in wall.items()}
  return ({k: statistics.median(v) for k, v in out.items()},
          {k: statistics.median(v) for k, v in wall.items()}, ratio, wratio)


if __name__ == "__main__":
  main()
