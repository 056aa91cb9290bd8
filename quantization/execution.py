"""How a per-layer precision policy (`mixed.PrecisionPolicy`) is executed, and the settings a
compression study evaluates (`actorq quantize --sweep` / `--sensitivity`, the study in
`actorq.studies.compression`):

* `execution_for(policy)`: which runtime executes it (`EXECUTIONS`: JAX fp32/fp16/bf16,
  LiteRT int8, LiteRT mixed, or SIMULATED: dequantized weights on fp32 JAX kernels);
* `make_runtime(params, spec, policy, execution)`: that runtime loaded with the compressed
  parameters, optionally bias-corrected (`bias_correction`) and error-compensated
  (`error_compensation`) on calibration observations;
* `Setting`, `sweep_settings` (a uniform grid of bit widths x granularities x sparsities)
  and `sensitivity_settings` (per-layer int8 sensitivity);
* `measure_latency`: the batch-1 latency of a runtime (wall and process CPU time medians);
  `batched`: a runtime over many observations.
"""
from __future__ import annotations

import dataclasses
import time
from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np

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


def batched(runtime, observations: np.ndarray, batch: int = 256) -> np.ndarray:
  """`runtime` over `observations [N, ...]` in batches: float32 `[N, output_size]`."""
  return np.concatenate([np.asarray(runtime(observations[i:i + batch]), np.float32)
                         for i in range(0, len(observations), batch)])


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
