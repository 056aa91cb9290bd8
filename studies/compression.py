"""How far a trained policy compresses: the study behind `actorq quantize --sweep` and
`--search` (the command and its files are `actorq.cli.quantize`; the per-layer
search is `actorq.quantization.precision_search`).

Every setting is a `mixed.PrecisionPolicy` (a sweep point is a uniform one: the same
`LayerChoice`, e.g. ``int4/tensor+p0.5``, for every layer) evaluated against the fp32
policy of the same parameters:

* **stored bytes**: `mixed.storage_report` (values bit-packed; a pruned layer as a
  presence bitmask plus its packed non-zero values when that is smaller; float32 scales,
  biases), and the bytes the executing runtime holds;
* **latency**: the median wall time (or, with `latency_clock="cpu"`, process CPU time) of
  one batch-1 call of the runtime that executed the setting (`EXECUTIONS`; both medians
  are reported); a *simulated* setting's latency is that of the fp32 JAX kernels it ran
  on, not of any b-bit kernel;
* **return**: one greedy episode per evaluation seed, a fresh environment built with
  that seed for every episode and every setting, so episode i of every setting starts
  from the same state (*paired* seeds); the paired difference to fp32 is averaged over
  the seeds;
* **fidelity to fp32** on the observations the fp32 policy visited in those episodes
  (at most `max_reference_observations`, a seeded subsample):
  - ``agreement``: discrete actions: the fraction of observations where the greedy
    action equals fp32's; continuous: ``1 - action_distance``;
  - ``kl``: discrete actions: the mean of ``KL(p_fp32 || p)`` where ``p = softmax(z / T)``
    and ``z`` are the Q-values (DQN, after the dueling combination when there is one;
    QR-DQN, the mean over quantiles: the builder's `core.PolicyOutputs.to_values`; the
    temperature ``T`` in return units, default 1) or the policy's logits (on-policy
    agents, ``T = 1``); not defined (NaN) for continuous policies;
  - ``action_distance``: continuous actions: the mean over observations and action
    dimensions of ``|a - a_fp32| / (maximum - minimum)``; 0 for discrete actions.

Sub-8-bit settings run *simulated* by default (dequantized weights, fp32 JAX kernels:
the same arithmetic as QAT's fake-quant forward); they can also run on the LiteRT int8
runtime, which executes b-bit values held in int8 exactly, at int8 speed. Pruning never
buys latency here: every runtime has dense kernels (noted in every row).
"""
from __future__ import annotations

import dataclasses
import hashlib
import math
import time
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

import numpy as np

from actorq.components.acting import actors
from actorq.components.acting import loop as loop_lib
from actorq.quantization import bias_correction
from actorq.quantization import execution as qx
from actorq.quantization import fidelity as qf
from actorq.quantization import mixed
from actorq.quantization import network_spec as ns

REFERENCE = "fp32"

# ----------------------------------------------------------------------------------------
# Episodes with paired seeds.


@dataclasses.dataclass(frozen=True)
class Episode:
  """One evaluation episode: its environment seed, return, length (steps) and a digest
  of its first observation (equal across settings when the seeds pair them)."""
  seed: int
  episode_return: float
  length: int
  first_observation: str


def digest(observation) -> str:
  """12 hex digits of SHA-1 over the observation's bytes."""
  return hashlib.sha1(np.ascontiguousarray(observation).tobytes()).hexdigest()[:12]


class _Observing:
  """Wraps an actor; keeps every observation it is asked to act on."""

  def __init__(self, actor, store: Optional[List[np.ndarray]]):
    self._actor, self._store = actor, store
    self.first = None

  def select_action(self, observation):
    if self.first is None:
      self.first = np.array(observation, copy=True)
    if self._store is not None:
      self._store.append(np.array(observation, copy=True))
    return self._actor.select_action(observation)


