"""The real int8 actor runtime: LiteRT (ai-edge-litert) dynamic-range int8 kernels.

Why LiteRT: on this project's CPUs, XLA-CPU int8 (jax 0.4.13) and TF 2.8's TFLite
int8 kernels are slower than jax fp32, while LiteRT 2.3's XNNPACK
dynamic-range kernels (int8 weights, activations quantized on the fly per
batch row, float32 in/out) are 2-5x faster than jax fp32 at batch 1 (STACK.md,
issue 3). ONNX Runtime is not installed in the pinned stack, so it was not
measured here.

How a new parameter version becomes runnable in milliseconds:

1. ONCE per architecture (`template_for(spec)`, cached per process): a Keras
   model of the spec with random weights and distinct non-zero dummy biases (so
   the converter neither folds nor deduplicates them) goes through TF 2.8's
   `TFLiteConverter` with `Optimize.DEFAULT` (0.3-7 s). The flatbuffer is then
   rewritten so that EVERY weight tensor is int8 with per-channel quantization
   (`quantized_dimension = 0`, one scale per output channel; the converter
   itself emits per-tensor scales for FULLY_CONNECTED, per-channel for CONV_2D,
   and leaves weights < 1024 elements in float32). The serialized bytes and
   the byte offsets of each layer's weight data, scale vector and bias data are
   kept.
2. Per version (`load`): the payload's int8 weights (transposed to TFLite's
   `[units, in]` / OHWI layout), float32 scales and biases are copied into those
   offsets and a new `ai_edge_litert` Interpreter is created from the bytes and
   invoked once (XNNPACK packs weights then). No reconversion.

The spec's `input_scale` is folded into the first layer's scales (exact for
symmetric quantization: `q` is unchanged, `scale * input_scale`).

Numerics: outputs equal `forward(dequantize(payload))` up to the error of the
dynamic int8 quantization of activations (~0.1-1% of the output magnitude).

Mixed networks (`LiteRTMixedRuntime`, per-layer policies of `quantization.mixed`): the
same conversion, but the weight tensors of the layers named `float_layers` are rewritten
to float32 (no quantization parameters) instead of int8, so those FULLY_CONNECTED /
CONV_2D ops run XNNPACK's float32 kernels while the others run the dynamic-range int8
ones. Each float/int8 pattern is one more cached template (a flatbuffer rewrite, no
second conversion). Integer layers narrower than 8 bits are executed as int8 tensors
holding the narrower values: exact in value, with int8 speed (no int4/int2 kernels).
"""
from __future__ import annotations

import dataclasses
import os
import threading
import time
from typing import Dict, FrozenSet, Tuple

import numpy as np

from actorq.quantization import forward
from actorq.quantization import mixed
from actorq.quantization import network_spec as ns
from actorq.quantization import payload as pl
from actorq.quantization.runtimes import base

_TEMPLATES: Dict[Tuple[ns.NetworkSpec, FrozenSet[str]], "_Template"] = {}
_LOCK = threading.Lock()


class _Template:
  """Serialized model of a spec (int8 weights except `float_layers`, which keep float32
  weights) plus the patch locations of every layer."""

  def __init__(self, spec: ns.NetworkSpec, float_layers: FrozenSet[str] = frozenset()):
    t0 = time.perf_counter()
    self.spec = spec
    self.float_layers = frozenset(float_layers)
    self.model_bytes, self.locs = _build(spec, self.float_layers)
    self.build_s = time.perf_counter() - t0


def template_for(spec: ns.NetworkSpec, float_layers=frozenset()) -> _Template:
  """The cached template of `spec` with `float_layers` left in float32 (built on first
  use: seconds for the conversion; a further float/int8 pattern of a converted spec is a
  flatbuffer rewrite)."""
  key = (spec, frozenset(float_layers))
  with _LOCK:
    if key not in _TEMPLATES:
      _TEMPLATES[key] = _Template(spec, key[1])
    return _TEMPLATES[key]


