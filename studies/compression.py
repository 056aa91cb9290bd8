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

from actorq import core
from actorq.components.acting import actors
from actorq.components.acting import loop as loop_lib
from actorq.quantization import bias_correction
from actorq.quantization import error_compensation
from actorq.quantization import mixed
from actorq.quantization import network_spec as ns
from actorq.quantization import payload as pl
from actorq.quantization import runtimes

# How a setting is executed. Only "simulated" is not a real execution of its numbers.
JAX_FP32, JAX_FP16, JAX_BF16 = "jax-fp32", "jax-fp16", "jax-bf16"
LITERT_INT8, LITERT_MIXED, SIMULATED = "litert-int8", "litert-mixed", "simulated"
EXECUTIONS = {
    JAX_FP32: "fp32 JAX (jax.jit) kernels",
    JAX_FP16: "fp16 JAX kernels",
    JAX_BF16: "bf16 JAX kernels",
    LITERT_INT8: "LiteRT/XNNPACK dynamic-range int8 kernels (narrower values held in int8)",
    LITERT_MIXED: "LiteRT/XNNPACK: int8 kernels for integer layers, float32 for float layers",
    SIMULATED: "SIMULATED: dequantized weights on fp32 JAX kernels (no b-bit kernel ran)",
}
LOW_BIT_RUNTIMES = ("simulated", "litert")
OUTPUT_KINDS = ("q_values", "logits", "continuous")
# A builder's declared `core.PolicyOutputs.kind` -> the study's kind.
DECLARED_KINDS = {"q_values": "q_values", "logits": "logits",
                  "tanh_deterministic": "continuous", "tanh_gaussian": "continuous"}
REFERENCE = "fp32"


def execution_for(policy: mixed.PrecisionPolicy, low_bit_runtime: str = "simulated") -> str:
  """The runtime that executes `policy` (one of `EXECUTIONS`).

  Uniform fp32/fp16/bf16 policies run on the JAX runtime of that precision, uniform int8
  on LiteRT int8; uniform narrower integers on LiteRT int8 when `low_bit_runtime` is
  "litert", else simulated; a per-layer mix of float and integer layers on LiteRT mixed
  (or simulated when `low_bit_runtime` is "simulated" and some layer is narrower than 8
  bits).

  Raises:
    ValueError: an unknown `low_bit_runtime`.
  """
  if low_bit_runtime not in LOW_BIT_RUNTIMES:
    raise ValueError(f"low_bit_runtime {low_bit_runtime!r}; allowed: {LOW_BIT_RUNTIMES}")
  kinds = {c.kind for c in policy.choices}
  low = any(c.kind == mixed.INT and c.bits < 8 for c in policy.choices)
  if len(kinds) == 1 and kinds != {mixed.INT}:
    return {"fp32": JAX_FP32, "fp16": JAX_FP16, "bf16": JAX_BF16}[kinds.pop()]
  if low and low_bit_runtime == "simulated":
    return SIMULATED
  return LITERT_INT8 if kinds == {mixed.INT} else LITERT_MIXED