def run_episodes(env_fn: Callable[[int], Any], runtime, selector: actors.Selector,
                 seeds: Sequence[int], observations: Optional[List[np.ndarray]] = None,
                 max_episode_steps: int = loop_lib.DEFAULT_MAX_EPISODE_STEPS) -> List[Episode]:
  """One greedy episode per seed, each in a fresh `env_fn(seed)`.

  Args:
    env_fn: seed -> a new `dm_env.Environment` seeded with it.
    runtime: a loaded policy runtime.
    selector: the greedy selector.
    observations: when given, every observation acted on is appended to it.

  Raises:
    ValueError: no seeds.
  """
  if not seeds:
    raise ValueError("run_episodes needs at least one seed")
  episodes = []
  for seed in seeds:
    env = env_fn(int(seed))
    try:
      actor = _Observing(actors.FeedForwardActor(runtime, selector, seed=int(seed)),
                         observations)
      stats = loop_lib.ActorLoop(env, actor, learn=False,
                                 max_episode_steps=max_episode_steps).run(num_episodes=1)[0]
    finally:
      env.close()
    episodes.append(Episode(int(seed), float(stats.episode_return), int(stats.episode_length),
                            digest(actor.first)))
  return episodes


def subsample(observations: Sequence[np.ndarray], limit: int, seed: int = 0) -> np.ndarray:
  """`[min(N, limit), *shape]` float32: all observations, or `limit` of them drawn without
  replacement by a generator seeded with `seed` (kept in their visiting order)."""
  obs = np.asarray(np.stack(observations), np.float32)
  if len(obs) <= limit:
    return obs
  keep = np.sort(np.random.default_rng(seed).choice(len(obs), int(limit), replace=False))
  return obs[keep]


# ----------------------------------------------------------------------------------------
# The sweep.


def pareto_front(costs: Sequence[float], values: Sequence[float]) -> List[bool]:
  """Which points are Pareto-optimal when `costs` are minimised and `values` maximised:
  point i is on the front unless some j has cost_j <= cost_i and value_j >= value_i with
  one of the two strict. Points with a NaN cost or value are never on the front; equal
  points are both on it."""
  c = np.asarray(costs, np.float64)
  v = np.asarray(values, np.float64)
  ok = np.isfinite(c) & np.isfinite(v)
  front = []
  for i in range(len(c)):
    if not ok[i]:
      front.append(False)
      continue
    dominated = np.any(ok & (c <= c[i]) & (v >= v[i]) & ((c < c[i]) | (v > v[i])))
    front.append(not bool(dominated))
  return front


@dataclasses.dataclass
class StudyContext:
  """What every setting of one checkpoint is evaluated with.

  Attributes:
    params: fp32 `{layer: {"w", "b"}}` of `spec`.
    spec: the policy network.
    env_fn: seed -> fresh environment.
    semantics: `OutputSemantics` (selector, output kind).
    seeds: evaluation environment seeds (one episode each).
    latency_repeats: calls per latency median.
    latency_clock: "wall" or "cpu": which median is `latency_us` (both are reported).
    max_reference_observations: cap on the fp32 observations fidelity is measured on.
    max_episode_steps: the loop's episode cap.
    calibration_seeds: seeds of the fp32 episodes whose observations calibrate the
      bias-corrected settings (`calibration_observations`); kept apart from `seeds`.
  """
  params: Mapping[str, Any]
  spec: ns.NetworkSpec
  env_fn: Callable[[int], Any]
  semantics: qf.OutputSemantics
  seeds: Sequence[int]
  latency_repeats: int = 200
  latency_clock: str = "wall"
  max_reference_observations: int = 5000
  max_episode_steps: int = loop_lib.DEFAULT_MAX_EPISODE_STEPS
  calibration_seeds: Sequence[int] = (54321,)
  reference: Optional[Dict[str, Any]] = None


def reference_run(ctx: StudyContext) -> Dict[str, Any]:
  """Runs the fp32 policy once: its episodes, visited observations and outputs."""
  if ctx.reference is None:
    policy = mixed.PrecisionPolicy.uniform(ctx.spec, mixed.LayerChoice("fp32"))
    rt = qx.make_runtime(ctx.params, ctx.spec, policy, qx.JAX_FP32)
    seen: List[np.ndarray] = []
    episodes = run_episodes(ctx.env_fn, rt, ctx.semantics.selector, ctx.seeds, seen,
                            ctx.max_episode_steps)
    obs = subsample(seen, ctx.max_reference_observations)
    ctx.reference = {"episodes": episodes, "observations": obs,
                     "outputs": qx.batched(rt, obs), "runtime": rt}
  return ctx.reference