_CONVERTED: Dict[ns.NetworkSpec, tuple] = {}


def _keras_model(spec, rng):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  act = {"relu": "relu", "tanh": "tanh", "none": None}
  inp = tf.keras.Input(tuple(spec.input_shape), batch_size=None)
  x = inp
  dummies = {}
  for layer in spec.layers:
    if isinstance(layer, ns.Flatten):
      x = tf.keras.layers.Flatten(name=layer.name)(x)
      continue
    if isinstance(layer, ns.Dense):
      keras_layer = tf.keras.layers.Dense(layer.units, activation=act[layer.activation],
                                          name=layer.name)
    else:
      keras_layer = tf.keras.layers.Conv2D(layer.channels, layer.kernel, layer.stride,
                                           padding="valid",
                                           activation=act[layer.activation],
                                           name=layer.name)
    x = keras_layer(x)
    w, b = keras_layer.get_weights()
    w = rng.normal(0.0, 0.1, w.shape).astype(np.float32)
    # Distinct, non-zero biases: not folded away, not deduplicated into one buffer.
    b = rng.uniform(0.5, 1.5, b.shape).astype(np.float32)
    keras_layer.set_weights([w, b])
    dummies[layer.name] = b
  return tf.keras.Model(inp, x), dummies


def _convert(spec: ns.NetworkSpec):
  """`(flatbuffer bytes, dummy biases)` of the TF 2.8 conversion, once per spec."""
  if spec not in _CONVERTED:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    rng = np.random.default_rng(0)
    model, dummies = _keras_model(spec, rng)
    conv = tf.lite.TFLiteConverter.from_keras_model(model)
    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    _CONVERTED[spec] = (conv.convert(), dummies)
  return _CONVERTED[spec]


