"""Pure quantization ops (rlax style): quantize, dequantize, fake quant, casts.

Conventions (Jacob et al. 2018, "Quantization and Training of Neural Networks for
Efficient Integer-Arithmetic-Only Inference", eq. 1-2; Krishnan et al., "QuaRL:
Quantization for Fast and Environmentally Sustainable Reinforcement Learning"):

    real = scale * (q - zero_point)
    q    = clip(round_half_to_even(real / scale) + zero_point, qmin, qmax)

* `bits` is an int in 2..8; integers are stored as int8.
* Symmetric: zero_point = 0, "narrow" range qmin = -(2^(b-1) - 1), qmax = 2^(b-1) - 1
  (int8: [-127, 127], as TFLite/XNNPACK weights), scale = max|x| / qmax (computed as
  max|x| * fl32(1 / qmax), see `inverse_steps`).
* Affine: full signed range qmin = -2^(b-1), qmax = 2^(b-1) - 1, the float range is
  first widened to contain 0 (so 0 is exactly representable), scale = (max - min) /
  (qmax - qmin), zero_point = qmin - round(min / scale), clipped into [qmin, qmax].
* Per-tensor: one scale (a 0-d array). Per-channel: `axis` names the channel axis of
  `x`, scales/zero-points have shape `[x.shape[axis]]`.
* Degenerate ranges (all zeros, a constant tensor or channel) give a finite scale > 0
  (1.0 for an all-zero range) and a zero-point inside [qmin, qmax]; never NaN/inf.
* Values outside the representable range saturate to qmin/qmax; nothing wraps.

All functions are pure and jit/vmap friendly. Value checks (NaN/inf) run only on
concrete (non-traced) inputs; shape/bit-width checks are static and always run.
"""
from __future__ import annotations

from typing import NamedTuple, Optional, Tuple

import jax
import jax.numpy as jnp
import numpy as np

MIN_BITS = 2
MAX_BITS = 8
# Smallest scale ever produced; keeps x / scale finite for subnormal ranges.
_MIN_SCALE = float(np.finfo(np.float32).tiny)


class QTensor(NamedTuple):
  """A quantized tensor.

  Attributes:
    values: int8, same shape as the float tensor.
    scale: float32, `[]` (per-tensor) or `[C]` (per-channel along `axis`).
    zero_point: int32, same shape as `scale`.
    axis: the channel axis or None.
    bits: bit width (2..8).
    symmetric: whether zero_point == 0 with a narrow range.
  """
  values: jnp.ndarray
  scale: jnp.ndarray
  zero_point: jnp.ndarray
  axis: Optional[int]
  bits: int
  symmetric: bool


def _where(name: Optional[str]) -> str:
  return f"{name}: " if name else ""


def check_bits(bits, name: Optional[str] = None) -> int:
  """Validates a bit width; returns it as int. Raises ValueError outside 2..8."""
  if isinstance(bits, bool) or not isinstance(bits, (int, np.integer)) or not (
      MIN_BITS <= int(bits) <= MAX_BITS):
    raise ValueError(
        f"{_where(name)}bits={bits!r} is not supported; allowed: an int in "
        f"{MIN_BITS}..{MAX_BITS}")
  return int(bits)


def check_tensor(x, name: Optional[str] = None, axis: Optional[int] = None):
  """Static checks (non-empty, valid axis) and, when concrete, finiteness.

  Raises:
    ValueError naming `name`, what is wrong and what is allowed.
  """
  shape = tuple(np.shape(x))
  if int(np.prod(shape)) == 0:
    raise ValueError(f"{_where(name)}cannot quantize an empty tensor of shape "
                     f"{shape}; allowed: tensors with at least one element")
  if axis is not None:
    if not -len(shape) <= axis < len(shape):
      raise ValueError(f"{_where(name)}axis={axis} is out of range for shape "
                       f"{shape}; allowed: -{len(shape)}..{len(shape) - 1} or None")
  if not isinstance(x, jax.core.Tracer):
    arr = np.asarray(x)
    if not np.issubdtype(arr.dtype, np.number) and arr.dtype != jnp.bfloat16:
      raise ValueError(f"{_where(name)}dtype {arr.dtype} is not numeric")
    bad = ~np.isfinite(arr.astype(np.float32))
    if bad.any():
      raise ValueError(
          f"{_where(name)}tensor of shape {shape} has {int(bad.sum())} non-finite "
          f"values (NaN/inf), first at index {np.unravel_index(int(np.argmax(bad)), shape)}; "
          "allowed: finite values only")


def qrange(bits: int, symmetric: bool = True) -> Tuple[int, int]:
  """Integer range `(qmin, qmax)`: symmetric [-(2^(b-1)-1), 2^(b-1)-1], affine [-2^(b-1), 2^(b-1)-1]."""
  bits = check_bits(bits)
  qmax = 2 ** (bits - 1) - 1
  qmin = -qmax if symmetric else -(2 ** (bits - 1))
  return qmin, qmax