def calibration_observations(params, spec: ns.NetworkSpec, env_fn: Callable[[int], Any],
                             selector: actors.Selector, seeds: Sequence[int],
                             size: int = bias_correction.DEFAULT_CALIBRATION_SIZE,
                             max_episode_steps: int = loop_lib.DEFAULT_MAX_EPISODE_STEPS
                             ) -> np.ndarray:
  """float32 `[<= size, *input_shape]`: `size` observations (drawn with seed 0, kept in
  visiting order) of the fp32 policy's greedy episodes on `seeds`: the calibration set of
  a bias-corrected payload when no replay sample is at hand (studies, export).

  Raises:
    ValueError: no seeds.
  """
  policy = mixed.PrecisionPolicy.uniform(spec, mixed.LayerChoice("fp32"))
  seen: List[np.ndarray] = []
  run_episodes(env_fn, qx.make_runtime(params, spec, policy, qx.JAX_FP32), selector, seeds, seen,
               max_episode_steps)
  return subsample(seen, size)


def evaluate_setting(ctx: StudyContext, setting: qx.Setting) -> Dict[str, Any]:
  """One row of the study for `setting` (see `ROW_COLUMNS`) plus its `"episodes"`.

  Raises:
    ValueError: as `make_runtime`.
  """
  ref = reference_run(ctx)
  cache = mixed.LayerCache(ctx.params, ctx.spec)  # this setting's layers, compressed once
  storage = mixed.storage_report(cache.compress(setting.policy))
  calibration = None
  if setting.bias_corrected:
    if ctx.reference.get("calibration") is None:
      ctx.reference["calibration"] = calibration_observations(
          ctx.params, ctx.spec, ctx.env_fn, ctx.semantics.selector, ctx.calibration_seeds,
          max_episode_steps=ctx.max_episode_steps)
    calibration = ctx.reference["calibration"]
  start = time.perf_counter()
  rt = qx.make_runtime(ctx.params, ctx.spec, setting.policy, setting.execution, cache=cache,
                    calibration=calibration,
                    compensate=qf.compensation_target(ctx.semantics)
                    if setting.error_compensated else None)
  build_s = time.perf_counter() - start
  obs1 = ref["observations"][:1]
  timing = qx.measure_latency(rt, obs1, ctx.latency_repeats)
  latency = timing[f"{ctx.latency_clock}_us"]
  if setting.policy == mixed.PrecisionPolicy.uniform(ctx.spec, mixed.LayerChoice("fp32")) \
      and setting.execution == qx.JAX_FP32:
    episodes = ref["episodes"]
    outputs = ref["outputs"]
  else:
    episodes = run_episodes(ctx.env_fn, rt, ctx.semantics.selector, ctx.seeds, None,
                            ctx.max_episode_steps)
    outputs = qx.batched(rt, ref["observations"])
  fid = qf.fidelity(ref["outputs"], outputs, ctx.semantics)
  returns = np.array([e.episode_return for e in episodes])
  diffs = returns - np.array([e.episode_return for e in ref["episodes"]])
  choices = setting.policy.choices
  uniform = len(set(choices)) == 1
  c0 = choices[0]
  sparse = any(c.sparsity > 0 for c in choices)
  notes = []
  if setting.simulated:
    notes.append("simulated: latency is fp32 JAX kernels'")
  if sparse:
    notes.append("dense kernels: pruning saves bytes, not latency")
  if setting.execution == qx.LITERT_INT8 and any(c.bits < 8 for c in choices):
    notes.append("b-bit values held in int8: int8 speed")
  row = {
      "setting": setting.name,
      "weights": c0.kind if uniform else "mixed",
      "bits": c0.bits if uniform else "",
      "granularity": (c0.granularity if not c0.is_float else "") if uniform else "mixed",
      "sparsity": c0.sparsity if uniform else "mixed",
      "execution": setting.execution,
      "simulated": setting.simulated,
      "stored_bytes": storage["bytes"],
      "stored_ratio": storage["bytes"] / storage["fp32_bytes"],
      "storage_formats": "/".join(sorted({l["format"] for l in storage["layers"].values()})),
      "runtime_bytes": storage["runtime_bytes"],
      "latency_us": latency,
      "wall_us": timing["wall_us"],
      "cpu_us": timing["cpu_us"],
      "return_mean": float(returns.mean()),
      "return_std": float(returns.std()),
      "return_min": float(returns.min()),
      "paired_diff_mean": float(diffs.mean()),
      "paired_diff_se": float(diffs.std(ddof=1) / math.sqrt(len(diffs))) if len(diffs) > 1
                        else float("nan"),
      "agreement": fid["agreement"],
      "kl": fid["kl"],
      "action_distance": fid["action_distance"],
      "q_regret": fid["q_regret"],
      "episodes": len(episodes),
      "reference_observations": int(len(ref["observations"])),
      "runtime_build_s": build_s,
      "notes": "; ".join(notes),
  }
  return dict(row, _episodes=episodes)


