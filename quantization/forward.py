"""Pure-JAX forward pass of a `NetworkSpec` with a `{layer: {"w", "b"}}` params tree.

This is the reference semantics every policy runtime must reproduce; the Haiku
network of `actorq.components.networks` computes the same function.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from actorq.quantization import network_spec as ns

_ACT = {"relu": jax.nn.relu, "tanh": jnp.tanh, "none": lambda x: x}


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
    w = params[layer.name]["w"].astype(dtype)
    b = params[layer.name]["b"].astype(dtype)
    if isinstance(layer, ns.Dense):
      x = x @ w + b
    else:
      x = jax.lax.conv_general_dilated(
          x, w, window_strides=(layer.stride, layer.stride), padding="VALID",
          dimension_numbers=("NHWC", "HWIO", "NHWC")) + b
    x = _ACT[layer.activation](x)
  return x.astype(jnp.float32)
