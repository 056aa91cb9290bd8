"""The int8 actor's arithmetic in JAX, for policies that run inside a jitted program
(`--launch anakin`): an exact emulation, computed in float32, of what the LiteRT
dynamic-range int8 runtime (`runtimes.litert_runtime.LiteRTInt8Runtime`) computes.

Why emulated: XLA on CPU has no fast int8 matrix path (its oneDNN rewriter takes F32,
BF16 and F16 dots only), and LiteRT cannot run inside an XLA program. So the compiled
actors compute the same integers in float32: for accuracy and int8-vs-fp32 parity
studies, not for int8 speed. Everywhere else the LiteRT runtime stays the real int8 actor.

The three steps, each mirroring its numpy/LiteRT counterpart:

1. `quantize_params` = `payload.make_payload(params, spec, "int8", v)`: per-channel
   symmetric int8 weights over the output axis, scale_c = max(max|w_c| * fl32(1/127),
   tiny) (1 for an all-zero channel), q = clip(round_half_even(w / scale), -127, 127);
   float32 biases (Jacob et al. 2018, sec. 2; bit-identical to the numpy payload, tested).
2. `correct_biases` = `bias_correction.corrected_biases` on calibration observations
   (Nagel et al. 2019, sec. 4.2, empirical form): b_l <- b_l - mean[x_q W_q + b - (x W + b)].
3. `forward`: per layer, each batch row of the layer's input is quantized asymmetrically
   to int8 exactly as XNNPACK does it (`quantize_rows`: range widened to contain 0,
   multiplier 255 / (max - min), nudged zero point, round half to even), then
   y = (sum_k (q_k - z) W_q[k, c]) * s_row * s_w,c + b_c and the activation: XNNPACK's
   qd8-f32-qc8w kernels (LiteRT 2.3 with `asymmetric_quantize_inputs`), in their order of
   float operations. The integer sum is exact in float32 while |sum| < 2^24, i.e. for
   fan-ins up to ~500 at worst and far beyond for real activations. `spec.input_scale` is
   folded into the first layer's weight scales, as the LiteRT model folds it (its input is
   the raw observation). Measured: bit-identical outputs to LiteRT on 10,000 states of a
   ReLU MLP (the test allows one output quantization step, for kernels that fuse the
   multiply-add or evaluate tanh differently).

The emulation test (tests/quantization/test_emulation.py) runs one payload through this
and through LiteRT on 10,000 states: identical greedy actions, outputs within one output
quantization step.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Mapping

import jax
import jax.numpy as jnp
import numpy as np

from actorq.quantization import network_spec as ns
from actorq.quantization import ops

_ACT = {"relu": jax.nn.relu, "tanh": jnp.tanh, "none": lambda x: x}
QMAX = 127  # symmetric narrow-range int8 weights
TINY = np.float32(np.finfo(np.float32).tiny)

Layers = Dict[str, Dict[str, jnp.ndarray]]  # {layer: {"w": int8, "scale": f32 [C], "b": f32}}


def quantize_params(params: Mapping[str, Mapping[str, Any]], spec: ns.NetworkSpec) -> Layers:
  """`{layer: {"w": int8, "scale": float32 [C], "b": float32 [C]}}` of float32 `params`:
  the arrays of `payload.make_payload(params, spec, "int8", v)` (per-channel), in JAX."""
  out = {}
  for layer in spec.parameter_layers:
    w = jnp.asarray(params[layer.name]["w"], jnp.float32)
    amax = jnp.max(jnp.abs(w), axis=tuple(range(w.ndim - 1)))
    scale = jnp.where(amax > 0, jnp.maximum(amax * ops.inverse_steps(QMAX), TINY),
                      jnp.float32(1.0))
    q = jnp.clip(jnp.round(w / scale), -QMAX, QMAX).astype(jnp.int8)
    out[layer.name] = {"w": q, "scale": scale.astype(jnp.float32),
                       "b": jnp.asarray(params[layer.name]["b"], jnp.float32)}
  return out


def dequantize(layers: Layers) -> Dict[str, Dict[str, jnp.ndarray]]:
  """float32 `{layer: {"w": scale * q, "b"}}` (`payload.dequantize_payload`)."""
  return {name: {"w": l["w"].astype(jnp.float32) * l["scale"], "b": l["b"]}
          for name, l in layers.items()}


def _linear(layer, x, w, b):
  """`x w + b` of a Dense layer, or its VALID strided convolution plus b (NHWC, HWIO):
  the default `linear` of `forward` and `correct_biases`."""
  if isinstance(layer, ns.Dense):
    return x @ w + b
  return jax.lax.conv_general_dilated(x, w, (layer.stride, layer.stride), "VALID",
                                      dimension_numbers=("NHWC", "HWIO", "NHWC")) + b


def correct_biases(params: Mapping[str, Mapping[str, Any]], layers: Layers,
                   spec: ns.NetworkSpec, observations: jnp.ndarray,
                   linear: Callable = _linear) -> Layers:
  """`layers` with every bias replaced by `bias_correction.corrected_biases(params,
  dequantize(layers), spec, observations)` (raw observations [N, *input_shape]);
  `linear(layer, x, w, b)` computes a layer's pre-activation (`_linear`'s values; the
  compiled launch passes its im2col layers, `components.anakin.layers.pre_activation`)."""
  quantized = dequantize(layers)
  x = jnp.asarray(observations, jnp.float32) * jnp.float32(spec.input_scale)
  x_q = x
  out = {}
  for layer in spec.layers:
    if isinstance(layer, ns.Flatten):
      x, x_q = x.reshape(x.shape[0], -1), x_q.reshape(x_q.shape[0], -1)
      continue
    w = jnp.asarray(params[layer.name]["w"], jnp.float32)
    b = jnp.asarray(params[layer.name]["b"], jnp.float32)
    y = linear(layer, x, w, b)
    y_q = linear(layer, x_q, quantized[layer.name]["w"], quantized[layer.name]["b"])
    shift = (y_q - y).reshape(-1, y.shape[-1]).mean(axis=0)
    out[layer.name] = dict(layers[layer.name], b=(layers[layer.name]["b"] - shift))
    x = _ACT[layer.activation](y)
    x_q = _ACT[layer.activation](y_q - shift)
  return out


def quantize_rows(x: jnp.ndarray):
  """Per-row asymmetric int8 quantization of `x` [B, ...], XNNPACK's dynamic activation
  quantization (`xnn_f32_qd8_asymmetric_quantization_params` and the f32-qs8 convert
  kernel, float32 throughout, in its order of operations):

    lo, hi = min(row min, 0), max(row max, 0);  m = 255 / (hi - lo)  (1 if hi == lo)
    z = rint(clip(lo*m - 128 + hi*m + 127 > 0 ? -128 - lo*m : 127 - hi*m, -128, 127))
    s = 1 / m  (the dequantization scale);  q = clip(rint(x * (1 / s)) + z, -128, 127)

  Returns:
    `(q - z` as float32 integers of x's shape, `s` float32 [B]).
  """
  rows = x.reshape(x.shape[0], -1)
  lo = jnp.minimum(rows.min(axis=1), 0.0)
  hi = jnp.maximum(rows.max(axis=1), 0.0)
  m = jnp.where(lo == hi, jnp.float32(1.0), jnp.float32(255.0) / (hi - lo))
  low, high = lo * m, hi * m
  z = jnp.where((-128.0 + low) + (127.0 + high) > 0, -128.0 - low, 127.0 - high)
  z = jnp.round(jnp.clip(z, -128.0, 127.0))
  s = jnp.float32(1.0) / m
  shape = (-1,) + (1,) * (x.ndim - 1)
  q = jnp.clip(jnp.round(x * (jnp.float32(1.0) / s).reshape(shape)) + z.reshape(shape),
               -128.0, 127.0)
  return q - z.reshape(shape), s


def _layer(layers: Layers, spec: ns.NetworkSpec, layer, x: jnp.ndarray, first: bool,
           float_layers: frozenset, linear: Callable = _linear):
  """One Dense/Conv2D layer of `forward`: `(output, s [B] of its input rows or None)`."""
  l = layers[layer.name]
  input_scale = jnp.float32(spec.input_scale) if first else jnp.float32(1.0)
  if layer.name in float_layers:
    y = linear(layer, x * input_scale, l["w"].astype(jnp.float32) * l["scale"], l["b"])
    return _ACT[layer.activation](y), None
  q, s = quantize_rows(x)
  acc = linear(layer, q, l["w"].astype(jnp.float32), 0.0)
  # XNNPACK's order: float(sum) * s_row, then * s_w,c, then + b.
  y = (acc * s.reshape((-1,) + (1,) * (acc.ndim - 1))) * (l["scale"] * input_scale) + l["b"]
  return _ACT[layer.activation](y), s


def forward(layers: Layers, spec: ns.NetworkSpec, observation: jnp.ndarray,
            float_layers: frozenset = frozenset(), linear: Callable = _linear) -> jnp.ndarray:
  """float32 `[B, spec.output_size]`: what `LiteRTInt8Runtime` outputs for raw
  observations `[B, *spec.input_shape]` with the payload `layers` (see the module
  docstring, step 3). `float_layers`: names computed in float32 without activation
  quantization (none by default). `linear(layer, x, w, b)`: a layer's product plus bias
  (`_linear`'s values; the integer sums are exact in float32 in any order, so another
  `linear`, e.g. the compiled launch's im2col convolution, gives the same integers)."""
  x = jnp.asarray(observation, jnp.float32)
  first = True
  for layer in spec.layers:
    if isinstance(layer, ns.Flatten):
      x = x.reshape(x.shape[0], -1)
      continue
    x, _ = _layer(layers, spec, layer, x, first, float_layers, linear)
    first = False
  return x.astype(jnp.float32)


def output_step(layers: Layers, spec: ns.NetworkSpec, observation: jnp.ndarray) -> jnp.ndarray:
  """float32 `[B, output_size]`: one quantization step of each output, s_row * s_w,c of
  the last layer (the value of one unit of its integer sum), for `observation`."""
  x = jnp.asarray(observation, jnp.float32)
  first, s = True, None
  for layer in spec.layers:
    if isinstance(layer, ns.Flatten):
      x = x.reshape(x.shape[0], -1)
      continue
    scale = layers[layer.name]["scale"] * (jnp.float32(spec.input_scale) if first else 1.0)
    x, s = _layer(layers, spec, layer, x, first, frozenset())
    first = False
  return s[:, None] * scale[None, :]
