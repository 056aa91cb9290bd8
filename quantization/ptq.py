"""Post-training quantization (PTQ) of a `{layer: {"w", "b"}}` params tree.

Weights are quantized with min-max ranges (Jacob et al. 2018; Krishnan et al.,
QuaRL / ActorQ, which quantize actor weights post-training to int8 each time the
learner broadcasts them). Biases stay float32 (they are tiny and the fast
runtimes take float biases). Channel axis for per-channel quantization is the
*output* axis: the last axis of both Dense `w [in, units]` and Conv `w` (HWIO).

Per-tensor vs per-channel (handed case Q2): with one scale per tensor, a channel
whose magnitudes are far below the tensor's max is flushed to (near) zero, e.g.
|w| ~ 1e-3 next to a channel with |w| ~ 10 gives scale 10/127 ~ 0.08 and every
value of the small channel rounds to 0. `error_report` flags such channels
("flushed") so the choice of granularity is visible.

This module uses numpy (the learner-side hot path of `make_payload`); it follows
`ops.compute_qparams` / `ops.quantize` exactly (tests compare them).
"""
from __future__ import annotations

import dataclasses
from typing import Dict, Iterable, Mapping, Optional

import jax
import jax.numpy as jnp
import numpy as np

from actorq.quantization import calibration
from actorq.quantization import forward
from actorq.quantization import network_spec as ns
from actorq.quantization import ops


@dataclasses.dataclass(frozen=True)
class LayerPolicy:
  """How one layer is quantized.

  Attributes:
    bits: 2..8.
    per_channel: one scale per output channel (else one per tensor).
    symmetric: zero_point = 0 (else affine).
    keep_fp32: leave this layer in float32.
  """
  bits: int = 8
  per_channel: bool = True
  symmetric: bool = True
  keep_fp32: bool = False


@dataclasses.dataclass(frozen=True)
class QuantPolicy:
  """A default `LayerPolicy` with per-layer overrides `{layer_name: LayerPolicy}`."""
  default: LayerPolicy = LayerPolicy()
  overrides: Mapping[str, LayerPolicy] = dataclasses.field(default_factory=dict)

  def for_layer(self, name: str) -> LayerPolicy:
    return self.overrides.get(name, self.default)


@dataclasses.dataclass
class QuantizedLayer:
  """One layer. `w_q` int8 (w's shape) or None if kept fp32 (then `w` holds float32).

  `scale` float32 `[]`/`[C]`, `zero_point` int32 (same shape; omitted from `nbytes`
  when symmetric since it is all zeros), `b` float32 `[units]`.
  """
  w_q: Optional[np.ndarray]
  scale: Optional[np.ndarray]
  zero_point: Optional[np.ndarray]
  b: np.ndarray
  bits: int = 8
  symmetric: bool = True
  axis: Optional[int] = None
  w: Optional[np.ndarray] = None  # float32 weights when kept in fp32

  @property
  def nbytes(self) -> int:
    if self.w_q is None:
      return int(self.w.nbytes + self.b.nbytes)
    n = self.w_q.nbytes + self.scale.nbytes + self.b.nbytes
    if not self.symmetric:
      n += self.zero_point.nbytes
    return int(n)


@dataclasses.dataclass
class QuantizedParams:
  """A quantized params tree: `{layer: QuantizedLayer}` plus the learner `version`.

  `nbytes` counts the payload actually needed: int8 weights, float32 scales,
  int32 zero-points (affine only), float32 biases, fp32 weights of kept layers.
  """
  layers: Dict[str, QuantizedLayer]
  version: int = 0

  @property
  def nbytes(self) -> int:
    return sum(l.nbytes for l in self.layers.values())


def _np_qparams(lo, hi, bits, symmetric):
  qmin, qmax = ops.qrange(bits, symmetric)
  lo = np.asarray(lo, np.float32)
  hi = np.asarray(hi, np.float32)
  tiny = np.float32(np.finfo(np.float32).tiny)
  with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
    if symmetric:
      amax = np.maximum(np.abs(lo), np.abs(hi))
      scale = np.where(amax > 0, np.maximum(amax * ops.inverse_steps(qmax), tiny),
                       np.float32(1))
      zp = np.zeros(scale.shape, np.int32)
    else:
      lo = np.minimum(lo, 0)
      hi = np.maximum(hi, 0)
      span = hi - lo
      scale = np.where(span > 0, np.maximum(span * ops.inverse_steps(qmax - qmin), tiny),
                       np.float32(1)).astype(np.float32)
      zp = np.clip(qmin - np.round(lo / scale), qmin, qmax).astype(np.int32)
  return np.asarray(scale, np.float32), zp