def _reduce_axes(ndim: int, axis: Optional[int]):
  if axis is None:
    return tuple(range(ndim))
  axis = axis % ndim
  return tuple(a for a in range(ndim) if a != axis)


def min_max(x: jnp.ndarray, axis: Optional[int] = None):
  """Min and max of `x` over everything but `axis`: `[]` or `[x.shape[axis]]` float32."""
  x = jnp.asarray(x, jnp.float32)
  red = _reduce_axes(x.ndim, axis)
  return jnp.min(x, axis=red), jnp.max(x, axis=red)


def inverse_steps(steps: int) -> np.float32:
  """`fl32(1 / steps)`: scales are `range * inverse_steps(steps)`, a float32 product.

  Why not `range / steps`: under `jax.jit` XLA rewrites a division by a constant into a
  multiplication by its rounded reciprocal, so a jitted fake quant (QAT's forward) and
  the numpy PTQ of the same weights gave scales 1 ulp apart in about a third of the
  channels (measured, jax 0.4.13, qmax 3, 7, 127). Every path (numpy, eager and jitted
  JAX) multiplies by this same float32 constant, so their scales are bit-identical.
  """
  return np.float32(1.0 / int(steps))


def compute_qparams(x_min: jnp.ndarray, x_max: jnp.ndarray, bits: int = 8,
                    symmetric: bool = True):
  """Scale and zero-point from a float range (Jacob et al. 2018, sec. 2.1).

  The scale is `max(|x_min|, |x_max|) * fl32(1 / qmax)` (symmetric) or
  `(hi - lo) * fl32(1 / (qmax - qmin))` (affine): within 1 ulp of the division and the
  same number in numpy and under jit (see `inverse_steps`).

  Args:
    x_min, x_max: float `[]` or `[C]`, x_min <= x_max.
    bits: 2..8.
    symmetric: see module docstring.

  Returns:
    `(scale float32, zero_point int32)` of the shape of `x_min`; scale is finite and
    > 0 (1.0 for an all-zero range) and zero_point lies in [qmin, qmax].
  """
  qmin, qmax = qrange(bits, symmetric)
  x_min = jnp.asarray(x_min, jnp.float32)
  x_max = jnp.asarray(x_max, jnp.float32)
  if symmetric:
    amax = jnp.maximum(jnp.abs(x_min), jnp.abs(x_max))
    scale = jnp.where(amax > 0, jnp.maximum(amax * inverse_steps(qmax), _MIN_SCALE), 1.0)
    zero_point = jnp.zeros(scale.shape, jnp.int32)
  else:
    lo = jnp.minimum(x_min, 0.0)
    hi = jnp.maximum(x_max, 0.0)
    span = hi - lo
    scale = jnp.where(span > 0, jnp.maximum(span * inverse_steps(qmax - qmin), _MIN_SCALE),
                      1.0)
    zero_point = jnp.clip(qmin - jnp.round(lo / scale), qmin, qmax).astype(jnp.int32)
  return scale.astype(jnp.float32), zero_point


def _bshape(scale, x_ndim: int, axis: Optional[int]):
  """Reshapes a per-channel vector to broadcast against x along `axis`."""
  if axis is None or jnp.ndim(scale) == 0:
    return scale
  shape = [1] * x_ndim
  shape[axis % x_ndim] = -1
  return jnp.reshape(scale, shape)


def quantize(x: jnp.ndarray, scale: jnp.ndarray, zero_point: jnp.ndarray,
             bits: int = 8, symmetric: bool = True,
             axis: Optional[int] = None) -> jnp.ndarray:
  """`q = clip(round_half_to_even(x / scale) + zero_point, qmin, qmax)` as int8.

  Args:
    x: float `[...]`.
    scale: float32 `[]` or `[x.shape[axis]]`, > 0.
    zero_point: int32, same shape as scale.
    bits, symmetric: select `(qmin, qmax)` (see `qrange`).
    axis: channel axis of x for per-channel parameters.

  Returns:
    int8 of x's shape; saturates (never wraps).
  """
  qmin, qmax = qrange(bits, symmetric)
  x = jnp.asarray(x, jnp.float32)
  if axis is not None and jnp.ndim(scale) == 1 and scale.shape[0] != x.shape[axis]:
    raise ValueError(f"per-channel scale has {scale.shape[0]} entries but x.shape[{axis}]"
                     f" = {x.shape[axis]}; allowed: equal sizes")
  s = _bshape(jnp.asarray(scale, jnp.float32), x.ndim, axis)
  zp = _bshape(jnp.asarray(zero_point, jnp.float32), x.ndim, axis)
  q = jnp.clip(jnp.round(x / s) + zp, qmin, qmax)
  return q.astype(jnp.int8)