def _build(spec: ns.NetworkSpec, float_layers: FrozenSet[str] = frozenset()):
  import flatbuffers  # pylint: disable=g-import-not-at-top
  from tensorflow.lite.python import schema_py_generated as sch  # pylint: disable=g-import-not-at-top

  unknown = set(float_layers) - {l.name for l in spec.parameter_layers}
  if unknown:
    raise ValueError(f"float_layers {sorted(unknown)} are not parameter layers of the "
                     f"network {[l.name for l in spec.parameter_layers]}")
  flat, dummies = _convert(spec)

  m = sch.ModelT.InitFromObj(sch.Model.GetRootAsModel(flat, 0))
  if len(m.subgraphs) != 1:
    raise NotImplementedError(f"expected 1 subgraph, converter emitted {len(m.subgraphs)}")
  sg = m.subgraphs[0]
  names = {v: k for k, v in vars(sch.BuiltinOperator).items() if not k.startswith("_")}
  allowed = {"FULLY_CONNECTED", "CONV_2D", "RESHAPE", "TANH"}
  param_layers = list(spec.parameter_layers)
  param_ops = []
  for op in sg.operators:
    oc = m.operatorCodes[op.opcodeIndex]
    name = names.get(max(oc.builtinCode, oc.deprecatedBuiltinCode), "?")
    if name not in allowed:
      raise NotImplementedError(f"converter emitted an unsupported op {name} for {spec}")
    if name in ("FULLY_CONNECTED", "CONV_2D"):
      param_ops.append((name, op))
  if len(param_ops) != len(param_layers):
    raise NotImplementedError(
        f"converter emitted {len(param_ops)} FC/CONV ops for {len(param_layers)} layers")

  layer_tensors = []
  for layer, (opname, op) in zip(param_layers, param_ops):
    want = "FULLY_CONNECTED" if isinstance(layer, ns.Dense) else "CONV_2D"
    if opname != want or len(op.inputs) < 3 or op.inputs[2] < 0:
      raise NotImplementedError(f"layer {layer.name!r}: expected {want} with a bias, got "
                                f"{opname} inputs {list(op.inputs)}")
    wt, bt = sg.tensors[op.inputs[1]], sg.tensors[op.inputs[2]]
    bias = m.buffers[bt.buffer].data
    if bias is None or not np.array_equal(np.asarray(bias, np.uint8).view(np.float32),
                                          dummies[layer.name]):
      raise NotImplementedError(f"layer {layer.name!r}: converter folded or shared its bias")
    units = int(wt.shape[0])
    if layer.name in float_layers:
      # A float32 weight tensor: the op runs float kernels (no activation quantization).
      wt.type = sch.TensorType.FLOAT32
      m.buffers[wt.buffer].data = np.zeros(4 * int(np.prod(wt.shape)), np.uint8)
      wt.quantization = None
      if opname == "FULLY_CONNECTED" and hasattr(op.builtinOptions,
                                                 "asymmetricQuantizeInputs"):
        op.builtinOptions.asymmetricQuantizeInputs = False
      layer_tensors.append((layer, op.inputs[1], op.inputs[2]))
      continue
    wt.type = sch.TensorType.INT8
    m.buffers[wt.buffer].data = np.zeros(int(np.prod(wt.shape)), np.uint8)
    q = sch.QuantizationParametersT()
    q.scale = np.ones(units, np.float32)
    q.zeroPoint = np.zeros(units, np.int64)
    q.quantizedDimension = 0
    wt.quantization = q
    if opname == "FULLY_CONNECTED" and hasattr(op.builtinOptions, "asymmetricQuantizeInputs"):
      op.builtinOptions.asymmetricQuantizeInputs = True
    layer_tensors.append((layer, op.inputs[1], op.inputs[2]))

  builder = flatbuffers.Builder(1 << 20)
  builder.Finish(m.Pack(builder), file_identifier=b"TFL3")
  buf = bytearray(builder.Output())

  # Locate the patchable bytes: numpy views into `buf` give their offsets.
  root = sch.Model.GetRootAsModel(buf, 0)
  sg2 = root.Subgraphs(0)
  base_addr = np.frombuffer(buf, np.uint8).__array_interface__["data"][0]
  locs = []
  for layer, wi, bi in layer_tensors:
    wt, bt = sg2.Tensors(wi), sg2.Tensors(bi)
    wdata = root.Buffers(wt.Buffer()).DataAsNumpy()
    bdata = root.Buffers(bt.Buffer()).DataAsNumpy()
    off = lambda a: a.__array_interface__["data"][0] - base_addr
    is_float = layer.name in float_layers
    sloc = None
    if not is_float:
      sdata = wt.Quantization().ScaleAsNumpy()
      sloc = (off(sdata), sdata.nbytes)
    locs.append({"layer": layer, "w": (off(wdata), wdata.nbytes), "b": (off(bdata), bdata.nbytes),
                 "scale": sloc, "float": is_float,
                 "tfl_shape": tuple(int(s) for s in wt.ShapeAsNumpy())})
  return bytes(buf), locs


def _transpose_into(dst: np.ndarray, src: np.ndarray, rows: int = 16):
  """`dst[...] = src.T` for 2-d int8 arrays, 16 source rows at a time (~5x faster
  than one strided numpy transpose of a 2048x2048 int8 matrix: cache friendly)."""
  for i in range(0, src.shape[0], rows):
    dst[:, i:i + rows] = src[i:i + rows].T