def quantize_array(w: np.ndarray, bits: int = 8, symmetric: bool = True,
                   axis: Optional[int] = None, name: Optional[str] = None):
  """numpy twin of `ops.quantize_tensor`: returns `(q int8, scale f32, zp int32)`.

  Raises ValueError (prefixed by `name`) for bad bits/axis, empty or non-finite `w`.
  """
  bits = ops.check_bits(bits, name)
  w = np.asarray(w, np.float32)
  if w.size == 0 or (axis is not None and not -w.ndim <= axis < w.ndim):
    ops.check_tensor(w, name, axis)
  red = tuple(range(w.ndim)) if axis is None else tuple(
      a for a in range(w.ndim) if a != axis % w.ndim)
  lo, hi = w.min(axis=red), w.max(axis=red)
  if not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi))):
    ops.check_tensor(w, name, axis)  # raises with the details (min/max see NaN/inf)
  scale, zp = _np_qparams(lo, hi, bits, symmetric)
  qmin, qmax = ops.qrange(bits, symmetric)
  shape = [1] * w.ndim
  if axis is not None:
    shape[axis % w.ndim] = -1
  s = scale.reshape(shape) if axis is not None else scale
  q = np.divide(w, s)
  np.rint(q, out=q)  # round half to even
  if not symmetric:
    q += zp.reshape(shape).astype(np.float32) if axis is not None else np.float32(zp)
  np.clip(q, qmin, qmax, out=q)
  return q.astype(np.int8), scale, zp


def dequantize_array(q, scale, zero_point, axis: Optional[int] = None) -> np.ndarray:
  """`scale * (q - zero_point)` in float32 (numpy)."""
  q = np.asarray(q)
  shape = [1] * q.ndim
  if axis is not None and np.ndim(scale) == 1:
    shape[axis % q.ndim] = -1
    scale = np.reshape(scale, shape)
    zero_point = np.reshape(zero_point, shape)
  return ((q.astype(np.float32) - np.asarray(zero_point, np.float32))
          * np.asarray(scale, np.float32)).astype(np.float32)


def quantize_params(params, policy: Optional[QuantPolicy] = None,
                    version: int = 0) -> QuantizedParams:
  """PTQ of `{layer: {"w", "b"}}` under `policy`.

  Raises:
    ValueError naming the layer for bad bits, empty or non-finite weights, missing keys.
  """
  policy = policy or QuantPolicy()
  unknown = set(policy.overrides) - set(params)
  if unknown:
    raise ValueError(f"policy overrides name layers {sorted(unknown)} not in params "
                     f"{sorted(params)}")
  layers = {}
  for name in params:
    p = params[name]
    if "w" not in p or "b" not in p:
      raise ValueError(f"layer {name!r}: expected keys 'w' and 'b', got {sorted(p)}")
    lp = policy.for_layer(name)
    w = np.asarray(p["w"], np.float32)
    b = np.asarray(p["b"], np.float32)
    ops.check_tensor(b, f"layer {name!r} bias")
    if lp.keep_fp32:
      ops.check_tensor(w, f"layer {name!r} weights")
      layers[name] = QuantizedLayer(None, None, None, b, 32, True, None, w=w)
      continue
    axis = w.ndim - 1 if lp.per_channel else None
    q, s, z = quantize_array(w, lp.bits, lp.symmetric, axis, f"layer {name!r} weights")
    layers[name] = QuantizedLayer(q, s, z, b, lp.bits, lp.symmetric, axis)
  return QuantizedParams(layers, int(version))


def dequantize_layer(layer: QuantizedLayer) -> np.ndarray:
  if layer.w_q is None:
    return layer.w
  return dequantize_array(layer.w_q, layer.scale, layer.zero_point, layer.axis)


def dequantize_params(qparams: QuantizedParams):
  """float32 `{layer: {"w", "b"}}` reconstruction."""
  return {n: {"w": dequantize_layer(l), "b": l.b} for n, l in qparams.layers.items()}


def size_report(params, qparams: QuantizedParams) -> dict:
  """Bytes per layer and totals: `{"layers": {name: {"fp32", "quantized"}}, "fp32_bytes",
  "quantized_bytes", "ratio"}`."""
  layers = {}
  for name, l in qparams.layers.items():
    fp = sum(np.asarray(v).size * 4 for v in params[name].values())
    layers[name] = {"fp32": int(fp), "quantized": l.nbytes}
  fp32 = sum(v["fp32"] for v in layers.values())
  return {"layers": layers, "fp32_bytes": fp32, "quantized_bytes": qparams.nbytes,
          "ratio": qparams.nbytes / fp32}


def channel_errors(w: np.ndarray, w_hat: np.ndarray, axis: int) -> np.ndarray:
  """Relative L2 error per channel `||w_c - w_hat_c|| / ||w_c||` (0 for an all-zero
  channel reconstructed exactly, inf for an all-zero channel that is not)."""
  w = np.moveaxis(np.asarray(w, np.float32), axis, 0).reshape(w.shape[axis], -1)
  w_hat = np.moveaxis(np.asarray(w_hat, np.float32), axis, 0).reshape(w.shape[0], -1)
  num = np.linalg.norm(w - w_hat, axis=1)
  den = np.linalg.norm(w, axis=1)
  with np.errstate(divide="ignore", invalid="ignore"):
    return np.where(den > 0, num / den, np.where(num > 0, np.inf, 0.0))


