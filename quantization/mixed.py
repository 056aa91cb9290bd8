"""Per-layer precision policies: what each layer's weights become, how many bytes they
would be stored in, and the file a search writes and a runtime reads.

A `LayerChoice` is one of

* ``fp32`` / ``fp16`` / ``bf16``: the weights (and biases) cast to that float type;
* ``int<b>`` for b in 2..8: symmetric b-bit weights with min-max scales, one per output
  channel (``per-channel``, the default) or one per tensor (``per-tensor``), float32
  biases. The quantizer is `ptq.quantize_array`, the one `make_payload` and QAT's
  `qat.fake_quant_params` use: ``s = max|w_c| / (2^(b-1) - 1)``,
  ``q = clip(round_half_even(w / s), -(2^(b-1) - 1), 2^(b-1) - 1)``, ``w_hat = s q``
  (Jacob et al. 2018, eq. 1-2 with zero-point 0);

each optionally magnitude-pruned first: the ``round(sparsity * n)`` smallest-|w| weights
of the layer are set to 0 (one-shot, layer-wise; the magnitude criterion of Han et al.
2015, "Learning both Weights and Connections for Efficient Neural Networks", without
their retraining), then quantized (prune-then-quantize, the order of Han et al. 2016,
"Deep Compression"). Zero stays exactly 0 under symmetric quantization. Labels:
``int4``, ``int4/tensor``, ``fp16``, ``int8+p0.9`` (`LayerChoice.label`, `parse_choice`).

Stored bytes (`CompressedLayer.storage`), per layer, of the format a file or a transfer
would use; ``n`` weights, ``nnz`` of them non-zero after compression, ``v`` bits per
value (b, 16 or 32):

* ``dense``:   ``ceil(n v / 8)``: values bit-packed back to back in row-major order (a
  3-bit layer of 10 weights takes 4 bytes);
* ``bitmask``: ``ceil(n / 8) + ceil(nnz v / 8)``: one presence bit per weight, then the
  non-zero values packed;

a pruned layer (sparsity > 0) takes whichever of the two is smaller (its mask pays for
itself at 8 bits and sparsity 0.9: ``n/8 + 0.1 n = 0.225 n`` bytes instead of ``n``; at
2 bits and sparsity 0.5 it does not), an unpruned layer is dense (zeros that rounding
made are not worth a mask at these widths); plus float32 scales (4 bytes per channel,
or 4 per tensor) for integer layers and the biases (4 bytes each; 2 for fp16/bf16
layers). The runtimes do not hold this format: LiteRT holds integer weights of any width
in int8 (1 byte each), the JAX runtimes hold float arrays; `CompressedLayer.runtime_bytes`
counts that.

`PrecisionPolicy` is one choice per parameter layer of a `NetworkSpec`; its JSON file
(`to_json_dict`, `load`) is described in `docs/precision_policy.md`. `make_payload`
encodes params under a policy for `runtimes.LiteRTMixedRuntime` (integer layers int8 with
scales, float layers float32 weights rounded to their float type).
"""
from __future__ import annotations

import dataclasses
import json
import math
import re
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple

import jax.numpy as jnp
import numpy as np

from actorq.components.atomic import atomic_write
from actorq.quantization import network_spec as ns
from actorq.quantization import ops
from actorq.quantization import payload as pl
from actorq.quantization import pruning
from actorq.quantization import ptq

FLOAT_KINDS = ("fp32", "fp16", "bf16")
INT = "int"
KINDS = FLOAT_KINDS + (INT,)
PER_CHANNEL, PER_TENSOR = "per-channel", "per-tensor"
GRANULARITIES = (PER_CHANNEL, PER_TENSOR)
MIXED = "mixed"  # the payload / runtime precision of a per-layer policy
FORMAT = "actorq.precision_policy"
FORMAT_VERSION = 1
_FLOAT_BITS = {"fp32": 32, "fp16": 16, "bf16": 16}
_FLOAT_DTYPES = {"fp32": np.float32, "fp16": np.float16, "bf16": jnp.bfloat16}


