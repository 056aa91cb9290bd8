"""Quantization-aware training (QAT) transforms, off unless a learner opts in.

`fake_quant_params` maps a `{layer: {"w", "b"}}` tree to the same tree whose
weights went through `ops.fake_quant` with min-max ranges (Jacob et al. 2018,
sec. 3; QuaRL trains with such quantize-dequantize nodes). Gradients use the
straight-through estimator (Bengio et al. 2013): d w_fq / d w = 1 inside the
representable range (always true for min-max ranges), so a learner calls::

    loss = loss_fn(qat.fake_quant_params(params), ...)

and its optimizer updates the float `params`. Biases stay float32.

The weights it computes with are bit-identical, jitted or not, to PTQ's at the same bits
and granularity (`ptq.quantize_array` then `ptq.dequantize_array`, used by `make_payload`
and by `actorq quantize --sweep`'s int<b> settings): both take scales as
`max|w| * ops.inverse_steps(qmax)`, see there.
"""
from __future__ import annotations

from typing import Callable, Optional, Sequence

import jax
import jax.numpy as jnp

from actorq.quantization import ops


def fake_quant_params(params, bits: int = 8, per_channel: bool = True,
                      symmetric: bool = True, skip: Sequence[str] = ()):
  """Fake-quantizes every layer's `"w"` (channel axis = last), except layers in `skip`.

  Args:
    params: `{layer: {"w": float[..., C], "b": float[C]}}` (any mapping).
  Returns:
    a dict tree of the same structure, float32 weights on the int grid.
  """
  bits = ops.check_bits(bits)
  out = {}
  for name, p in params.items():
    p = dict(p)
    if name not in skip:
      w = p["w"]
      axis = jnp.ndim(w) - 1 if per_channel else None
      p["w"] = ops.fake_quant_tensor(w, bits, symmetric, axis)
    out[name] = p
  return out


def fake_quant_activation(x: jnp.ndarray, bits: int = 8,
                          x_min: Optional[jnp.ndarray] = None,
                          x_max: Optional[jnp.ndarray] = None,
                          symmetric: bool = False) -> jnp.ndarray:
  """Fake-quantizes an activation per tensor (affine by default).

  With `x_min/x_max` (e.g. from `calibration`) the range is fixed and values outside
  saturate with zero gradient; otherwise the batch min-max is used (stop-gradient).
  """
  if x_min is None or x_max is None:
    return ops.fake_quant_tensor(x, bits, symmetric, None)
  scale, zp = ops.compute_qparams(jax.lax.stop_gradient(x_min),
                                  jax.lax.stop_gradient(x_max), bits, symmetric)
  return ops.fake_quant(x, scale, zp, bits, symmetric)


def qat_apply(apply_fn: Callable, bits: int = 8, per_channel: bool = True,
              symmetric: bool = True) -> Callable:
  """Wraps `apply_fn(params, *args)` so its params are fake-quantized first."""

  def wrapped(params, *args, **kwargs):
    return apply_fn(fake_quant_params(params, bits, per_channel, symmetric), *args, **kwargs)

  return wrapped