ROW_COLUMNS = ("setting", "weights", "bits", "granularity", "sparsity", "execution",
               "simulated", "stored_bytes", "stored_ratio", "storage_formats",
               "runtime_bytes", "latency_us", "wall_us", "cpu_us", "return_mean",
               "return_std", "return_min",
               "paired_diff_mean", "paired_diff_se", "agreement", "kl", "action_distance",
               "episodes", "reference_observations", "runtime_build_s", "notes", "q_regret")


def run_study(ctx: StudyContext, settings: Sequence[qx.Setting],
              progress: Optional[Callable[[Dict[str, Any]], None]] = None
              ) -> List[Dict[str, Any]]:
  """Rows (`evaluate_setting`) for every setting, the reference first, each with
  `latency_ratio` (to the fp32 JAX latency) added; `progress(row)` after each."""
  rows = []
  for setting in settings:
    row = evaluate_setting(ctx, setting)
    rows.append(row)
    if progress:
      progress(row)
  base = next((r["latency_us"] for r in rows if r["setting"] == REFERENCE), float("nan"))
  for r in rows:
    r["latency_ratio"] = r["latency_us"] / base
  return rows


SUMMARY_COLUMNS = ("setting", "weights", "bits", "granularity", "sparsity", "execution",
                   "simulated", "runs", "stored_bytes", "stored_ratio", "latency_us",
                   "latency_ratio", "return_mean", "return_std_over_runs", "return_min",
                   "paired_diff_mean", "agreement", "kl", "action_distance",
                   "pareto_bytes", "pareto_latency", "notes", "agreement_median",
                   "agreement_min", "agreement_max", "q_regret")


def summarize(rows_by_run: Mapping[str, Sequence[Mapping[str, Any]]]) -> List[Dict[str, Any]]:
  """One row per setting over runs (training seeds): means of the per-run mean return,
  paired difference, agreement, KL and action distance; the median, minimum and maximum
  of the per-run agreement; the std over runs of the mean return; the minimum episode return of any run; the median latency; the Pareto flags of
  mean return against stored bytes and against latency.

  Args:
    rows_by_run: `{run name: run_study rows}`, the same settings in each.
  """
  order: List[str] = []
  groups: Dict[str, List[Mapping[str, Any]]] = {}
  for rows in rows_by_run.values():
    for r in rows:
      if r["setting"] not in groups:
        order.append(r["setting"])
        groups[r["setting"]] = []
      groups[r["setting"]].append(r)
  out = []
  for name in order:
    g = groups[name]
    first = g[0]
    mean = lambda k: float(np.mean([float(r[k]) for r in g]))
    out.append({
        "setting": name, "weights": first["weights"], "bits": first["bits"],
        "granularity": first["granularity"], "sparsity": first["sparsity"],
        "execution": first["execution"], "simulated": first["simulated"], "runs": len(g),
        "stored_bytes": mean("stored_bytes"), "stored_ratio": mean("stored_ratio"),
        "latency_us": float(np.median([r["latency_us"] for r in g])),
        "latency_ratio": float(np.median([r["latency_ratio"] for r in g])),
        "return_mean": mean("return_mean"),
        "return_std_over_runs": float(np.std([r["return_mean"] for r in g])),
        "return_min": float(min(r["return_min"] for r in g)),
        "paired_diff_mean": mean("paired_diff_mean"), "agreement": mean("agreement"),
        "kl": mean("kl"), "action_distance": mean("action_distance"),
        "notes": first["notes"],
        "agreement_median": float(np.median([float(r["agreement"]) for r in g])),
        "agreement_min": float(min(float(r["agreement"]) for r in g)),
        "agreement_max": float(max(float(r["agreement"]) for r in g)),
        "q_regret": float(np.mean([float(r.get("q_regret", float("nan"))) for r in g]))})
  vals = [r["return_mean"] for r in out]
  for key, col in (("pareto_bytes", "stored_bytes"), ("pareto_latency", "latency_us")):
    for r, flag in zip(out, pareto_front([r[col] for r in out], vals)):
      r[key] = flag
  return out