@dataclasses.dataclass(frozen=True)
class LayerChoice:
  """How one layer's weights are stored and executed.

  Attributes:
    kind: "fp32", "fp16", "bf16" or "int".
    bits: 2..8 for "int" (ignored and normalised to 32/16/16 for float kinds).
    per_channel: integer layers: one scale per output channel (else per tensor).
    sparsity: fraction of the layer's weights pruned by magnitude first, in [0, 1).

  Raises:
    ValueError: an unknown kind, bits outside 2..8 for "int", sparsity outside [0, 1).
  """
  kind: str = "fp32"
  bits: int = 32
  per_channel: bool = True
  sparsity: float = 0.0

  def __post_init__(self):
    if self.kind not in KINDS:
      raise ValueError(f"layer choice kind {self.kind!r} unknown; allowed: {', '.join(KINDS)}")
    if self.kind == INT:
      ops.check_bits(self.bits, "layer choice")
    else:
      object.__setattr__(self, "bits", _FLOAT_BITS[self.kind])
      object.__setattr__(self, "per_channel", True)
    s = float(self.sparsity)
    if not 0.0 <= s < 1.0:
      raise ValueError(f"sparsity={self.sparsity} not allowed; allowed: 0 <= sparsity < 1")
    object.__setattr__(self, "sparsity", s)
    object.__setattr__(self, "bits", int(self.bits))
    object.__setattr__(self, "per_channel", bool(self.per_channel))

  @property
  def is_float(self) -> bool:
    return self.kind in FLOAT_KINDS

  @property
  def granularity(self) -> str:
    return PER_CHANNEL if self.per_channel else PER_TENSOR

  @property
  def label(self) -> str:
    """``fp32``, ``fp16``, ``int4``, ``int4/tensor``, ``int8+p0.9`` (see `parse_choice`)."""
    text = self.kind if self.is_float else f"int{self.bits}"
    if not self.is_float and not self.per_channel:
      text += "/tensor"
    if self.sparsity > 0:
      text += f"+p{self.sparsity:g}"
    return text


_LABEL = re.compile(r"^(fp32|fp16|bf16|int([2-8]))(/(tensor|channel))?(\+p([0-9.]+))?$")


def parse_choice(text: str) -> LayerChoice:
  """The `LayerChoice` of a label: ``fp32``, ``fp16``, ``bf16``, ``int<2..8>``, optionally
  ``/tensor`` (per-tensor scale; ``/channel`` is the default) and ``+p<sparsity>``.

  Raises:
    ValueError: one line naming the text and the allowed forms.
  """
  m = _LABEL.match(str(text).strip())
  if not m:
    raise ValueError(f"precision choice {text!r} not understood; allowed: fp32, fp16, bf16, "
                     "int2..int8, optionally /tensor and +p<sparsity>, e.g. int4/tensor+p0.5")
  kind = INT if m.group(2) else m.group(1)
  bits = int(m.group(2)) if m.group(2) else 32
  try:
    sparsity = float(m.group(6)) if m.group(6) else 0.0
  except ValueError:
    raise ValueError(f"precision choice {text!r}: sparsity {m.group(6)!r} is not a number") \
        from None
  return LayerChoice(kind, bits, m.group(4) != "tensor", sparsity)


@dataclasses.dataclass
class CompressedLayer:
  """One layer after pruning and quantization or a float cast.

  Attributes:
    choice: the `LayerChoice`.
    values: int8 `w.shape` (integer choices; values in [-(2^(b-1)-1), 2^(b-1)-1]) or the
      float weights in their float type (float16, bfloat16 or float32).
    scale: float32 `[C]` or `[]` (integer choices) or None.
    b: biases, float32 (float16/bfloat16 for those kinds).
  """
  choice: LayerChoice
  values: np.ndarray
  scale: Optional[np.ndarray]
  b: np.ndarray

  @property
  def num_weights(self) -> int:
    return int(self.values.size)

  @property
  def nonzero_weights(self) -> int:
    return int(np.count_nonzero(self.values))

  def dequantized(self) -> np.ndarray:
    """float32 weights this layer stands for (what a simulated runtime multiplies by)."""
    if self.scale is None:
      return np.asarray(self.values, np.float32)
    axis = self.values.ndim - 1 if np.ndim(self.scale) == 1 else None
    return ptq.dequantize_array(self.values, self.scale, np.zeros_like(self.scale, np.int32),
                                axis)

  @property
  def storage(self) -> Dict[str, Any]:
    """`{"format": "dense" | "bitmask", "weight_bytes", "scale_bytes", "bias_bytes",
    "bytes"}`: the stored size (see the module docstring)."""
    n, nnz, v = self.num_weights, self.nonzero_weights, self.choice.bits
    dense = math.ceil(n * v / 8)
    bitmask = math.ceil(n / 8) + math.ceil(nnz * v / 8)
    if self.choice.sparsity > 0 and bitmask < dense:
      fmt, wbytes = "bitmask", bitmask
    else:
      fmt, wbytes = "dense", dense
    sbytes = 0 if self.scale is None else int(np.asarray(self.scale).size) * 4
    bbytes = int(self.b.size) * (2 if self.choice.kind in ("fp16", "bf16") else 4)
    return {"format": fmt, "weight_bytes": wbytes, "scale_bytes": sbytes, "bias_bytes": bbytes,
            "bytes": wbytes + sbytes + bbytes}

  @property
  def runtime_bytes(self) -> int:
    """Bytes a runtime holds: int8 (1 byte per integer weight, any width), float weights
    in their float type, scales and biases as stored."""
    w = self.values.size * (1 if self.scale is not None else self.values.dtype.itemsize)
    s = 0 if self.scale is None else int(np.asarray(self.scale).size) * 4
    return int(w + s + self.b.nbytes)