def make_runtime(params, spec: ns.NetworkSpec, policy: mixed.PrecisionPolicy,
                 execution: str, num_threads: int = 1,
                 cache: Optional[mixed.LayerCache] = None,
                 calibration: Optional[np.ndarray] = None,
                 compensate: Optional[Callable[[Any], Any]] = None):
  """A policy runtime loaded with `params` compressed under `policy`, executing as
  `execution` says (see `execution_for`); `cache` (a `mixed.LayerCache` of the same
  params) saves compressing a layer choice twice. With `calibration` (observations
  `[N, *input_shape]`), the biases of a policy with integer layers are corrected on them
  (`bias_correction`, what a training run's actors execute); with `compensate` too (the
  `target` of `error_compensation.compensated_layers`: outputs -> the values kept), the
  integer Dense layers are first re-rounded on them (`error_compensation`; measured in
  the sensitivity study, not what the actors execute).

  Raises:
    ValueError: an execution that cannot run `policy` (e.g. litert-int8 with a float
      layer), or params that do not match the spec.
  """
  layers = (cache.compress(policy) if cache is not None
            else mixed.compress(params, spec, policy))
  if calibration is not None and any(l.scale is not None for l in layers.values()):
    if compensate is not None:
      layers = error_compensation.compensated_layers(
          pl.validate_params(params, spec, check_finite=False), layers, spec, calibration,
          compensate)
    biases = bias_correction.corrected_biases(
        pl.validate_params(params, spec, check_finite=False),
        mixed.simulated_params(layers), spec, calibration)
    layers = {n: dataclasses.replace(l, b=biases[n]) for n, l in layers.items()}
  if execution in (JAX_FP32, JAX_FP16, JAX_BF16, SIMULATED):
    precision = {JAX_FP16: "fp16", JAX_BF16: "bf16"}.get(execution, "fp32")
    rt = runtimes.make_runtime(precision, spec, num_threads)
    rt.load(pl.make_payload(mixed.simulated_params(layers), spec, precision, 0))
    return rt
  if execution == LITERT_INT8:
    if any(l.scale is None for l in layers.values()):
      raise ValueError("litert-int8 executes integer layers only; use litert-mixed")
    rt = runtimes.make_runtime("int8", spec, num_threads)
    rt.load(pl.Payload("int8", 0, {n: {"w": l.values, "scale": l.scale, "b": l.b}
                                   for n, l in layers.items()},
                       all(np.ndim(l.scale) == 1 for l in layers.values())))
    return rt
  if execution == LITERT_MIXED:
    rt = runtimes.make_mixed_runtime(policy, spec, num_threads)
    rt.load(mixed.payload_of(layers, 0))
    return rt
  raise ValueError(f"execution {execution!r} unknown; allowed: {sorted(EXECUTIONS)}")


# ----------------------------------------------------------------------------------------
# Fidelity to the fp32 policy.


@dataclasses.dataclass(frozen=True)
class OutputSemantics:
  """What a policy network's outputs mean, for agreement and KL.

  Attributes:
    kind: "q_values" (DQN), "logits" (discrete on-policy heads) or "continuous".
    selector: the greedy (evaluation) selector, outputs row -> (action, extras).
    transform: outputs `[N, output_size]` -> Q-values or logits `[N, A]` (e.g. the
      dueling combination); identity by default.
    temperature: T of `softmax(Q / T)` for "q_values" (return units; > 0).
    action_range: continuous: `maximum - minimum` per action dimension.
  """
  kind: str
  selector: actors.Selector
  transform: Optional[Callable[[np.ndarray], np.ndarray]] = None
  temperature: float = 1.0
  action_range: Any = 1.0

  @classmethod
  def declared(cls, outputs: core.PolicyOutputs, selector: actors.Selector, action_spec,
               temperature: float = 1.0) -> "OutputSemantics":
    """The semantics of what a builder declares (`Builder.policy_outputs`): its kind
    through `DECLARED_KINDS` (tanh kinds: "continuous", with `action_range` = maximum -
    minimum of the `action_spec` per dimension), its `to_values` as `transform`.

    Raises:
      ValueError: a kind `DECLARED_KINDS` does not map (naming the allowed ones).
    """
    if outputs.kind not in DECLARED_KINDS:
      raise ValueError(f"policy output kind {outputs.kind!r} has no study semantics; "
                       f"allowed: {', '.join(DECLARED_KINDS)}")
    kind = DECLARED_KINDS[outputs.kind]
    if kind == "continuous":
      lo = np.broadcast_to(np.asarray(action_spec.minimum, np.float64), action_spec.shape)
      hi = np.broadcast_to(np.asarray(action_spec.maximum, np.float64), action_spec.shape)
      return cls(kind, selector, outputs.to_values, action_range=hi - lo)
    return cls(kind, selector, outputs.to_values, temperature if kind == "q_values" else 1.0)

  def __post_init__(self):
    if self.kind not in OUTPUT_KINDS:
      raise ValueError(f"output kind {self.kind!r}; allowed: {OUTPUT_KINDS}")
    if not (math.isfinite(float(self.temperature)) and float(self.temperature) > 0):
      raise ValueError(f"temperature must be a finite number > 0, got {self.temperature}")


