"""The actor-side policy runtime interface."""
from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np

from actorq.quantization import forward
from actorq.quantization import network_spec as ns
from actorq.quantization import payload as pl


class PolicyRuntime:
  """Executes one `NetworkSpec` with parameters loaded from `Payload`s.

  Attributes:
    precision: what the runtime executes ("fp32", "fp16", "bf16", "simulated-int8", "int8").
    payload_precision: the `make_payload` precision the source must ship.
    version: version of the loaded parameters, -1 before the first `load`.
    timings: counters `loads`, `calls`, `last_load_ms`, `total_load_ms`.
  """
  precision: str = ""
  payload_precision: str = ""
  accepted_payloads: tuple = ()

  @classmethod
  def for_precision(cls, precision: str, spec: ns.NetworkSpec,
                    num_threads: int = 1) -> "PolicyRuntime":
    """The runtime of `precision` executing `spec` (how `runtimes.make_runtime` builds a
    table row's class): ``cls(spec, num_threads)``; a class serving several precisions
    (`JaxRuntime`) passes `precision` on."""
    del precision
    return cls(spec, num_threads)

  # What the precision table asks a row's class about a precision name (a family row's
  # class, e.g. `LiteRTMixedRuntime` for "mixed:<choice>,...", overrides them; a uniform
  # precision has nothing more to check or split).

  @classmethod
  def check_name(cls, precision: str) -> None:
    """Raises ValueError (one line, naming what is allowed) for a name of this row that
    does not parse, before any network is known; a uniform precision passes."""
    del precision

  @classmethod
  def check_fits(cls, precision: str, spec: ns.NetworkSpec) -> None:
    """Raises ValueError (one line) for a name that does not fit the network `spec` (a
    per-layer policy with another layer count); a uniform precision fits any network."""
    del precision, spec

  @classmethod
  def part_precision(cls, precision: str, spec: ns.NetworkSpec, layers) -> str:
    """The precision the part of `spec` made of the parameter layers `layers` runs at
    (`RecurrentRuntime`'s torso, gate matmul and head): the precision itself for a uniform
    one; a per-layer policy's name for those layers' choices."""
    del spec, layers
    return precision

  def __init__(self, spec: ns.NetworkSpec, num_threads: int = 1):
    if int(num_threads) < 1:
      raise ValueError(f"num_threads={num_threads}; allowed: >= 1")
    self.spec = spec
    self.num_threads = int(num_threads)
    self.version = -1
    self.timings = {"loads": 0, "calls": 0, "last_load_ms": 0.0, "total_load_ms": 0.0}

  def load(self, payload) -> None:
    t0 = time.perf_counter()
    self._load(payload)
    self._payload = payload
    ms = (time.perf_counter() - t0) * 1e3
    self.version = int(payload.version)
    self.timings["loads"] += 1
    self.timings["last_load_ms"] = ms
    self.timings["total_load_ms"] += ms

  def _load(self, payload) -> None:
    raise NotImplementedError

  def diagnose(self, observation) -> str:
    """Why this runtime's outputs for `observation` [B, ...] are not finite: the first
    layer whose output is NaN/inf when the loaded parameters are applied at this
    runtime's compute precision (int8: its dequantized weights with float activations,
    as LiteRT's dynamic-range kernels compute). For error messages, not the hot path."""
    dtype = {"fp16": jnp.float16, "bf16": jnp.bfloat16}.get(self.precision, jnp.float32)
    params = pl.dequantize_payload(self._payload)
    with jax.default_device(jax.devices("cpu")[0]):  # on the CPU, like the runtime itself
      return forward.first_non_finite_layer(params, self.spec, np.asarray(observation), dtype)

  def devices(self) -> tuple:
    """Where the runtime computes: the host CPU (JAX runtimes name their jax devices)."""
    return ("cpu",)

  def _check_observation(self, observation) -> np.ndarray:
    if self.version < 0:
      raise RuntimeError(f"{type(self).__name__}: call load(payload) before acting")
    obs = np.asarray(observation, np.float32)
    if obs.ndim != 1 + len(self.spec.input_shape) or obs.shape[1:] != tuple(
        self.spec.input_shape):
      raise ValueError(f"observation shape {obs.shape}; allowed: [B, "
                       f"{', '.join(map(str, self.spec.input_shape))}]")
    return obs

  def __call__(self, observation) -> np.ndarray:
    raise NotImplementedError
