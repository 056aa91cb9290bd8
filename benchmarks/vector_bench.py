"""Vectorized actors' throughput: actor steps/s at B = 1, 8, 32 ... environments per actor
and each precision, side by side, with the per-step breakdown and the bare environment
ceiling (`actorq bench --num-envs 1,8,32`).

What one measurement runs (in this process, one after another, alternating rounds): the
training actor of a single-process run (`single_agent.make_training_environment`,
`make_training_actor`, `make_training_loop`: B = 1 is `ActorLoop` on one environment, B > 1
`VectorActorLoop` on the vector backend) acting with exploration and writing every
transition into the in-process replay (the builder's own tables, `LocalReplayClient`),
with the policy at the given precision loaded once from random weights of the agent's
network (the learner is left out: this is the actor's own speed). A warm-up of 3 loop
iterations (jit compilation, LiteRT interpreter sizing) is not timed.

Per actor step (one environment transition), microseconds:
  env        the environment's step call (B rows at once for B > 1, divided by B)
  inference  the policy runtime call (one per iteration: B rows)
  select     the numpy action selector (B = 1: one row per step; B > 1: its batch form,
             one call on the active rows per iteration, `actors.batch_form`)
  adder      the adder's calls (B > 1: the batched add + one flush per iteration)
  other      the rest: the loop's per-row bookkeeping, hooks, resets, variable client
Bare env ceiling: env.step steps/s with a fixed valid action and nothing else, for the
one-env adapter (B = 1) and the vector backend at each B (EnvPool or Gymnasium).
Throughput is given per wall second and per second of process CPU time (user + system,
all threads: EnvPool's worker thread and XLA's included), which moves much less than wall
time when other processes share the cores. Figures are medians over `repeats` rounds.
"""
from __future__ import annotations

import dataclasses
import os
import statistics
import time
from typing import Any, Dict, List, Sequence

import jax
import numpy as np

from actorq.benchmarks.actorq_bench import markdown_table
from actorq.components.acting import actors
from actorq.components.acting import loop as loop_lib
from actorq.components.acting import variable_client as vc
from actorq.components.envs import environments, vector_env
from actorq.components.replay import local_replay
from actorq.components.envs import single_agent
from actorq.launch import experiment
from actorq.quantization import payload as pl

COMPONENTS = ("env", "inference", "select", "adder", "other")


class _FixedSource:
  """A learner stand-in serving one fixed policy version (random weights)."""

  def __init__(self, params):
    self._params = params

  def get_variables(self, names):
    out = {"policy": self._params, "version": 0}
    return [out[n] for n in names]


class _TimedEnv:
  """Times `step`; everything else is the wrapped environment's."""

  def __init__(self, env):
    self._env = env
    self.seconds = 0.0

  def __getattr__(self, name):
    return getattr(self._env, name)

  def step(self, action):
    start = time.perf_counter()
    try:
      return self._env.step(action)
    finally:
      self.seconds += time.perf_counter() - start


def random_params(spec, seed: int = 0):
  """Random float32 params of `spec` (He-scaled normal weights, zero biases)."""
  rng = np.random.default_rng(seed)
  out = {}
  for name, shapes in pl.expected_shapes(spec).items():
    fan_in = int(np.prod(shapes["w"][:-1]))
    out[name] = {"w": rng.normal(0, np.sqrt(2.0 / fan_in), shapes["w"]).astype(np.float32),
                 "b": np.zeros(shapes["b"], np.float32)}
  return out


def acting_run(builder, env_id: str, num_envs: int, steps: int, seed: int = 0) -> Dict[str, Any]:
  """One timed acting run of `steps` transitions (see the module docstring)."""
  config = experiment.ExperimentConfig(builder=builder, env_id=env_id, num_steps=steps,
                                       seed=seed, checkpoint_every=None, num_envs=num_envs)
  env = single_agent.make_training_environment(config, seed)
  spec = single_agent.training_environment_spec(env)
  parts = experiment.agent_parts(config, spec)
  timing = {"select": 0.0}
  inner = parts.policy.selector
  inner_batch = actors.batch_form(inner)

  def timed_selector(outputs, rng, step):
    start = time.perf_counter()
    try:
      return inner(outputs, rng, step)
    finally:
      timing["select"] += time.perf_counter() - start

  def timed_batch(outputs, rng, steps):
    start = time.perf_counter()
    try:
      return inner_batch(outputs, rng, steps)
    finally:
      timing["select"] += time.perf_counter() - start

  timed = actors.with_batch(timed_selector, timed_batch)
  parts = dataclasses.replace(parts, policy=dataclasses.replace(parts.policy, selector=timed))
  client = local_replay.LocalReplayClient(builder.make_replay_tables(spec, parts.policy), seed)
  source = vc.PolicyServer(_FixedSource(random_params(parts.networks.spec, seed)),
                           parts.networks.spec)
  adder, actor = single_agent.make_training_actor(config, parts, jax.random.PRNGKey(seed), client,
                                                source)
  timed_env = _TimedEnv(env)
  loop = single_agent.make_training_loop(config, timed_env, actor, hooks=[])
  loop.run(num_steps=3 * num_envs)  # warm-up: compilation, interpreter sizing
  adder.reset()  # the warm-up's episode is abandoned
  timed_env.seconds, timing["select"] = 0.0, 0.0
  actor.timings.update(inference=0.0, adder=0.0)
  start, cpu0 = time.perf_counter(), time.process_time()
  loop.run(num_steps=steps)
  total, cpu = time.perf_counter() - start, time.process_time() - cpu0
  adder.close()
  env.close()
  own = {"env": timed_env.seconds, "inference": actor.timings["inference"],
         "select": timing["select"], "adder": actor.timings["adder"]}
  us = {k: 1e6 * v / steps for k, v in own.items()}
  us["other"] = 1e6 * max(total - sum(own.values()), 0.0) / steps
  return {"steps_per_s": steps / total, "cpu_steps_per_s": steps / max(cpu, 1e-9), "us": us,
          "items": int(adder.items_written)}