def compress_layer(w, b, choice: LayerChoice, name: Optional[str] = None) -> CompressedLayer:
  """Prunes (magnitude, layer-wise) then quantizes or casts one layer.

  Args:
    w: float weights `[in, units]` (Dense) or HWIO (Conv); the channel axis is the last.
    b: float biases `[units]`.
    choice: the `LayerChoice`.
    name: the layer's name, for error messages.

  Raises:
    ValueError: (naming the layer) empty or non-finite weights or biases.
  """
  where = f"layer {name!r}" if name else "layer"
  w = np.asarray(w, np.float32)
  b = np.asarray(b, np.float32)
  ops.check_tensor(w, f"{where} weights")
  ops.check_tensor(b, f"{where} bias")
  if choice.sparsity > 0:
    w = w * pruning.magnitude_masks({"w": {"w": w}}, choice.sparsity)["w"]["w"]
  if choice.is_float:
    dtype = _FLOAT_DTYPES[choice.kind]
    return CompressedLayer(choice, w.astype(dtype), None, b.astype(dtype))
  axis = w.ndim - 1 if choice.per_channel else None
  q, scale, _ = ptq.quantize_array(w, choice.bits, True, axis, where)
  return CompressedLayer(choice, q, scale, b)


@dataclasses.dataclass(frozen=True)
class PrecisionPolicy:
  """One `LayerChoice` per parameter layer, in the network's order.

  Attributes:
    layers: `((layer_name, LayerChoice), ...)`.
  """
  layers: Tuple[Tuple[str, LayerChoice], ...]

  def __post_init__(self):
    names = [n for n, _ in self.layers]
    if len(set(names)) != len(names):
      raise ValueError(f"precision policy names a layer twice: {names}")
    for _, c in self.layers:
      if not isinstance(c, LayerChoice):
        raise ValueError(f"precision policy entries must be LayerChoice, got {c!r}")

  @classmethod
  def uniform(cls, spec: ns.NetworkSpec, choice: LayerChoice) -> "PrecisionPolicy":
    """The same choice for every parameter layer of `spec`."""
    return cls(tuple((l.name, choice) for l in spec.parameter_layers))

  @property
  def names(self) -> Tuple[str, ...]:
    return tuple(n for n, _ in self.layers)

  @property
  def choices(self) -> Tuple[LayerChoice, ...]:
    return tuple(c for _, c in self.layers)

  def choice(self, name: str) -> LayerChoice:
    for n, c in self.layers:
      if n == name:
        return c
    raise KeyError(name)

  def replace(self, name: str, choice: LayerChoice) -> "PrecisionPolicy":
    """A copy with layer `name` set to `choice`."""
    if name not in self.names:
      raise KeyError(name)
    return PrecisionPolicy(tuple((n, choice if n == name else c) for n, c in self.layers))

  @property
  def float_layers(self) -> Tuple[str, ...]:
    """Layers executed with float kernels (fp32/fp16/bf16 choices)."""
    return tuple(n for n, c in self.layers if c.is_float)

  @property
  def label(self) -> str:
    """The uniform choice's label, or the per-layer labels joined by ``,``."""
    labels = [c.label for c in self.choices]
    return labels[0] if len(set(labels)) == 1 else ",".join(labels)

  def check_against(self, spec: ns.NetworkSpec) -> None:
    """Raises ValueError unless the policy names exactly `spec`'s parameter layers, in
    order."""
    want = tuple(l.name for l in spec.parameter_layers)
    if self.names != want:
      raise ValueError(f"precision policy layers {list(self.names)} do not match the "
                       f"network's parameter layers {list(want)}")