class LiteRTInt8Runtime(base.PolicyRuntime):
  """int8 policy on LiteRT/XNNPACK, refreshed by patching a prebuilt flatbuffer.

  The first construction for a spec converts a model (0.3-7 s, cached per
  process); `load` then takes milliseconds (see `timings`). `warmup=True`
  invokes the new interpreter once inside `load` so XNNPACK's weight packing is
  paid there, not on the first action. A change of batch size re-allocates
  tensors (~1 ms); actors should keep a fixed batch size.
  """
  precision = "int8"
  payload_precision = "int8"
  accepted_payloads = pl.INT8_PRECISIONS

  def __init__(self, spec: ns.NetworkSpec, num_threads: int = 1, warmup: bool = True,
               float_layers=()):
    super().__init__(spec, num_threads)
    pl.expected_shapes(spec)  # validates the spec
    self.float_layers = frozenset(float_layers)
    self._template = template_for(spec, self.float_layers)
    self._buf = bytearray(self._template.model_bytes)
    self._view = np.frombuffer(self._buf, np.uint8)
    self._interp = None
    self._batch = 1
    self._warmup = warmup
    self.timings.update({"template_build_s": self._template.build_s, "last_patch_ms": 0.0,
                         "last_interpreter_ms": 0.0})

  def _patch(self, payload):
    first = True
    for loc in self._template.locs:
      layer = loc["layer"]
      l = payload.layers[layer.name]
      if loc["float"]:
        w = np.asarray(l["w"], np.float32)
        if first:
          w = w * np.float32(self.spec.input_scale)
          first = False
        units = w.shape[-1]
        off, n = loc["w"]
        if w.size * 4 != n:
          raise ValueError(f"layer {layer.name!r}: payload 'w' has {w.size * 4} bytes, the "
                           f"model expects {n}")
        self._view[off:off + n].view(np.float32).reshape(units, -1)[...] = \
            w.reshape(-1, units).T
        off, n = loc["b"]
        self._view[off:off + n] = np.ascontiguousarray(l["b"], np.float32).reshape(-1).view(
            np.uint8)
        continue
      w = np.asarray(l["w"], np.int8)
      units = w.shape[-1]
      # params layout [in, units] / HWIO -> TFLite [units, in] / OHWI: both are the
      # transpose of w viewed as [-1, units].
      off, n = loc["w"]
      if w.size != n:
        raise ValueError(f"layer {layer.name!r}: payload 'w' has {w.size} bytes, the "
                         f"int8 model expects {n}")
      _transpose_into(self._view[off:off + n].view(np.int8).reshape(units, -1),
                      w.reshape(-1, units))
      scale = np.broadcast_to(np.asarray(l["scale"], np.float32), (units,))
      if first:
        scale = scale * np.float32(self.spec.input_scale)
        first = False
      for key, arr in (("scale", np.ascontiguousarray(scale, np.float32)),
                       ("b", np.ascontiguousarray(l["b"], np.float32))):
        off, n = loc[key]
        raw = arr.reshape(-1).view(np.uint8)
        if raw.size != n:
          raise ValueError(f"layer {layer.name!r}: payload {key!r} has {raw.size} bytes, "
                           f"the int8 model expects {n}")
        self._view[off:off + n] = raw

  def _new_interpreter(self):
    from ai_edge_litert.interpreter import Interpreter  # pylint: disable=g-import-not-at-top
    it = Interpreter(model_content=bytes(self._buf), num_threads=self.num_threads)
    self._in = it.get_input_details()[0]["index"]
    self._out = it.get_output_details()[0]["index"]
    if self._batch != 1:
      it.resize_tensor_input(self._in, [self._batch] + list(self.spec.input_shape))
    it.allocate_tensors()
    return it

  def _load(self, payload):
    pl.check_payload(payload, self.spec, self.accepted_payloads)
    self._install(payload)

  def _install(self, payload):
    t0 = time.perf_counter()
    self._patch(payload)
    t1 = time.perf_counter()
    it = self._new_interpreter()
    if self._warmup:
      it.set_tensor(self._in, np.zeros([self._batch] + list(self.spec.input_shape), np.float32))
      it.invoke()
    self._interp = it
    self.timings["last_patch_ms"] = (t1 - t0) * 1e3
    self.timings["last_interpreter_ms"] = (time.perf_counter() - t1) * 1e3

  def __call__(self, observation) -> np.ndarray:
    obs = self._check_observation(observation)
    it = self._interp
    if obs.shape[0] != self._batch:
      self._batch = obs.shape[0]
      it.resize_tensor_input(self._in, list(obs.shape))
      it.allocate_tensors()
    it.set_tensor(self._in, obs)
    it.invoke()
    self.timings["calls"] += 1
    return it.get_tensor(self._out)