def compensation_target(semantics: OutputSemantics) -> Callable[[Any], Any]:
  """What error-compensating rounding keeps (`error_compensation.compensated_layers`'s
  `target`): for Q-values and logits the values (`semantics.transform` of the outputs)
  centred per state, since the greedy action and the softmax ignore a per-state constant;
  for continuous policies the outputs themselves."""
  if semantics.kind == "continuous":
    return lambda y: y
  return error_compensation.centred(semantics.transform)


def log_softmax(z: np.ndarray) -> np.ndarray:
  """Row-wise log-softmax of float64 `[N, A]` (max-shifted: no overflow)."""
  z = np.asarray(z, np.float64)
  z = z - z.max(axis=-1, keepdims=True)
  return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


def mean_kl(reference_logits: np.ndarray, logits: np.ndarray) -> float:
  """Mean over rows of `KL(softmax(reference) || softmax(logits))` in nats, `[N, A]`."""
  lp, lq = log_softmax(reference_logits), log_softmax(logits)
  return float(np.mean(np.sum(np.exp(lp) * (lp - lq), axis=-1)))


def fidelity(reference_outputs: np.ndarray, outputs: np.ndarray,
             semantics: OutputSemantics) -> Dict[str, float]:
  """`{"agreement", "kl", "action_distance", "q_regret"}` of `outputs` against the fp32
  policy's `reference_outputs` on the same observations (both float `[N, output_size]`);
  see the module docstring for the definitions. `q_regret` (Q-value policies, else NaN):
  the mean over observations of ``Q(s, a_fp32) - Q(s, a)`` under the fp32 Q-values, what
  the other policy's greedy choice gives up by the fp32 network's own estimate (return
  units; 0 when the actions agree, small when they differ only where Q-values tie)."""
  ref, out = np.asarray(reference_outputs), np.asarray(outputs)
  if ref.shape != out.shape or ref.ndim != 2 or ref.shape[0] == 0:
    raise ValueError(f"fidelity needs two [N, K] output arrays with N >= 1, got {ref.shape} "
                     f"and {out.shape}")
  rng = np.random.default_rng(0)
  a_ref = np.stack([np.asarray(semantics.selector(r, rng, 0)[0]) for r in ref])
  a_out = np.stack([np.asarray(semantics.selector(r, rng, 0)[0]) for r in out])
  if semantics.kind == "continuous":
    rng_ = np.broadcast_to(np.asarray(semantics.action_range, np.float64), a_ref.shape[1:])
    dist = float(np.mean(np.abs(a_out.astype(np.float64) - a_ref) / rng_))
    return {"agreement": 1.0 - dist, "kl": float("nan"), "action_distance": dist,
            "q_regret": float("nan")}
  transform = semantics.transform or (lambda x: x)
  z_ref, z_out = transform(ref.astype(np.float64)), transform(out.astype(np.float64))
  t = float(semantics.temperature) if semantics.kind == "q_values" else 1.0
  regret = float("nan")
  if semantics.kind == "q_values" and a_ref.ndim == 1:
    rows = np.arange(len(z_ref))
    regret = float(np.mean(z_ref[rows, a_ref.astype(int)] - z_ref[rows, a_out.astype(int)]))
  return {"agreement": float(np.mean(a_ref == a_out)), "kl": mean_kl(z_ref / t, z_out / t),
          "action_distance": 0.0, "q_regret": regret}


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


def batched(runtime, observations: np.ndarray, batch: int = 256) -> np.ndarray:
  """`runtime` over `observations [N, ...]` in batches: float32 `[N, output_size]`."""
  return np.concatenate([np.asarray(runtime(observations[i:i + batch]), np.float32)
                         for i in range(0, len(observations), batch)])


# ----------------------------------------------------------------------------------------
# The sweep.


@dataclasses.dataclass(frozen=True)
class Setting:
  """One point of a study: a name, a per-layer policy and how it is executed."""
  name: str
  policy: mixed.PrecisionPolicy
  execution: str
  bias_corrected: bool = False  # biases corrected on the calibration observations
  # With bias_corrected: hidden Dense layers re-rounded on them first (error_compensation)
  error_compensated: bool = False

  @property
  def simulated(self) -> bool:
    return self.execution == SIMULATED