def flushed_channels(w: np.ndarray, w_hat: np.ndarray, axis: int,
                     threshold: float = 0.5) -> list:
  """Channels with non-zero weights of which more than `threshold` dequantize to 0."""
  w = np.moveaxis(np.asarray(w), axis, 0).reshape(np.shape(w)[axis], -1)
  w_hat = np.moveaxis(np.asarray(w_hat), axis, 0).reshape(w.shape[0], -1)
  nz = w != 0
  lost = nz & (w_hat == 0)
  out = []
  for c in range(w.shape[0]):
    if nz[c].any() and lost[c].sum() > threshold * nz[c].sum():
      out.append(c)
  return out


def granularity_report(w: np.ndarray, bits: int = 8, axis: int = -1,
                       symmetric: bool = True) -> dict:
  """Per-tensor vs per-channel errors of one weight tensor (case Q2).

  Returns `{"per_channel": {...}, "per_tensor": {...}}` each with
  `"channel_rel_error"` (array `[C]`), `"max_rel_error"` and `"flushed_channels"`
  (non-zero channels mostly rounded to 0).
  """
  w = np.asarray(w, np.float32)
  axis = axis % w.ndim
  out = {}
  for label, ax in (("per_channel", axis), ("per_tensor", None)):
    q, s, z = quantize_array(w, bits, symmetric, ax)
    w_hat = dequantize_array(q, s, z, ax)
    err = channel_errors(w, w_hat, axis)
    out[label] = {"channel_rel_error": err,
                  "max_rel_error": float(np.max(err[np.isfinite(err)], initial=0.0)),
                  "flushed_channels": flushed_channels(w, w_hat, axis)}
  return out


def error_report(params, qparams: QuantizedParams) -> dict:
  """Per layer: relative error per output channel, its max, flushed channels, and
  the same figures for the other granularity (so per-tensor vs per-channel is visible)."""
  rep = {}
  for name, l in qparams.layers.items():
    w = np.asarray(params[name]["w"], np.float32)
    if l.w_q is None:
      rep[name] = {"kept_fp32": True}
      continue
    axis = w.ndim - 1
    w_hat = dequantize_layer(l)
    err = channel_errors(w, w_hat, axis)
    g = granularity_report(w, l.bits, axis, l.symmetric)
    rep[name] = {"granularity": "per_channel" if l.axis is not None else "per_tensor",
                 "channel_rel_error": err,
                 "max_rel_error": float(np.max(err[np.isfinite(err)], initial=0.0)),
                 "flushed_channels": flushed_channels(w, w_hat, axis),
                 "per_tensor_flushed_channels": g["per_tensor"]["flushed_channels"],
                 "per_channel_max_rel_error": g["per_channel"]["max_rel_error"],
                 "per_tensor_max_rel_error": g["per_tensor"]["max_rel_error"]}
  return rep


# ----------------------------------------------------------------------------
# Activation calibration.

def layer_activations(params, spec: ns.NetworkSpec, observation) -> Dict[str, jnp.ndarray]:
  """Output of every layer (after its activation) for `observation [B, *input_shape]`,
  by the one forward pass (`forward.layer_outputs`); includes `"input"` (scaled
  observation)."""
  x = forward.scaled_input(spec, jnp.asarray(observation, jnp.float32))
  acts = {"input": x}
  for layer, x in forward.layer_outputs(spec.layers, x,
                                        forward.params_layer(params, jnp.float32)):
    acts[layer.name] = x
  return acts


def calibrate_activations(params, spec: ns.NetworkSpec, batches: Iterable,
                          observer: str = "moving_average", bits: int = 8,
                          symmetric: bool = False, **observer_kwargs) -> dict:
  """Per-tensor activation ranges from observation batches.

  Returns:
    `{name: {"min", "max", "scale", "zero_point"}}` for `"input"` and every layer.
  Raises:
    ValueError if `batches` is empty or a batch contains NaN/inf.
  """
  obs = calibration.make_observer(observer, None, **observer_kwargs)
  fn = jax.jit(lambda o: layer_activations(params, spec, o))
  states = None
  for i, batch in enumerate(batches):
    ops.check_tensor(batch, f"calibration batch {i}")
    acts = fn(jnp.asarray(batch))
    if states is None:
      states = {k: obs.init() for k in acts}
    states = {k: obs.update(states[k], v) for k, v in acts.items()}
  if states is None:
    raise ValueError("calibrate_activations: no batches given; allowed: >= 1 batch")
  out = {}
  for k, st in states.items():
    s, z = obs.qparams(st, bits, symmetric)
    out[k] = {"min": float(st.min), "max": float(st.max), "scale": float(s),
              "zero_point": int(z)}
  return out