class LiteRTLayersRuntime(LiteRTInt8Runtime):
  """A per-layer precision policy (`quantization.mixed`) on LiteRT/XNNPACK (the machinery
  of the ``mixed:`` row's `LiteRTMixedRuntime` and of `LiteRTFloatRuntime`).

  Integer layers (any width 2..8, the values held in int8 with their scales) run the
  dynamic-range int8 kernels of `LiteRTInt8Runtime`; the layers named in `float_layers`
  (fp32/fp16/bf16 choices) keep float32 weight tensors and run float32 kernels (an
  fp16/bf16 layer's weights arrive rounded to fp16/bf16, as LiteRT's own fp16 models run
  on CPUs: float32 compute). Feed it `mixed.make_payload(params, spec, policy, version)`.
  With no float layers it computes what `LiteRTInt8Runtime` does.

  Raises:
    ValueError: `float_layers` naming layers the spec lacks; at `load`, a payload whose
      layers do not match the float/int8 pattern.
  """
  precision = "mixed"
  payload_precision = "mixed"
  accepted_payloads = ("mixed",)

  def __init__(self, spec: ns.NetworkSpec, float_layers=(), num_threads: int = 1,
               warmup: bool = True, payload_precision: str = "mixed"):
    super().__init__(spec, num_threads, warmup, float_layers)
    # "mixed", or the policy's "mixed:<choice>,..." name when an actor pulls it by name.
    self.payload_precision = payload_precision

  def _load(self, payload):
    pl.check_payload(payload, self.spec, self.accepted_payloads)
    for name, l in payload.layers.items():
      if name in self.float_layers:
        if "scale" in l:
          raise ValueError(f"layer {name!r} runs float32 kernels in this runtime, but the "
                           "payload gives it int8 weights with scales")
      elif "scale" not in l or np.asarray(l["w"]).dtype != np.int8:
        raise ValueError(f"layer {name!r} runs int8 kernels in this runtime; the payload "
                         "must give it int8 'w' and a 'scale'")
    self._install(payload)


class LiteRTMixedRuntime(LiteRTLayersRuntime):
  """The precision table's ``mixed:`` family row: a per-layer policy named
  ``"mixed:<choice>,..."`` runs on `LiteRTLayersRuntime`. The class answers the table's
  questions about such a name (`base.PolicyRuntime`: `check_name`, `check_fits`,
  `part_precision`) and encodes its payload (`encode`), so nothing outside the table
  branches on the family. ``LiteRTMixedRuntime(spec, float_layers)`` is the runtime of a
  `mixed.PrecisionPolicy` (`runtimes.make_mixed_runtime`)."""

  @classmethod
  def for_precision(cls, precision: str, spec: ns.NetworkSpec,
                    num_threads: int = 1) -> "LiteRTMixedRuntime":
    """The runtime of a per-layer policy's ``"mixed:<choice>,..."`` name (the precision
    table's ``mixed:`` row): its float layers run float32 kernels, and it pulls the payload
    named by the precision itself (so a `PolicyServer` knows which policy to publish).

    Raises:
      ValueError: a name `mixed.policy_of` refuses for `spec`.
    """
    policy = mixed.policy_of(precision, spec)
    return cls(spec, policy.float_layers, num_threads, payload_precision=precision)

  # The family row's questions (`base.PolicyRuntime`): what a "mixed:<choice>,..." name
  # means is this class's to say, so nothing outside the table branches on the family.

  @classmethod
  def names(cls, precision) -> bool:
    """Whether `precision` is a per-layer policy's name (`mixed.is_mixed`)."""
    return mixed.is_mixed(precision)

  @classmethod
  def check_name(cls, precision: str) -> None:
    """Raises ValueError (one line) for labels `mixed.parse_precision_name` refuses."""
    mixed.parse_precision_name(precision)

  @classmethod
  def check_fits(cls, precision: str, spec: ns.NetworkSpec) -> None:
    """Raises ValueError for a name `mixed.policy_of` refuses for `spec` (layer count)."""
    mixed.policy_of(precision, spec)

  @classmethod
  def part_precision(cls, precision: str, spec: ns.NetworkSpec, layers) -> str:
    """The ``"mixed:..."`` name of the policy's choices for `layers` only (a part of
    `spec`, e.g. a recurrent network's torso), in their order."""
    policy = mixed.policy_of(precision, spec)
    return mixed.precision_name(
        mixed.PrecisionPolicy(tuple((n, policy.choice(n)) for n in layers)))

  @staticmethod
  def encode(params, spec: ns.NetworkSpec, precision: str, version: int = 0,
             per_channel: bool = True) -> pl.Payload:
    """The row's payload encoder: `mixed.make_payload` of the per-layer policy
    `precision` names (`per_channel` does not apply: each layer's label says).

    Raises:
      ValueError: a name `mixed.policy_of` refuses, or params that do not fit `spec`.
    """
    del per_channel
    return mixed.make_payload(params, spec, mixed.policy_of(precision, spec), int(version))


