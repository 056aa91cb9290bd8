"""Replay cost: an embedded Reverb server vs the in-process `LocalReplayClient`, side by side.

For each path, on the same tables (a uniform and a Prioritized(0.6) transition table):
  * batched insert: the vectorized actors' adder (`BatchedNStepTransitionAdder`): B rows
    per `add` + `flush`, one write per actor step; per-transition wall time (median of the
    per-step time / B) and process CPU per transition;
  * insert: one actor step through actorq's adder (`ValidatingAdder` around the n-step
    `NStepTransitionAdder`, as `TransitionReplayBuilder.make_adder` builds it), episodes of
    200 steps; per-step wall time (median) and process CPU time per step, all threads
    counted (Reverb's writer works on a background thread too);
  * sample: one batch of B transitions as the learner gets it (Reverb: `numpy_iterator(
    make_dataset(...))`, which prefetches on background threads, so its wall time per
    `next` hides work; hence also the process CPU time per batch, all threads counted;
    local: `client.iterator`, drawn on the calling thread);
  * priority update: `priorities_lib.update_priorities` of a batch's B keys (prioritized table).
Ratios are local / reverb (below 1: the local path is cheaper). The paths are measured in
alternating rounds and each figure is the median over the rounds, so that a load from
other processes shifts both alike.

    python benchmarks/replay_cost.py [--steps 2000] [--batches 200] [--batch-size 256]
                                     [--obs-dim 24] [--num-envs 32] [--repeats 3]
                                     [--json FILE]
"""
from __future__ import annotations

import sys

import gc
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import dm_env  # pylint: disable=g-import-not-at-top
import numpy as np  # pylint: disable=g-import-not-at-top
import reverb  # pylint: disable=g-import-not-at-top
from acme import specs  # pylint: disable=g-import-not-at-top

from actorq.components.replay import adders, local_replay, reverb_replay as replay  # pylint: disable=g-import-not-at-top
from actorq.components.replay import priorities as priorities_lib

EPISODE_LENGTH = 200
N_STEP, DISCOUNT = 3, 0.99


def environment_spec(obs_dim: int) -> specs.EnvironmentSpec:
  return specs.EnvironmentSpec(
      observations=specs.Array((obs_dim,), np.float32),
      actions=specs.DiscreteArray(4, dtype=np.int32),
      rewards=specs.Array((), np.float32),
      discounts=specs.BoundedArray((), np.float32, 0.0, 1.0))


def make_tables(env_spec: specs.EnvironmentSpec, max_size: int):
  return [replay.transition_table("uniform", env_spec, max_size=max_size, min_size=1),
          replay.transition_table("prioritized", env_spec, max_size=max_size, min_size=1,
                                  prioritized=True, priority_exponent=0.6)]


def insert_cost(client, env_spec: specs.EnvironmentSpec, steps: int, rng: np.random.Generator):
  """(per-step wall seconds of `adder.add`, process CPU seconds per step) for `steps`
  steps into each table's adder."""
  made = [replay.ValidatingAdder(adders.NStepTransitionAdder(
      client, n_step=N_STEP, discount=DISCOUNT, priority_fns={table: None}), env_spec)
          for table in ("uniform", "prioritized")]
  obs = rng.standard_normal((steps + 1, env_spec.observations.shape[0])).astype(np.float32)
  times = []
  cpu0 = time.process_time()
  for adder in made:
    for t in range(steps):
      if t % EPISODE_LENGTH == 0:
        adder.add_first(dm_env.restart(obs[t]))
      last = t % EPISODE_LENGTH == EPISODE_LENGTH - 1
      ts = dm_env.TimeStep(dm_env.StepType.LAST if last else dm_env.StepType.MID,
                           np.float32(rng.random()), np.float32(1.0), obs[t + 1])
      action = np.int32(t % 4)
      start = time.perf_counter()
      adder.add(action, ts)
      times.append(time.perf_counter() - start)
  cpu = (time.process_time() - cpu0) / (2 * steps)
  for adder in made:
    adder.close()
  return np.asarray(times), cpu


def insert_batched_cost(client, env_spec: specs.EnvironmentSpec, steps: int, num_envs: int,
                        rng: np.random.Generator):
  """Per-transition wall seconds (median over actor steps) and process CPU seconds per
  transition of the batched adder (`adders.BatchedNStepTransitionAdder`: `num_envs` rows
  added and flushed in one call per actor step) into the uniform table; `steps` actor
  steps of `num_envs` envs (steps * num_envs transitions), episodes of 200 steps."""
  adder = adders.BatchedNStepTransitionAdder(client, "uniform", num_envs, N_STEP, DISCOUNT,
                                             env_spec)
  dim = env_spec.observations.shape[0]
  obs = rng.standard_normal((steps + 1, num_envs, dim)).astype(np.float32)
  rows = np.arange(num_envs)
  actions = (np.arange(num_envs) % 4).astype(np.int32)
  rewards = rng.random((steps, num_envs)).astype(np.float32)
  ones = np.ones(num_envs, np.float32)
  times = []
  cpu0 = time.process_time()
  for t in range(steps):
    if t % EPISODE_LENGTH == 0:
      adder.add_first(rows, obs[t])
    last = np.full(num_envs, t % EPISODE_LENGTH == EPISODE_LENGTH - 1)
    start = time.perf_counter()
    adder.add(rows, actions, rewards[t], ones, obs[t + 1], last, [()] * num_envs)
    adder.flush()
    times.append((time.perf_counter() - start) / num_envs)
  cpu = (time.process_time() - cpu0) / (steps * num_envs)
  adder.close()
  return np.asarray(times), cpu