def compress(params, spec: ns.NetworkSpec,
             policy: PrecisionPolicy) -> Dict[str, CompressedLayer]:
  """Every layer of `params` (`{layer: {"w", "b"}}` matching `spec`) under `policy`.

  Raises:
    ValueError: params that do not match the spec (naming the layer), a policy for other
      layers, non-finite weights.
  """
  policy.check_against(spec)
  arrays = pl.validate_params(params, spec)
  return {n: compress_layer(arrays[n]["w"], arrays[n]["b"], c, n) for n, c in policy.layers}


def simulated_params(layers: Mapping[str, CompressedLayer]) -> Dict[str, Dict[str, np.ndarray]]:
  """float32 `{layer: {"w", "b"}}` the compressed layers stand for: what a simulated
  runtime (dequantize, fp32 kernels) executes."""
  return {n: {"w": l.dequantized(), "b": np.asarray(l.b, np.float32)} for n, l in layers.items()}


def storage_report(layers: Mapping[str, CompressedLayer]) -> Dict[str, Any]:
  """`{"layers": {name: storage + "choice", "nonzero", "weights"}, "bytes",
  "runtime_bytes", "fp32_bytes"}` (see the module docstring for the formats)."""
  out, total, runtime, fp32 = {}, 0, 0, 0
  for n, l in layers.items():
    st = dict(l.storage, choice=l.choice.label, weights=l.num_weights, nonzero=l.nonzero_weights)
    out[n] = st
    total += st["bytes"]
    runtime += l.runtime_bytes
    fp32 += 4 * (l.num_weights + int(l.b.size))
  return {"layers": out, "bytes": total, "runtime_bytes": runtime, "fp32_bytes": fp32}


class LayerCache:
  """`compress_layer` results of one params tree, kept per (layer, choice): a search that
  scores many policies compresses (prunes, quantizes) each layer choice once.

  Args:
    params: `{layer: {"w", "b"}}` matching `spec` (checked once).
    spec: the network.
  """

  def __init__(self, params, spec: ns.NetworkSpec):
    self.spec = spec
    self._arrays = pl.validate_params(params, spec)
    self._cache: Dict[Tuple[str, LayerChoice], CompressedLayer] = {}

  def layer(self, name: str, choice: LayerChoice) -> CompressedLayer:
    key = (name, choice)
    if key not in self._cache:
      a = self._arrays[name]
      self._cache[key] = compress_layer(a["w"], a["b"], choice, name)
    return self._cache[key]

  def compress(self, policy: PrecisionPolicy) -> Dict[str, CompressedLayer]:
    """As `compress(params, spec, policy)`."""
    policy.check_against(self.spec)
    return {n: self.layer(n, c) for n, c in policy.layers}


def payload_of(layers: Mapping[str, CompressedLayer], version: int = 0) -> pl.Payload:
  """The ``"mixed"`` payload of compressed layers (see `make_payload`)."""
  out = {}
  for name, l in layers.items():
    if l.scale is None:
      out[name] = {"w": np.asarray(l.values, np.float32), "b": np.asarray(l.b, np.float32)}
    else:
      out[name] = {"w": l.values, "scale": l.scale, "b": l.b}
  return pl.Payload(MIXED, int(version), out, True)


def make_payload(params, spec: ns.NetworkSpec, policy: PrecisionPolicy,
                 version: int = 0) -> pl.Payload:
  """Params encoded for `runtimes.LiteRTMixedRuntime` (precision ``"mixed"``).

  Integer layers: `{"w": int8, "scale": float32 [C] or [], "b": float32}` (any width held
  in int8); float layers: `{"w": float32, "b": float32}` holding the values rounded to the
  layer's float type (LiteRT executes fp16/bf16 weights with float32 kernels, as its own
  fp16 models do on CPUs: a DEQUANTIZE at load, float32 compute).

  Raises:
    ValueError: as `compress`.
  """
  return payload_of(compress(params, spec, policy), version)


