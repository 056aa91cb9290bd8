"""Actor-side policy runtimes: `make_runtime(precision, spec)` and `choose_runtime`.

| precision | backend | payload shipped |
|---|---|---|
| "fp32", "fp16", "bf16" | jax.jit of `forward.forward` | same precision |
| "simulated-int8" | dequantize, jax fp32 (ACCURACY STUDIES ONLY, not fast) | "simulated-int8"/"int8" |
| "int8" | LiteRT/XNNPACK dynamic-range int8, patched flatbuffer | "int8" |
| "mixed" (`make_mixed_runtime`) | LiteRT: int8 / float32 kernels per layer | `mixed.make_payload` |
| "mixed:<choice>,..." (a per-layer policy by name) | the same | the same |

A `network_spec.RecurrentSpec` (R2D2's LSTM Q-network) runs in `make_runtime`'s
`recurrent.RecurrentRuntime`: its torso, LSTM gate matmul and head at the precision
above (a ``"mixed:..."`` name: each part under its own layers' labels), the LSTM cell's
elementwise update and its state in float32 numpy.
"""
from __future__ import annotations

import time
import warnings
from typing import Dict, Tuple

import numpy as np

from actorq import core
from actorq.quantization import mixed
from actorq.quantization import network_spec as ns
from actorq.quantization import payload as pl
from actorq.quantization.runtimes.base import PolicyRuntime
from actorq.quantization.runtimes.jax_runtime import JaxRuntime, SimulatedInt8Runtime
from actorq.quantization.runtimes.litert_runtime import LiteRTInt8Runtime, LiteRTMixedRuntime
from actorq.quantization.runtimes.recurrent import RecurrentRuntime

RUNTIME_PRECISIONS = core.PRECISIONS


def make_runtime(precision: str, spec: ns.NetworkSpec, num_threads: int = 1) -> PolicyRuntime:
  """A runtime executing `spec` at `precision`; feed it `make_payload(...,
  runtime.payload_precision, ...)` through `load`. A `RecurrentSpec` gets a
  `RecurrentRuntime` (stateful: `step(observation, state)`). A ``"mixed:<choice>,..."``
  precision (`mixed.precision_name`) gets the `LiteRTMixedRuntime` of that per-layer
  policy, whose `payload_precision` is the name itself (so a `PolicyServer` knows which
  policy to publish) and which loads `mixed.make_payload` payloads.

  Raises:
    ValueError: an unknown precision, or a ``"mixed:..."`` one `mixed.policy_of` refuses
      for `spec` (bad labels, another layer count than the spec's parameter layers).
  """
  if isinstance(spec, ns.RecurrentSpec):
    if not core.is_mixed(precision):
      core.check_precision(precision, "precision", RUNTIME_PRECISIONS)
    return RecurrentRuntime(precision, spec, make_runtime, num_threads)
  if core.is_mixed(precision):
    policy = mixed.policy_of(precision, spec)
    return LiteRTMixedRuntime(spec, policy.float_layers, num_threads,
                              payload_precision=precision)
  if precision in ("fp32", "fp16", "bf16"):
    return JaxRuntime(precision, spec, num_threads)
  if precision == "simulated-int8":
    return SimulatedInt8Runtime(spec, num_threads)
  if precision == "int8":
    return LiteRTInt8Runtime(spec, num_threads)
  raise ValueError(f"precision {precision!r} unknown; allowed: {RUNTIME_PRECISIONS}")


def make_mixed_runtime(policy, spec: ns.NetworkSpec, num_threads: int = 1) -> PolicyRuntime:
  """The LiteRT runtime executing a per-layer `mixed.PrecisionPolicy` (float layers with
  float32 kernels, integer layers of any width with int8 kernels); feed it
  `mixed.make_payload(params, spec, policy, version)`.

  Raises:
    ValueError: a policy for other layers than the spec's.
  """
  policy.check_against(spec)
  return LiteRTMixedRuntime(spec, policy.float_layers, num_threads)


def median_latency_us(runtime: PolicyRuntime, observation: np.ndarray,
                      repeats: int = 50, warmup: int = 5) -> float:
  """Median wall time of `runtime(observation)` in microseconds."""
  for _ in range(warmup):
    runtime(observation)
  times = []
  for _ in range(repeats):
    t0 = time.perf_counter()
    runtime(observation)
    times.append(time.perf_counter() - t0)
  return float(np.median(times) * 1e6)


_WARNED = set()


def choose_runtime(spec: ns.NetworkSpec, batch_size: int = 1, precision: str = "int8",
                   baseline: str = "fp32", num_threads: int = 1, params=None,
                   repeats: int = 30) -> Tuple[str, Dict[str, float]]:
  """Measures `precision` against `baseline` for this spec and batch size (case Q4).

  Returns `(chosen_precision, {"<precision>_us", "<baseline>_us", "ratio"})`, where
  ratio = precision latency / baseline latency. If the low-precision path is slower,
  warns ONCE per (spec, batch size, precision) and chooses the baseline: a slower
  low-precision path is never chosen silently.
  """
  if params is None:
    rng = np.random.default_rng(0)
    params = {n: {k: rng.normal(0, 0.1, s).astype(np.float32) for k, s in shp.items()}
              for n, shp in pl.expected_shapes(spec).items()}
  obs = np.random.default_rng(1).normal(
      size=(batch_size,) + tuple(spec.input_shape)).astype(np.float32)
  lat = {}
  for prec in (precision, baseline):
    rt = make_runtime(prec, spec, num_threads)
    rt.load(pl.make_payload(params, spec, rt.payload_precision, 0))
    lat[prec] = median_latency_us(rt, obs, repeats)
  ratio = lat[precision] / lat[baseline]
  info = {f"{precision}_us": lat[precision], f"{baseline}_us": lat[baseline], "ratio": ratio}
  if ratio > 1.0:
    key = (spec, batch_size, precision, baseline)
    if key not in _WARNED:
      _WARNED.add(key)
      warnings.warn(
          f"{precision} runtime is slower than {baseline} for this network at batch "
          f"{batch_size} ({lat[precision]:.1f} us vs {lat[baseline]:.1f} us, ratio "
          f"{ratio:.2f}); using {baseline}", RuntimeWarning, stacklevel=2)
    return baseline, info
  return precision, info


__all__ = ["PolicyRuntime", "RecurrentRuntime", "make_runtime", "make_mixed_runtime",
           "choose_runtime",
           "median_latency_us",
           "RUNTIME_PRECISIONS"]
