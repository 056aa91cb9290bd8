"""What a learner ships to actors: a `Payload` made ONCE per parameter version.

`make_payload(params, spec, precision, version)` validates the params tree against
the `NetworkSpec` and encodes it for the actors' policy runtime:

| precision | per layer arrays | bytes vs fp32 |
|---|---|---|
| "fp32" | w float32, b float32 | 1.0 |
| "fp16" / "bf16" | w, b float16 / bfloat16 | 0.5 |
| "int8", "simulated-int8" | w int8 (symmetric, per-channel over the output axis or per-tensor), scale float32 [C] or [], b float32 | ~0.25 |

int8 weights are symmetric (zero-point 0, range [-127, 127]) because that is what
the LiteRT/XNNPACK dynamic-range kernels execute (they take no weight zero-point),
so no zero-points are shipped. Per-channel is the default: LiteRT 2.3 executes
per-channel int8 weights for FULLY_CONNECTED and CONV_2D (checked by the runtime
parity tests). "simulated-int8" carries the same arrays as "int8" and labels a
payload meant for the accuracy-only JAX runtime.
"""
from __future__ import annotations

import dataclasses
from typing import Dict, Tuple

import jax
import jax.numpy as jnp
import numpy as np

from actorq import core
from actorq.quantization import network_spec as ns
from actorq.quantization import ops
from actorq.quantization import ptq

INT8_PRECISIONS = core.INT8_PRECISIONS
_FLOAT_DTYPES = {"fp32": np.float32, "fp16": np.float16, "bf16": jnp.bfloat16}
# What `make_payload` encodes itself; other rows of the runtimes' table (litert-fp32)
# have encoders of their own (`runtimes.make_payload` goes through the table).
PRECISIONS = tuple(p for p in core.PRECISIONS if p in _FLOAT_DTYPES or p in INT8_PRECISIONS)


@dataclasses.dataclass
class Payload:
  """Encoded parameters of one version.

  Attributes:
    precision: one of `PRECISIONS`.
    version: the learner's parameter version (int >= 0).
    layers: `{layer: {"w": ..., "b": ...[, "scale": float32]}}` numpy arrays; `w` in
      the params layout (Dense `[in, units]`, Conv HWIO).
    per_channel: for int8, whether `scale` is `[units]` (else `[]`).
  """
  precision: str
  version: int
  layers: Dict[str, Dict[str, np.ndarray]]
  per_channel: bool = True

  @property
  def nbytes(self) -> int:
    """Bytes of all arrays shipped (weights, scales, biases)."""
    return int(sum(a.nbytes for l in self.layers.values() for a in l.values()))


jax.tree_util.register_pytree_node(
    Payload,
    lambda p: ((p.layers,), (p.precision, p.version, p.per_channel)),
    lambda aux, ch: Payload(aux[0], aux[1], ch[0], aux[2]))


def expected_shapes(spec: ns.NetworkSpec) -> Dict[str, Dict[str, Tuple[int, ...]]]:
  """`{layer: {"w": shape, "b": (units,)}}` implied by the spec (VALID convs); for a
  `RecurrentSpec`, the torso's, the LSTM matmul's (`[F + H, 4H]`) and the head's."""
  if isinstance(spec, ns.RecurrentSpec):
    gates = expected_shapes(spec.gates)[spec.GATES_LAYER]
    return {**expected_shapes(spec.torso), spec.LSTM_LAYER: gates, **expected_shapes(spec.head)}
  shape = tuple(spec.input_shape)
  out = {}
  for layer in spec.layers:
    if isinstance(layer, ns.Flatten):
      shape = (int(np.prod(shape)),)
    elif isinstance(layer, ns.Dense):
      if len(shape) != 1:
        raise ValueError(f"layer {layer.name!r}: Dense needs a flat input, got feature "
                         f"shape {shape}; add a Flatten before it")
      out[layer.name] = {"w": (shape[0], layer.units), "b": (layer.units,)}
      shape = (layer.units,)
    else:
      if len(shape) != 3:
        raise ValueError(f"layer {layer.name!r}: Conv2D needs [H, W, C] input, got {shape}")
      h, w, c = shape
      oh, ow = (h - layer.kernel) // layer.stride + 1, (w - layer.kernel) // layer.stride + 1
      if oh < 1 or ow < 1:
        raise ValueError(f"layer {layer.name!r}: input {shape} smaller than kernel {layer.kernel}")
      out[layer.name] = {"w": (layer.kernel, layer.kernel, c, layer.channels),
                         "b": (layer.channels,)}
      shape = (oh, ow, layer.channels)
  return out


def validate_params(params, spec: ns.NetworkSpec,
                    check_finite: bool = True) -> Dict[str, Dict[str, np.ndarray]]:
  """float32 numpy arrays of `params` after checking names, shapes and finiteness
  (`check_finite=False` skips the NaN/inf scan of weights, for callers that detect
  it themselves, like int8 quantization through the weights' min/max).

  Raises:
    ValueError naming the layer (missing/extra layer, wrong shape, NaN/inf).
  """
  shapes = expected_shapes(spec)
  missing = [n for n in shapes if n not in params]
  extra = [n for n in params if n not in shapes]
  if missing or extra:
    raise ValueError(f"params do not match the spec: missing layers {missing}, "
                     f"unexpected layers {extra}; expected {list(shapes)}")
  out = {}
  for name, want in shapes.items():
    layer = {}
    for key, shape in want.items():
      if key not in params[name]:
        raise ValueError(f"layer {name!r}: missing {key!r}")
      arr = np.asarray(params[name][key], np.float32)
      if arr.shape != shape:
        raise ValueError(f"layer {name!r}: {key!r} has shape {arr.shape}, the spec "
                         f"needs {shape}")
      if check_finite or key == "b":
        ops.check_tensor(arr, f"layer {name!r} {key!r}")
      layer[key] = arr
    out[name] = layer
  return out