# ----------------------------------------------------------------------------------------
# The policy as an actor precision: "mixed:<label>,<label>,...", the family row "mixed:" of
# the precision table (`actorq.quantization.runtimes.RUNTIMES`).

# A per-layer precision policy as a precision: MIXED_PREFIX + the layers' choice labels
# joined by "," (`precision_name`). The name carries the whole policy, so a learner node in
# another process can publish its payload from the name alone.
MIXED_PREFIX = "mixed:"
MIXED_FORM = "mixed:<choice>,... (one per layer, e.g. mixed:fp16,int8,int8)"
# How a command-line flag taking an actor precision describes the family (after the
# uniform precisions): a policy file or its name.
MIXED_HELP = ("a per-layer precision policy file (precision_policy.json of 'actorq quantize "
              "--search', format in docs/precision_policy.md) or its labels as "
              "mixed:<choice>,... (one per layer, e.g. mixed:fp16,int8,int8; feed-forward "
              "agents only)")


def is_mixed(value) -> bool:
  """True for a per-layer precision name (``"mixed:"`` and at least one label); the
  labels themselves are checked by `parse_precision_name`."""
  return (isinstance(value, str) and value.startswith(MIXED_PREFIX)
          and bool(value[len(MIXED_PREFIX):].strip()))


def precision_name(policy: PrecisionPolicy) -> str:
  """The actor precision that names `policy`: ``"mixed:"`` + every layer's label, in
  order, joined by ``,`` (e.g. ``"mixed:fp16,int4+p0.5,int8,int8"``). `policy_of` reads
  it back for the same network."""
  return MIXED_PREFIX + ",".join(c.label for c in policy.choices)


def parse_precision_name(name: str) -> List[LayerChoice]:
  """The layer choices of a ``"mixed:..."`` precision, in layer order.

  Raises:
    ValueError: one line: not of the ``mixed:<label>,...`` form, or a label
      `parse_choice` refuses (naming it and the allowed forms).
  """
  if not is_mixed(name):
    raise ValueError(f"precision {name!r} is not a per-layer policy; expected "
                     f"{MIXED_FORM}")
  labels = [t.strip() for t in name[len(MIXED_PREFIX):].split(",")]
  if not all(labels):
    raise ValueError(f"precision {name!r} has an empty layer choice; expected "
                     f"{MIXED_FORM}")
  return [parse_choice(t) for t in labels]


def policy_of(name: str, spec: ns.NetworkSpec) -> PrecisionPolicy:
  """The `PrecisionPolicy` a ``"mixed:..."`` precision names for `spec`: its k-th label is
  the k-th parameter layer's choice.

  For a `RecurrentSpec` the parameter layers are the torso's, the LSTM's gate matmul
  (`RecurrentSpec.LSTM_LAYER`, [F + H, 4H]) and the head's, in that order (e.g.
  ``"mixed:int8,int8,fp32"`` for R2D2's default network: int8 torso and gate matmul, fp32
  head); `runtimes.RecurrentRuntime` runs each part under its labels.

  Raises:
    ValueError: as `parse_precision_name`, or a count of labels other than the spec's
      parameter layers (naming both).
  """
  choices = parse_precision_name(name)
  layers = [l.name for l in spec.parameter_layers]
  if len(choices) != len(layers):
    raise ValueError(f"precision {name!r} gives {len(choices)} layer choice(s); the policy "
                     f"network has {len(layers)} parameter layers ({', '.join(layers)})")
  return PrecisionPolicy(tuple(zip(layers, choices)))


# ----------------------------------------------------------------------------------------
# The policy file.


def layer_dict(name: str, choice: LayerChoice) -> Dict[str, Any]:
  """One layer's entry of the policy file."""
  return {"name": name, "choice": choice.label, "weights": choice.kind, "bits": choice.bits,
          "granularity": choice.granularity if not choice.is_float else None,
          "symmetric": True if not choice.is_float else None, "sparsity": choice.sparsity}