class LiteRTFloatRuntime(LiteRTLayersRuntime):
  """fp32 weights on LiteRT/XNNPACK's float32 kernels (``"litert-fp32"``): the int8
  runtime's path (one prebuilt flatbuffer patched in place per parameter version, a new
  interpreter with its warm-up invocation at every `load`, the same asynchronous pulls)
  with every layer in float32. It is int8's placebo: what differs from the fp32 (JAX)
  policy is only the float kernels' summation order (differences of ~1e-7 relative in the
  Q-values) and the runtime path, not quantization, so a training run's int8 - fp32
  difference can be told from the chaos of any perturbation of the actors. Feed it
  `encode_litert_fp32` payloads (the fp32 arrays, labelled ``"litert-fp32"``). A uniform
  row: it shares `LiteRTLayersRuntime`'s machinery with the ``mixed:`` family's
  `LiteRTMixedRuntime`, not that family's reading of a precision name."""
  precision = "litert-fp32"
  payload_precision = "litert-fp32"
  accepted_payloads = ("litert-fp32",)

  def __init__(self, spec: ns.NetworkSpec, num_threads: int = 1, warmup: bool = True):
    super().__init__(spec, tuple(pl.expected_shapes(spec)), num_threads, warmup,
                     payload_precision=self.payload_precision)


def encode_litert_fp32(params, spec: ns.NetworkSpec, precision: str, version: int,
                       per_channel: bool = True) -> pl.Payload:
  """The fp32 payload (`payload.make_payload(..., "fp32", ...)`) labelled `precision`, what
  `LiteRTFloatRuntime` loads. Raises ValueError for params that do not fit `spec`."""
  del per_channel  # float weights have no scales
  return dataclasses.replace(pl.make_payload(params, spec, "fp32", version),
                             precision=precision)