def bare_env_steps_per_s(env_id: str, num_envs: int, steps: int, seed: int = 0) -> float:
  """env.step steps/s (transitions, resets included) with a fixed valid action: the
  one-env adapter for B = 1, the vector backend for B > 1."""
  if num_envs == 1:
    env = environments.make_environment(env_id, seed=seed)
    action = environments.environment_spec(env).actions.generate_value()
    ts = env.reset()
    start = time.perf_counter()
    for _ in range(steps):
      ts = env.step(action)
      if ts.last():
        ts = env.reset()
    seconds = time.perf_counter() - start
  else:
    env = vector_env.make_vector_environment(env_id, num_envs, seed=seed,
                                             max_episode_steps=loop_lib.DEFAULT_MAX_EPISODE_STEPS)
    action = np.stack([env.environment_spec().actions.generate_value()] * num_envs)
    env.reset()
    iterations = max(steps // num_envs, 10)
    start = time.perf_counter()
    for _ in range(iterations):
      env.step(action)
    seconds = time.perf_counter() - start
    steps = iterations * num_envs
  env.close()
  return steps / seconds


def run(make_builder, env_id: str, num_envs: Sequence[int], precisions: Sequence[str],
        steps: int, repeats: int = 3, log=print) -> Dict[str, Any]:
  """Every (B, precision) `repeats` times in alternating rounds, and the bare ceilings.

  Args:
    make_builder: precision -> the agent's builder at that actor precision.
    env_id, num_envs, precisions: what to measure.
    steps: transitions per timed run.

  Returns:
    {"rows": [{"num_envs", "precision", "steps_per_s", "us": {...}, "speedup"}],
     "bare": {B: steps/s}, "settings": {...}}.
  """
  raw: Dict[tuple, List[Dict[str, Any]]] = {}
  for r in range(repeats):
    for b in num_envs:
      for p in precisions:
        res = acting_run(make_builder(p), env_id, b, steps, seed=r)
        raw.setdefault((b, p), []).append(res)
        log(f"round {r + 1}/{repeats}: B={b} {p}: {res['steps_per_s']:,.0f} actor steps/s")
  bare = {b: statistics.median(bare_env_steps_per_s(env_id, b, max(steps, 2000))
                               for _ in range(repeats)) for b in num_envs}
  rows = []
  for b in num_envs:
    for p in precisions:
      runs = raw[(b, p)]
      rows.append({"num_envs": b, "precision": p,
                   "steps_per_s": statistics.median(x["steps_per_s"] for x in runs),
                   "cpu_steps_per_s": statistics.median(x["cpu_steps_per_s"] for x in runs),
                   "us": {c: statistics.median(x["us"][c] for x in runs) for c in COMPONENTS}})
  base = {row["precision"]: row for row in rows if row["num_envs"] == num_envs[0]}
  for row in rows:
    row["speedup"] = row["steps_per_s"] / base[row["precision"]]["steps_per_s"]
    row["cpu_speedup"] = row["cpu_steps_per_s"] / base[row["precision"]]["cpu_steps_per_s"]
  return {"rows": rows, "bare": bare,
          "settings": {"env": env_id, "num_envs": list(num_envs), "precisions": list(precisions),
                       "steps": steps, "repeats": repeats, "cores": os.cpu_count(),
                       "loadavg": os.getloadavg()[0] if hasattr(os, "getloadavg") else None}}


def format_table(result: Dict[str, Any], title: str = "") -> str:
  """The Markdown table: one row per (B, precision), ratios to the first B, the breakdown
  and the bare env ceiling at that B."""
  base_b = result["settings"]["num_envs"][0]
  header = (["B", "precision", "actor steps/s", f"x B={base_b}", "per CPU-s",
             f"x B={base_b} (CPU)"]
            + [f"{c} us" for c in COMPONENTS] + ["bare env steps/s"])
  rows = []
  for row in result["rows"]:
    rows.append([row["num_envs"], row["precision"], f"{row['steps_per_s']:,.0f}",
                 f"{row['speedup']:.2f}x", f"{row['cpu_steps_per_s']:,.0f}",
                 f"{row['cpu_speedup']:.2f}x"] + [f"{row['us'][c]:.1f}" for c in COMPONENTS]
                + [f"{result['bare'][row['num_envs']]:,.0f}"])
  s = result["settings"]
  load = "unknown" if s["loadavg"] is None else f"{s['loadavg']:.2f}"
  notes = [f"{title}{s['env']}: {s['steps']} transitions per run, median of {s['repeats']} "
           f"alternating rounds; {s['cores']} cores, load average at the end {load}.",
           "actor steps/s: wall clock; per CPU-s: transitions per second of process CPU time "
           "(all threads; less sensitive to other load on a shared machine). "
           "us = wall microseconds per actor step (one environment transition); bare env = "
           "env.step alone (B = 1: the one-env adapter; B > 1: the vector backend)."]
  return markdown_table(header, rows) + "\n\n" + "\n".join(notes)