def sweep_settings(spec: ns.NetworkSpec, bits: Sequence[Any], granularities: Sequence[str],
                   sparsities: Sequence[float], low_bit_runtime: str = "simulated"
                   ) -> List[Setting]:
  """The grid: fp32 first (the reference), then every `bits` entry (an int 2..8 or
  "fp32"/"fp16"/"bf16") x granularity (integers only) x sparsity, as uniform policies.

  Raises:
    ValueError: a bad bit width, granularity or sparsity (one line).
  """
  for g in granularities:
    if g not in mixed.GRANULARITIES:
      raise ValueError(f"granularity {g!r}; allowed: {', '.join(mixed.GRANULARITIES)}")
  choices: List[mixed.LayerChoice] = [mixed.LayerChoice("fp32")]
  for b in bits:
    for s in sparsities:
      if isinstance(b, str) and b in mixed.FLOAT_KINDS:
        options = [mixed.LayerChoice(b, sparsity=s)]
      else:
        options = [mixed.LayerChoice(mixed.INT, int(b), g == mixed.PER_CHANNEL, s)
                   for g in granularities]
      for c in options:
        if c not in choices:
          choices.append(c)
  out = []
  for c in choices:
    policy = mixed.PrecisionPolicy.uniform(spec, c)
    out.append(Setting(c.label, policy, execution_for(policy, low_bit_runtime)))
  return out


def sensitivity_settings(spec: ns.NetworkSpec) -> List[Setting]:
  """The per-layer sensitivity study of int8 execution (`actorq quantize --sensitivity`):
  which layer's int8 execution moves the policy away from fp32, and whether the weights'
  rounding or the activations' quantization does it.

  Settings, in order: ``fp32`` (the reference, JAX); ``fp16`` (JAX fp16: how far a
  16-bit float policy already moves, the yardstick); ``int8`` (every layer on LiteRT's
  dynamic-range int8 kernels, which quantize each layer's input per batch row at run
  time); ``int8 weights only`` (every layer's weights int8-rounded, run SIMULATED on fp32
  kernels: no activation is quantized, so its gap to ``int8`` is the activations' share);
  for each parameter layer L, ``only L int8`` (the others fp32) and ``int8 but L fp32``;
  and ``int8 but first+last fp32`` (the network input and the output head in float32),
  also bias-corrected, and GPTQ-rounded and bias-corrected.
  The ``bias-corrected`` rows (``int8``, weights only, first+last fp32) have their biases
  corrected on the calibration observations (`bias_correction`): ``int8 bias-corrected``
  is what a training run's int8 actors execute. ``int8 GPTQ, bias-corrected`` (LiteRT
  int8) re-rounds the Dense layers on the calibration observations before correcting the
  biases (`error_compensation`: GPTQ, and OBS on the centred action values' gradient for
  layers of <= 4096 weights; the same scales and bytes, other int8 values); it is
  measured here, not what the actors execute.
  The first layer is the one whose input is the observation: ``int8 but <first> fp32`` is
  the network with its input kept in float.

  Raises:
    ValueError: a spec with fewer than one parameter layer (none exists: `NetworkSpec`
      ends with a Dense layer).
  """
  names = [l.name for l in spec.parameter_layers]
  fp32, int8 = mixed.LayerChoice("fp32"), mixed.LayerChoice(mixed.INT, 8)

  def policy(int8_layers) -> mixed.PrecisionPolicy:
    return mixed.PrecisionPolicy(tuple((n, int8 if n in int8_layers else fp32) for n in names))

  out = [Setting("fp32", policy(()), JAX_FP32),
         Setting("fp16", mixed.PrecisionPolicy.uniform(spec, mixed.LayerChoice("fp16")),
                 JAX_FP16),
         Setting("int8", policy(names), LITERT_INT8),
         Setting("int8 weights only", policy(names), SIMULATED),
         Setting("int8 bias-corrected", policy(names), LITERT_INT8, True),
         Setting("int8 weights only, bias-corrected", policy(names), SIMULATED, True),
         Setting("int8 GPTQ, bias-corrected", policy(names), LITERT_INT8, True, True),
         Setting("int8 weights only, GPTQ, bias-corrected", policy(names), SIMULATED, True,
                 True)]
  if len(names) > 1:
    for n in names:
      out.append(Setting(f"only {n} int8", policy((n,)), LITERT_MIXED))
    for n in names:
      out.append(Setting(f"int8 but {n} fp32", policy([m for m in names if m != n]),
                         LITERT_MIXED))
  if len(names) > 2:
    out.append(Setting("int8 but first+last fp32", policy(names[1:-1]), LITERT_MIXED))
    out.append(Setting("int8 but first+last fp32, bias-corrected", policy(names[1:-1]),
                       LITERT_MIXED, True))
    out.append(Setting("int8 but first+last fp32, GPTQ, bias-corrected", policy(names[1:-1]),
                       LITERT_MIXED, True, True))
  return out


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