def standalone_model(params, spec: ns.NetworkSpec, precision: str = "int8") -> bytes:
  """The `.tflite` flatbuffer the actors run, as a file a deployment can load alone.

  "int8": `LiteRTInt8Runtime`'s model (dynamic-range int8 weights with per-channel scales,
  float32 biases, activations quantized per row by the kernels); "fp32": the same graph
  with every weight tensor float32 (`LiteRTMixedRuntime` with every layer float); a
  per-layer policy's ``"mixed:<choice>,..."`` name (`mixed.precision_name`): the
  `LiteRTMixedRuntime` model of that policy, which its actors run (integer layers of any
  width 2..8 as int8 tensors with their scales and dynamic-range kernels; fp32/fp16/bf16
  layers as float32 tensors holding the values rounded to their type, float32 kernels;
  pruned weights are exact zeros). Either way the spec's `input_scale` is folded into the
  first layer, so the model takes RAW observations: input float32 `[B, *spec.input_shape]`
  (B = 1 as stored; the batch is dynamic: `resize_tensor_input`), output float32
  `[B, spec.output_size]`.

  Args:
    params: float32 `{layer: {"w", "b"}}` of `spec`.
    precision: "int8", "fp32" or a ``"mixed:..."`` name with one label per parameter layer.

  Raises:
    ValueError: another precision, a mixed name `mixed.policy_of` refuses for `spec`, or
      params that do not fit the spec.
  """
  if precision in ("int8", "fp32"):
    payload = pl.make_payload(params, spec, precision, 0)
  elif LiteRTMixedRuntime.names(precision):  # the runtime of the precision table's mixed: row
    payload = LiteRTMixedRuntime.encode(params, spec, precision, 0)
  else:
    raise ValueError(f"a standalone model is int8, fp32 or {mixed.MIXED_FORM}, got "
                     f"{precision!r}")
  return payload_model(payload, spec)


def payload_model(payload: pl.Payload, spec: ns.NetworkSpec) -> bytes:
  """The `.tflite` flatbuffer `standalone_model` describes, of an already encoded payload:
  an "int8" one (`payload.make_payload`), an "fp32" one (every layer float32) or a
  "mixed" one (`mixed.make_payload`; its float layers are those without a "scale").

  Raises:
    ValueError: a payload of another precision, or one that does not fit the spec.
  """
  if payload.precision == "int8":
    runtime = LiteRTInt8Runtime(spec, warmup=False)
    runtime.load(payload)
  elif payload.precision == "fp32":
    runtime = LiteRTMixedRuntime(spec, [l.name for l in spec.parameter_layers], warmup=False)
    pl.check_payload(payload, spec, ("fp32",))
    runtime._install(payload)  # pylint: disable=protected-access
  elif payload.precision == mixed.MIXED:
    float_layers = [n for n, l in payload.layers.items() if "scale" not in l]
    runtime = LiteRTMixedRuntime(spec, float_layers, warmup=False)
    runtime.load(payload)
  else:
    raise ValueError(f"a standalone model is of an int8, fp32 or mixed payload, got "
                     f"{payload.precision!r}")
  return bytes(runtime._buf)  # pylint: disable=protected-access


def dynamic_range_reference(params, spec: ns.NetworkSpec, observation,
                            float_layers=()) -> np.ndarray:
  """What the int8 runtime computes, in numpy: `forward` of the dequantized params
  where every layer's input row is first quantized asymmetrically to int8 (range
  widened to contain 0, scale = (max - min) / 255, zero_point =
  round(-128 - min / scale)) and dequantized, as LiteRT's dynamic-range
  FULLY_CONNECTED / CONV_2D kernels do (per batch row). Matches the runtime to
  ~1e-6; used by the parity tests. Layers named in `float_layers` (a mixed network's
  float layers) take their input unquantized, as `LiteRTMixedRuntime` runs them.

  Args:
    params: float32 `{layer: {"w", "b"}}` (e.g. `payload.dequantize_payload(p)`).
    observation: `[B, *input_shape]`.
  Returns:
    float32 `[B, output_size]`.
  """
  def layer_fn(layer, x):
    w, b = params[layer.name]["w"], params[layer.name]["b"]
    if layer.name not in float_layers:
      rows = x.reshape(x.shape[0], -1)
      lo = np.minimum(rows.min(1, keepdims=True), 0)
      hi = np.maximum(rows.max(1, keepdims=True), 0)
      s = (hi - lo) / 255
      s[s == 0] = 1
      zp = np.round(-128 - lo / s)
      x = ((np.clip(np.round(rows / s) + zp, -128, 127) - zp) * s).reshape(x.shape)
    return forward.pre_activation(layer, x, w, b)

  x = forward.apply(spec.layers, forward.scaled_input(spec, np.asarray(observation)), layer_fn)
  return x.astype(np.float32)
