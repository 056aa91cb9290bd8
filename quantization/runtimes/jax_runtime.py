"""JAX runtimes: fp32 / fp16 / bf16 compute, and "simulated-int8".

"simulated-int8" is for ACCURACY STUDIES ONLY: it dequantizes the int8 payload
to float32 once per load and runs the fp32 JAX forward, so it reproduces the
quantized policy's *values* but none of int8's speed. Use the "int8" runtime
(LiteRT) to act fast.

Placement: a runtime computes on the host CPU whatever jax's default device is (a process
whose learner uses a GPU sets that default): its parameters are committed to
`jax.devices("cpu")[0]` (`device`), so the jitted forward, which follows committed
arguments, runs there, and observations go there too.

The forward is `jax.jit`-compiled once per batch size (the first call for a new
batch size costs a compilation, ~50-300 ms). XLA's CPU thread pool is process
wide: pin it with `XLA_FLAGS="--xla_cpu_multi_thread_eigen=false
intra_op_parallelism_threads=1"` set before importing jax; `num_threads` is
recorded but cannot change it after jax started.
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from actorq.quantization import forward as fwd
from actorq.quantization import payload as pl
from actorq.quantization.runtimes import base

_DTYPES = {"fp32": jnp.float32, "fp16": jnp.float16, "bf16": jnp.bfloat16}


class JaxRuntime(base.PolicyRuntime):

  @classmethod
  def for_precision(cls, precision: str, spec, num_threads: int = 1) -> "JaxRuntime":
    return cls(precision, spec, num_threads)

  def __init__(self, precision: str, spec, num_threads: int = 1):
    if precision not in _DTYPES:
      raise ValueError(f"JaxRuntime precision {precision!r}; allowed: {tuple(_DTYPES)}")
    super().__init__(spec, num_threads)
    self.precision = precision
    self.payload_precision = precision
    self.accepted_payloads = (precision,)
    self._dtype = _DTYPES[precision]
    self.device = jax.devices("cpu")[0]
    self._fn = jax.jit(functools.partial(fwd.forward, spec=spec, dtype=self._dtype))
    self._params = None
    self._unpack = None  # (treedef, shapes, jitted flat -> params), made on the first load

  def _to_device(self, payload):
    return {n: {"w": np.asarray(l["w"], self._dtype), "b": np.asarray(l["b"], self._dtype)}
            for n, l in payload.layers.items()}

  def _load(self, payload):
    pl.check_payload(payload, self.spec, self.accepted_payloads)
    self._params = self._put(self._to_device(payload))

  def _put(self, host_params):
    """The params on `device` in ONE host-to-device transfer: the leaves are copied into
    one flat buffer, put, and split there by a jitted slice-and-reshape (compiled once).
    Bit-identical to `jax.device_put` of the tree, which costs one transfer per leaf:
    ~260 us against ~90 us for the 8 leaves of DQN's 2x256 policy on one core, paid at
    every pull (issue 20)."""
    leaves, treedef = jax.tree_util.tree_flatten(host_params)
    shapes = tuple(leaf.shape for leaf in leaves)
    if self._unpack is None or self._unpack[:2] != (treedef, shapes):
      sizes = [int(np.prod(s)) for s in shapes]
      offsets = np.concatenate([[0], np.cumsum(sizes)]).tolist()

      def unpack(flat):
        return jax.tree_util.tree_unflatten(
            treedef, [flat[a:b].reshape(s) for a, b, s in zip(offsets, offsets[1:], shapes)])

      self._unpack = (treedef, shapes, jax.jit(unpack))
    flat = np.concatenate([np.ravel(leaf) for leaf in leaves]) if leaves else np.zeros(0)
    return self._unpack[2](jax.device_put(flat, self.device))

  def devices(self) -> tuple:
    """The devices holding the loaded parameters (the CPU), e.g. ``("TFRT_CPU_0",)``."""
    if self._params is None:
      return (str(self.device),)
    return tuple(sorted({str(d) for leaf in jax.tree_util.tree_leaves(self._params)
                         for d in leaf.devices()}))

  def __call__(self, observation) -> np.ndarray:
    obs = self._check_observation(observation)
    self.timings["calls"] += 1
    return np.asarray(self._fn(self._params, observation=obs))


class SimulatedInt8Runtime(JaxRuntime):
  """Dequantize-then-fp32 JAX runtime (accuracy studies only; not fast)."""

  @classmethod
  def for_precision(cls, precision: str, spec, num_threads: int = 1) -> "SimulatedInt8Runtime":
    del precision
    return cls(spec, num_threads)

  def __init__(self, spec, num_threads: int = 1):
    super().__init__("fp32", spec, num_threads)
    self.precision = "simulated-int8"
    self.payload_precision = "simulated-int8"
    self.accepted_payloads = pl.INT8_PRECISIONS

  def _to_device(self, payload):
    return {n: {"w": np.asarray(l["w"], np.float32), "b": np.asarray(l["b"], np.float32)}
            for n, l in pl.dequantize_payload(payload).items()}