def dequantize(q: jnp.ndarray, scale: jnp.ndarray, zero_point: jnp.ndarray,
               axis: Optional[int] = None) -> jnp.ndarray:
  """`real = scale * (q - zero_point)`, float32 of q's shape."""
  q = jnp.asarray(q)
  s = _bshape(jnp.asarray(scale, jnp.float32), q.ndim, axis)
  zp = _bshape(jnp.asarray(zero_point, jnp.float32), q.ndim, axis)
  return (q.astype(jnp.float32) - zp) * s


def quantize_tensor(x: jnp.ndarray, bits: int = 8, symmetric: bool = True,
                    axis: Optional[int] = None, name: Optional[str] = None) -> QTensor:
  """Min-max calibrated quantization of `x` (per-tensor, or per-channel along `axis`).

  Raises:
    ValueError: bits outside 2..8, empty x, bad axis, NaN/inf in x (message starts
      with `name` when given, e.g. the layer).
  """
  bits = check_bits(bits, name)
  check_tensor(x, name, axis)
  x = jnp.asarray(x, jnp.float32)
  lo, hi = min_max(x, axis)
  scale, zp = compute_qparams(lo, hi, bits, symmetric)
  q = quantize(x, scale, zp, bits, symmetric, axis)
  return QTensor(q, scale, zp, None if axis is None else axis % x.ndim, bits, symmetric)


def dequantize_tensor(qt: QTensor) -> jnp.ndarray:
  """float32 reconstruction of a `QTensor`."""
  return dequantize(qt.values, qt.scale, qt.zero_point, qt.axis)


def fake_quant(x: jnp.ndarray, scale: jnp.ndarray, zero_point: jnp.ndarray,
               bits: int = 8, symmetric: bool = True,
               axis: Optional[int] = None) -> jnp.ndarray:
  """Quantize-dequantize with a straight-through estimator (Bengio et al. 2013).

  Forward: `dequantize(quantize(x))`, saturating monotonically at
  `lo = (qmin - zp) * s` and `hi = (qmax - zp) * s`.
  Backward: d out / d x = 1 for `lo <= x <= hi` (inclusive), 0 outside; no gradient
  flows to `scale` / `zero_point` (they are treated as constants, as in Jacob et al.
  2018 sec. 3 and QuaRL's QAT).

  Args:
    x: float `[...]`; scale/zero_point `[]` or `[x.shape[axis]]`.

  Returns:
    float32 of x's shape.
  """
  qmin, qmax = qrange(bits, symmetric)
  x = jnp.asarray(x, jnp.float32)
  s = jax.lax.stop_gradient(_bshape(jnp.asarray(scale, jnp.float32), x.ndim, axis))
  zp = jax.lax.stop_gradient(_bshape(jnp.asarray(zero_point, jnp.float32), x.ndim, axis))
  lo = (qmin - zp) * s
  hi = (qmax - zp) * s
  q = jnp.clip(jnp.round(x / s) + zp, qmin, qmax)
  out = (q - zp) * s
  mask = ((x >= lo) & (x <= hi)).astype(x.dtype)
  # value = out; gradient = mask.
  return x * mask + jax.lax.stop_gradient(out - x * mask)


def fake_quant_tensor(x: jnp.ndarray, bits: int = 8, symmetric: bool = True,
                      axis: Optional[int] = None) -> jnp.ndarray:
  """`fake_quant` with min-max parameters computed from `x` itself (stop-gradient).

  The range covers every element of `x` by construction, so the STE gradient is 1
  everywhere (the range ends computed from a rounded scale / zero-point can miss
  the extreme elements by an ulp; they are not treated as saturated).
  """
  bits = check_bits(bits)
  check_tensor(x, None, axis)
  x = jnp.asarray(x, jnp.float32)
  lo, hi = min_max(jax.lax.stop_gradient(x), axis)
  scale, zp = compute_qparams(lo, hi, bits, symmetric)
  out = fake_quant(jax.lax.stop_gradient(x), scale, zp, bits, symmetric, axis)
  return x + jax.lax.stop_gradient(out - x)


def cast(x: jnp.ndarray, dtype) -> jnp.ndarray:
  """Casts to a float dtype in {float32, float16, bfloat16} (round to nearest even)."""
  dtype = jnp.dtype(dtype)
  if dtype not in (jnp.dtype(jnp.float32), jnp.dtype(jnp.float16), jnp.dtype(jnp.bfloat16)):
    raise ValueError(f"dtype {dtype} not supported; allowed: float32, float16, bfloat16")
  return jnp.asarray(x).astype(dtype)


def to_fp16(x: jnp.ndarray) -> jnp.ndarray:
  """float16 cast (saturates to inf beyond 65504, like IEEE)."""
  return cast(x, jnp.float16)


def to_bf16(x: jnp.ndarray) -> jnp.ndarray:
  """bfloat16 cast (fp32 exponent range, 8-bit mantissa)."""
  return cast(x, jnp.bfloat16)


def roundtrip(x: jnp.ndarray, dtype) -> jnp.ndarray:
  """`x` cast to `dtype` and back to float32: the reduced-precision error."""
  return cast(x, dtype).astype(jnp.float32)
