"""The forward pass over a `NetworkSpec`, written once.

Every path that evaluates a feed-forward `NetworkSpec` walks its layers here
(`layer_outputs`): the float runtimes and the reference semantics (`forward`), the
learner's Haiku network (`components.networks.haiku_network`), activation calibration
(`ptq.layer_activations`), bias correction, error-compensating rounding, and LiteRT's
dynamic-range reference (`runtimes.litert_runtime.dynamic_range_reference`). What differs
between them is only how a parameter layer's pre-activation is computed from its input
(`LayerFn`): with float32 weights, with dequantized int8 weights, with each input row
quantized as LiteRT's kernels do, with the weights of a Haiku module, or corrected on the
way. The walk (input scale, Flatten, pre-activation, activation) and the layer
arithmetic (`pre_activation`, `activate`) are the same for all of them.

numpy in, numpy out: a numpy input stays numpy (the learner-side payload builders run
this way, at numpy's speed and bits); a JAX array or tracer stays JAX.
"""
from __future__ import annotations

from typing import Any, Callable, Iterator, NamedTuple, Sequence, Tuple

import jax
import jax.numpy as jnp
import numpy as np

from actorq.quantization import network_spec as ns


class Activation(NamedTuple):
  """One activation function, as JAX and numpy compute it (the same values)."""
  jax: Callable[[Any], Any]
  numpy: Callable[[np.ndarray], np.ndarray]


# `layer.activation` -> the function (`ns.ACTIVATIONS` lists the names a spec may use).
ACTIVATIONS = {
    "relu": Activation(jax.nn.relu, lambda y: np.maximum(y, 0)),
    "tanh": Activation(jnp.tanh, np.tanh),
    "none": Activation(lambda y: y, lambda y: y),
}

# `(layer, x) -> pre-activation` of one Dense / Conv2D layer on its input x.
LayerFn = Callable[[Any, Any], Any]


def activate(layer, y):
  """`layer.activation` applied to the pre-activation `y` (numpy for a numpy `y`)."""
  fns = ACTIVATIONS[layer.activation]
  return fns.numpy(y) if isinstance(y, np.ndarray) else fns.jax(y)


def pre_activation(layer, x, w, b):
  """`x w + b` of a Dense layer (x [B, in], w [in, units]) or the VALID, strided
  convolution of a Conv2D layer plus b (x NHWC, w HWIO); numpy for a numpy `x`."""
  if isinstance(layer, ns.Dense):
    return x @ w + b
  y = jax.lax.conv_general_dilated(x, w, (layer.stride, layer.stride), "VALID",
                                   dimension_numbers=("NHWC", "HWIO", "NHWC"))
  return (np.asarray(y) if isinstance(x, np.ndarray) else y) + b


def scaled_input(spec: ns.NetworkSpec, observation, dtype=jnp.float32):
  """`observation` [B, *input_shape] cast to `dtype` times `spec.input_scale` (what every
  runtime feeds the first layer); numpy float32 for a numpy `observation`."""
  if isinstance(observation, np.ndarray):
    return np.asarray(observation, np.float32) * np.float32(spec.input_scale)
  return jnp.asarray(observation).astype(dtype) * jnp.asarray(spec.input_scale, dtype)


def layer_outputs(layers: Sequence[Any], x, layer_fn: LayerFn) -> Iterator[Tuple[Any, Any]]:
  """The forward pass: yields `(layer, output)` for each of `layers` in order, from the
  (already scaled) input `x` [B, ...]: a Flatten keeps the batch axis and flattens the
  rest; a Dense / Conv2D layer's output is `activate(layer, layer_fn(layer, x))`."""
  for layer in layers:
    if isinstance(layer, ns.Flatten):
      x = x.reshape(x.shape[0], -1)
    else:
      x = activate(layer, layer_fn(layer, x))
    yield layer, x


def apply(layers: Sequence[Any], x, layer_fn: LayerFn):
  """The last output of `layer_outputs(layers, x, layer_fn)` (x itself for no layers)."""
  for _, x in layer_outputs(layers, x, layer_fn):
    pass
  return x


def params_layer(params, dtype=None) -> LayerFn:
  """The `LayerFn` of a `{layer: {"w", "b"}}` params tree, its arrays cast to `dtype`
  (None: as they are; for a numpy input, numpy arrays of `dtype`, not copied when they
  are of it already)."""
  def fn(layer, x):
    w, b = params[layer.name]["w"], params[layer.name]["b"]
    if isinstance(x, np.ndarray):
      w, b = np.asarray(w, dtype), np.asarray(b, dtype)
    elif dtype is not None:
      w, b = w.astype(dtype), b.astype(dtype)
    return pre_activation(layer, x, w, b)
  return fn


def first_non_finite_layer(params, spec: ns.NetworkSpec, observation,
                           dtype=jnp.float32) -> str:
  """Where `forward` first produces a NaN or inf for `observation` (diagnosis of an actor
  whose outputs are not finite; not on the hot path).

  Returns:
    a sentence naming the input (non-finite observation) or the first layer whose
    output has a non-finite value, with the largest finite magnitude entering it; or
    that every layer's output is finite at `dtype`.
  """
  x = scaled_input(spec, jnp.asarray(observation), dtype)
  if not bool(jnp.all(jnp.isfinite(x))):
    return "the observation itself is not finite"
  entering = x
  for layer, x in layer_outputs(spec.layers, x, params_layer(params, dtype)):
    if isinstance(layer, ns.Flatten):
      continue
    if not bool(jnp.all(jnp.isfinite(x))):
      largest = float(jnp.max(jnp.abs(entering.astype(jnp.float32))))
      return (f"layer {layer.name!r} is the first whose output is not finite (largest "
              f"|input| {largest:.4g}; computed in {jnp.dtype(dtype).name})")
    entering = x
  return f"every layer's output is finite in {jnp.dtype(dtype).name}"


def forward(params, spec: ns.NetworkSpec, observation: jnp.ndarray,
            dtype=jnp.float32) -> jnp.ndarray:
  """Applies the network.

  Args:
    params: `{layer.name: {"w": [...], "b": [units]}}`.
    spec: the architecture.
    observation: `[B, *spec.input_shape]`, any real dtype.
    dtype: compute dtype (float32, float16 or bfloat16); the output is float32.

  Returns:
    float32 `[B, spec.output_size]`.
  """
  x = scaled_input(spec, jnp.asarray(observation), dtype)
  return apply(spec.layers, x, params_layer(params, dtype)).astype(jnp.float32)