def to_json_dict(policy: PrecisionPolicy, spec: ns.NetworkSpec,
                 notes: Optional[Mapping[str, Mapping[str, Any]]] = None,
                 **extra: Any) -> Dict[str, Any]:
  """The policy as the file's JSON object (see `docs/precision_policy.md`).

  Args:
    notes: per layer, extra keys for its entry (e.g. ``{"why": ..., "bytes": ...}``).
    extra: top-level blocks (e.g. ``search=...``, ``measured=...``, ``source=...``).
  """
  policy.check_against(spec)
  shapes = pl.expected_shapes(spec)
  layers = []
  for name, choice in policy.layers:
    entry = layer_dict(name, choice)
    entry["w_shape"] = list(shapes[name]["w"])
    entry.update(dict((notes or {}).get(name, {})))
    layers.append(entry)
  out = {"format": FORMAT, "format_version": FORMAT_VERSION,
         "network": {"input_shape": list(spec.input_shape),
                     "parameter_layers": [l.name for l in spec.parameter_layers]},
         "layers": layers,
         "execution": {"float_layers": list(policy.float_layers),
                       "litert_mixed": True}}
  out.update(extra)
  return out


def from_json_dict(data: Mapping[str, Any], spec: Optional[ns.NetworkSpec] = None
                   ) -> PrecisionPolicy:
  """The `PrecisionPolicy` of a policy file's JSON object, checked against `spec` when
  given (layer names in order and weight shapes).

  Raises:
    ValueError: one line: not a policy file, another format version, a bad layer entry,
      or layers/shapes that do not match `spec`.
  """
  if not isinstance(data, Mapping) or data.get("format") != FORMAT:
    raise ValueError(f"not an actorq precision policy (expected \"format\": \"{FORMAT}\")")
  if data.get("format_version") != FORMAT_VERSION:
    raise ValueError(f"precision policy format_version {data.get('format_version')!r} is not "
                     f"supported; allowed: {FORMAT_VERSION}")
  entries = data.get("layers")
  if not isinstance(entries, list) or not entries:
    raise ValueError("precision policy: \"layers\" must be a non-empty list")
  layers = []
  for i, e in enumerate(entries):
    if not isinstance(e, Mapping) or "name" not in e or "choice" not in e:
      raise ValueError(f"precision policy layer {i}: needs \"name\" and \"choice\"")
    try:
      layers.append((str(e["name"]), parse_choice(e["choice"])))
    except ValueError as err:
      raise ValueError(f"precision policy layer {e['name']!r}: {err}") from None
  policy = PrecisionPolicy(tuple(layers))
  if spec is not None:
    policy.check_against(spec)
    shapes = pl.expected_shapes(spec)
    for e in entries:
      if "w_shape" in e and tuple(e["w_shape"]) != tuple(shapes[e["name"]]["w"]):
        raise ValueError(f"precision policy layer {e['name']!r}: w_shape {list(e['w_shape'])} "
                         f"does not match the network's {list(shapes[e['name']]['w'])}")
  return policy


def save(path: str, policy: PrecisionPolicy, spec: ns.NetworkSpec, **kwargs: Any) -> None:
  """Writes the policy file (`to_json_dict(policy, spec, **kwargs)`), atomically."""
  with atomic_write(path) as f:
    json.dump(to_json_dict(policy, spec, **kwargs), f, indent=2)
    f.write("\n")


def load(path: str, spec: Optional[ns.NetworkSpec] = None) -> PrecisionPolicy:
  """Reads a policy file (see `from_json_dict`).

  Raises:
    ValueError: unreadable file or invalid contents (one line).
  """
  try:
    with open(path, encoding="utf-8") as f:
      data = json.load(f)
  except (OSError, ValueError) as e:
    raise ValueError(f"cannot read precision policy {path}: {e}") from None
  return from_json_dict(data, spec)


def parse_choices(text: str, sparsities: Iterable[float] = (0.0,)) -> List[LayerChoice]:
  """`parse_choice` of each comma-separated label, each integer choice also crossed with
  every sparsity in `sparsities` (float choices only unpruned), duplicates removed."""
  out: List[LayerChoice] = []
  for token in str(text).split(","):
    if not token.strip():
      continue
    base = parse_choice(token)
    levels = (base.sparsity,) if base.is_float or base.sparsity else tuple(sparsities)
    for s in levels:
      c = dataclasses.replace(base, sparsity=s)
      if c not in out:
        out.append(c)
  if not out:
    raise ValueError("no precision choices given; allowed: e.g. fp32,fp16,int8,int4")
  return out