def _cast(x: np.ndarray, dtype, where: str, precision: str) -> np.ndarray:
  """`x` cast to `dtype`; a finite value that overflows the narrower type (|x| > 65504
  for fp16) is an error, never a silent inf on the actors.

  Raises:
    ValueError: naming the layer, the count and the largest magnitude.
  """
  out = x.astype(dtype)
  bad = ~np.isfinite(out.astype(np.float32))
  if bad.any():
    raise ValueError(f"{where}: {int(bad.sum())} of {x.size} values overflow {precision} "
                     f"(largest |value| {float(np.max(np.abs(x))):.4g}, the largest {precision} "
                     f"value is {float(np.finfo(dtype).max):.4g}); keep this layer in fp32 or "
                     "scale its weights down")
  return out


def make_payload(params, spec: ns.NetworkSpec, precision: str, version: int,
                 per_channel: bool = True) -> Payload:
  """Encodes `params` (learner side, once per version) for runtimes of `precision`.

  Args:
    params: `{layer: {"w", "b"}}` float arrays (numpy, jax or Haiku mapping).
    spec: the architecture the params must match.
    precision: one of "fp32", "fp16", "bf16", "int8", "simulated-int8".
    version: learner parameter version.
    per_channel: int8 only; one scale per output channel (default) or per tensor.

  Raises:
    ValueError for an unknown precision or params that do not match the spec
    (naming the layer), NaN/inf weights, or weights that overflow fp16.
  """
  if precision not in PRECISIONS:
    raise ValueError(f"precision {precision!r} unknown; allowed: {PRECISIONS}")
  arrays = validate_params(params, spec, check_finite=precision not in INT8_PRECISIONS)
  layers = {}
  if precision in INT8_PRECISIONS:
    policy = ptq.QuantPolicy(ptq.LayerPolicy(8, per_channel, True, False))
    qp = ptq.quantize_params(arrays, policy, version)
    for name, ql in qp.layers.items():
      layers[name] = {"w": ql.w_q, "scale": ql.scale, "b": ql.b}
  else:
    dt = _FLOAT_DTYPES[precision]
    for name, p in arrays.items():
      layers[name] = {key: _cast(p[key], dt, f"layer {name!r} {key!r}", precision)
                      for key in ("w", "b")}
  return Payload(precision, int(version), layers, bool(per_channel))


def dequantize_payload(payload: Payload) -> Dict[str, Dict[str, np.ndarray]]:
  """float32 `{layer: {"w", "b"}}` the payload stands for (int8: `scale * w`)."""
  out = {}
  for name, l in payload.layers.items():
    if "scale" in l:
      axis = l["w"].ndim - 1 if np.ndim(l["scale"]) == 1 else None
      w = ptq.dequantize_array(l["w"], l["scale"], np.zeros_like(l["scale"], np.int32), axis)
    else:
      w = np.asarray(l["w"], np.float32)
    out[name] = {"w": w, "b": np.asarray(l["b"], np.float32)}
  return out


def check_payload(payload: Payload, spec: ns.NetworkSpec, accepted: Tuple[str, ...]):
  """Raises ValueError if the payload's precision is not `accepted` or its layers
  do not match `spec` (naming the first mismatching layer)."""
  if not isinstance(payload, Payload):
    raise ValueError(f"expected a Payload, got {type(payload).__name__}")
  if payload.precision not in accepted:
    raise ValueError(f"payload precision {payload.precision!r} cannot be loaded here; "
                     f"allowed: {accepted}")
  shapes = expected_shapes(spec)
  missing = [n for n in shapes if n not in payload.layers]
  extra = [n for n in payload.layers if n not in shapes]
  if missing or extra:
    raise ValueError(f"payload does not match the network: missing layers {missing}, "
                     f"unexpected layers {extra}; expected {list(shapes)}")
  for name, want in shapes.items():
    l = payload.layers[name]
    for key, shape in want.items():
      if key not in l:
        raise ValueError(f"layer {name!r}: payload lacks {key!r}")
      if tuple(np.shape(l[key])) != shape:
        raise ValueError(f"layer {name!r}: payload {key!r} has shape "
                         f"{tuple(np.shape(l[key]))}, the network needs {shape}")
    if payload.precision in INT8_PRECISIONS:
      s = np.shape(l.get("scale", None))
      if "scale" not in l or s not in ((), (want["b"][0],)):
        raise ValueError(f"layer {name!r}: int8 payload needs 'scale' of shape () or "
                         f"{want['b']}, got {s}")
      if np.asarray(l["w"]).dtype != np.int8:
        raise ValueError(f"layer {name!r}: int8 payload weights have dtype "
                         f"{np.asarray(l['w']).dtype}; allowed: int8")