def sample_cost(next_batch, batches: int, warmup: int = 10):
  """(per-batch wall seconds, process CPU seconds per batch, the last batch)."""
  for _ in range(warmup):
    batch = next_batch()
  times = []
  cpu0 = time.process_time()
  for _ in range(batches):
    start = time.perf_counter()
    batch = next_batch()
    times.append(time.perf_counter() - start)
  return np.asarray(times), (time.process_time() - cpu0) / batches, batch


def update_cost(client, batch, batches: int, rng: np.random.Generator):
  keys = batch.info.key
  times = []
  for _ in range(batches):
    priorities = rng.random(keys.shape[0]) + 0.01
    start = time.perf_counter()
    priorities_lib.update_priorities(client, "prioritized", keys, priorities)
    times.append(time.perf_counter() - start)
  return np.asarray(times)


def measure(path: str, steps: int, batches: int, batch_size: int, obs_dim: int,
            num_envs: int = 32):
  env_spec = environment_spec(obs_dim)
  tables = make_tables(env_spec, max_size=4 * steps)
  rng = np.random.default_rng(0)
  server = None
  if path == "reverb":
    server = replay.make_server(tables)
    client = reverb.Client(f"localhost:{server.port}")
  else:
    client = local_replay.LocalReplayClient(tables, seed=0)
  out = {}
  out["insert"], out["insert_cpu"] = insert_cost(client, env_spec, steps, rng)
  out["insert_batched"], out["insert_batched_cpu"] = insert_batched_cost(
      client, env_spec, max(steps // num_envs, EPISODE_LENGTH), num_envs, rng)
  for table in ("uniform", "prioritized"):
    batches_of = replay.make_iterator(client, table, batch_size)
    wall, cpu, batch = sample_cost(lambda: next(batches_of), batches)  # pylint: disable=cell-var-from-loop
    out[f"sample_{table}"], out[f"sample_{table}_cpu"] = wall, cpu
  out["update"] = update_cost(client, batch, batches, rng)
  if server is not None:
    del client
    gc.collect()  # release the dataset streams, else stop() waits for them
    server.stop()
  return out


def report(results, steps: int, batches: int, batch_size: int, obs_dim: int, num_envs: int,
           repeats: int) -> dict:
  """Prints each figure's median over the repeats, side by side (the settings `measure`
  ran with in the title); returns them."""
  rows = [
      ("insert per step, median wall", lambda r: np.median(r["insert"])),
      ("insert per step, process CPU", lambda r: r["insert_cpu"]),
      (f"batched insert (B={num_envs}) per transition, median wall",
       lambda r: np.median(r["insert_batched"])),
      (f"batched insert (B={num_envs}) per transition, process CPU",
       lambda r: r["insert_batched_cpu"]),
      ("sample uniform per batch, median wall", lambda r: np.median(r["sample_uniform"])),
      ("sample uniform per batch, process CPU", lambda r: r["sample_uniform_cpu"]),
      ("sample prioritized per batch, median wall",
       lambda r: np.median(r["sample_prioritized"])),
      ("sample prioritized per batch, process CPU", lambda r: r["sample_prioritized_cpu"]),
      ("priority update per batch, median", lambda r: np.median(r["update"])),
  ]
  print(f"replay cost: obs float32[{obs_dim}], n-step {N_STEP}, {steps} steps per "
        f"table, {batches} batches of {batch_size}, median of {repeats} "
        "alternating repeats; microseconds")
  print(f"{'':44s} {'reverb':>10s} {'local':>10s} {'local/reverb':>13s}")
  summary = {}
  for name, get in rows:
    r, l = (1e6 * float(np.median([get(x) for x in results[path]]))
            for path in ("reverb", "local"))
    summary[name] = {"reverb_us": r, "local_us": l, "ratio": l / r}
    print(f"{name:44s} {r:10.1f} {l:10.1f} {l / r:13.3f}")
  load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
  print(f"(load average {load:.2f} on {os.cpu_count()} cores)")
  return summary


if __name__ == "__main__":
  from actorq.cli.benchmarks import replay_cost as command_line  # its flags: cli/
  sys.exit(command_line.main())