LATENCY_CLOCKS = ("wall", "cpu")


def measure_latency(runtime, observation: np.ndarray, repeats: int) -> Dict[str, float]:
  """Batch-1 latency of `runtime` on `observation [1, ...]`: `{"wall_us", "cpu_us"}`, the
  medians over `repeats` calls of the wall time and of the process CPU time per call.

  On a quiet machine the two agree for one-thread runtimes; on a shared, oversubscribed
  one wall time includes the time the process waited for a core (measured here: a 1.6 ms
  float32 LiteRT call took 20 ms of wall time at load 15 on 2 cores), while CPU time does
  not (it counts every thread of the process, so a runtime that spins extra threads
  reads higher).
  """
  for _ in range(max(3, repeats // 20)):
    runtime(observation)
  wall, cpu = [], []
  for _ in range(int(repeats)):
    w0, c0 = time.perf_counter(), time.process_time()
    runtime(observation)
    cpu.append(time.process_time() - c0)
    wall.append(time.perf_counter() - w0)
  return {"wall_us": float(np.median(wall) * 1e6), "cpu_us": float(np.median(cpu) * 1e6)}


def measure_latency_us(runtime, observation: np.ndarray, repeats: int,
                       clock: str = "wall") -> float:
  """`measure_latency(...)[clock + "_us"]`, clock "wall" or "cpu".

  Raises:
    ValueError: an unknown clock.
  """
  if clock not in LATENCY_CLOCKS:
    raise ValueError(f"latency clock {clock!r}; allowed: {LATENCY_CLOCKS}")
  return measure_latency(runtime, observation, repeats)[f"{clock}_us"]


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
  semantics: OutputSemantics
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
    rt = make_runtime(ctx.params, ctx.spec, policy, JAX_FP32)
    seen: List[np.ndarray] = []
    episodes = run_episodes(ctx.env_fn, rt, ctx.semantics.selector, ctx.seeds, seen,
                            ctx.max_episode_steps)
    obs = subsample(seen, ctx.max_reference_observations)
    ctx.reference = {"episodes": episodes, "observations": obs,
                     "outputs": batched(rt, obs), "runtime": rt}
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
  run_episodes(env_fn, make_runtime(params, spec, policy, JAX_FP32), selector, seeds, seen,
               max_episode_steps)
  return subsample(seen, size)


def evaluate_setting(ctx: StudyContext, setting: Setting) -> Dict[str, Any]:
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
  rt = make_runtime(ctx.params, ctx.spec, setting.policy, setting.execution, cache=cache,
                    calibration=calibration,
                    compensate=compensation_target(ctx.semantics)
                    if setting.error_compensated else None)
  build_s = time.perf_counter() - start
  obs1 = ref["observations"][:1]
  timing = measure_latency(rt, obs1, ctx.latency_repeats)
  latency = timing[f"{ctx.latency_clock}_us"]
  if setting.policy == mixed.PrecisionPolicy.uniform(ctx.spec, mixed.LayerChoice("fp32")) \
      and setting.execution == JAX_FP32:
    episodes = ref["episodes"]
    outputs = ref["outputs"]
  else:
    episodes = run_episodes(ctx.env_fn, rt, ctx.semantics.selector, ctx.seeds, None,
                            ctx.max_episode_steps)
    outputs = batched(rt, ref["observations"])
  fid = fidelity(ref["outputs"], outputs, ctx.semantics)
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
  if setting.execution == LITERT_INT8 and any(c.bits < 8 for c in choices):
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


def run_study(ctx: StudyContext, settings: Sequence[Setting],
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
