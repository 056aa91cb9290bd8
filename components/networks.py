"""Haiku networks built from a `NetworkSpec`.

The learner trains the Haiku network; actors execute the same architecture through
a policy runtime (`actorq.quantization.runtimes`). Module names equal layer names so
the params tree is `{layer.name: {"w", "b"}}` for both.
"""
from __future__ import annotations

import haiku as hk
import jax
import jax.numpy as jnp

from actorq.quantization import network_spec as ns

_ACT = {"relu": jax.nn.relu, "tanh": jnp.tanh, "none": lambda x: x}


def haiku_network(spec: ns.NetworkSpec) -> hk.Transformed:
  """`hk.without_apply_rng(hk.transform(...))` of the spec.

  `apply(params, observation)` maps `[B, *input_shape]` to float32 `[B, output_size]`.
  """

  def fn(observation):
    x = observation.astype(jnp.float32) * spec.input_scale
    for layer in spec.layers:
      if isinstance(layer, ns.Flatten):
        x = hk.Flatten(name=layer.name)(x)
      elif isinstance(layer, ns.Dense):
        x = _ACT[layer.activation](hk.Linear(layer.units, name=layer.name)(x))
      else:
        conv = hk.Conv2D(layer.channels, layer.kernel, stride=layer.stride,
                         padding="VALID", name=layer.name)
        x = _ACT[layer.activation](conv(x))
    return x

  return hk.without_apply_rng(hk.transform(fn))


def init_params(spec: ns.NetworkSpec, key: jax.Array):
  """Initial parameters for a batch-1 dummy observation."""
  dummy = jnp.zeros((1,) + tuple(spec.input_shape), jnp.float32)
  return haiku_network(spec).init(key, dummy)
