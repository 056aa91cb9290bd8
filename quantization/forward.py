"""Pure-JAX forward pass of a `NetworkSpec` with a `{layer: {"w", "b"}}` params tree.

This is the reference semantics every policy runtime must reproduce; the Haiku
network of `actorq.components.networks` computes the same function.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from actorq.quantization import network_spec as ns

_ACT = {"relu": jax.nn.relu, "tanh": jnp.tanh, "none": lambda x: x}


def first_non_finite_layer(params, spec: ns.NetworkSpec, observation,
                           dtype=jnp.float32) -> str:
  """Where `forward` first produces a NaN or inf for `observation` (diagnosis of an actor
  whose outputs are not finite; not on the hot path).

  Returns:
    a sentence naming the input (non-finite observation) or the first layer whose
    output has a non-finite value, with the largest finite magnitude entering it; or
    that every layer's output is finite at `dtype`.
  """
  x = jnp.asarray(observation).astype(dtype) * jnp.asarray(spec.input_scale, dtype)
  if not bool(jnp.all(jnp.isfinite(x))):
    return "the observation itself is not finite"
  for layer in spec.layers:
    if isinstance(layer, ns.Flatten):
      x = x.reshape(x.shape[0], -1)
      continue
    entering = float(jnp.max(jnp.abs(x.astype(jnp.float32))))
    x = forward_layer(params, layer, x, dtype)
    if not bool(jnp.all(jnp.isfinite(x))):
      return (f"layer {layer.name!r} is the first whose output is not finite (largest "
              f"|input| {entering:.4g}; computed in {jnp.dtype(dtype).name})")
  return f"every layer's output is finite in {jnp.dtype(dtype).name}"


def forward_layer(params, layer, x, dtype):
  """One Dense or Conv2D layer (and its activation) of `forward`."""
  w = params[layer.name]["w"].astype(dtype)
  b = params[layer.name]["b"].astype(dtype)
  if isinstance(layer, ns.Dense):
    x = x @ w + b
  else:
    x = jax.lax.conv_general_dilated(
        x, w, window_strides=(layer.stride, layer.stride), padding="VALID",
        dimension_numbers=("NHWC", "HWIO", "NHWC")) + b
  return _ACT[layer.activation](x)


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
  x = observation.astype(dtype) * jnp.asarray(spec.input_scale, dtype)
  for layer in spec.layers:
    if isinstance(layer, ns.Flatten):
      x = x.reshape(x.shape[0], -1)
      continue
    x = forward_layer(params, layer, x, dtype)
  return x.astype(jnp.float32)
