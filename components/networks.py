"""Haiku networks built from a `NetworkSpec`.

The learner trains the Haiku network; actors execute the same architecture through
a policy runtime (`actorq.quantization.runtimes`). Module names equal layer names so
the params tree is `{layer.name: {"w", "b"}}` for both.
"""
from __future__ import annotations

from typing import Optional

import haiku as hk
import jax
import jax.numpy as jnp

from actorq.quantization import network_spec as ns

_ACT = {"relu": jax.nn.relu, "tanh": jnp.tanh, "none": lambda x: x}


def haiku_network(spec: ns.NetworkSpec,
                  output_init_scale: Optional[float] = None) -> hk.Transformed:
  """`hk.without_apply_rng(hk.transform(...))` of the spec.

  `apply(params, observation)` maps `[B, *input_shape]` to float32 `[B, output_size]`.

  Args:
    spec: the architecture.
    output_init_scale: if set, the last layer's weights start from
      `hk.initializers.VarianceScaling(output_init_scale)` (truncated normal, std
      `sqrt(scale / fan_in)`), e.g. 1e-4 for Acme's `NearZeroInitializedLinear` policy
      head, whose outputs start near 0 (not in the saturated region of a final tanh).
      None: Haiku's default (std `1 / sqrt(fan_in)`). Initialisation only: the spec,
      params layout and runtimes are unchanged.

  Raises:
    ValueError: `output_init_scale` is not a positive number.
  """
  if output_init_scale is not None and not output_init_scale > 0:
    raise ValueError(f"output_init_scale must be > 0 or None, got {output_init_scale}")
  last = len(spec.layers) - 1

  def fn(observation):
    x = observation.astype(jnp.float32) * spec.input_scale
    for i, layer in enumerate(spec.layers):
      w_init = None
      if i == last and output_init_scale is not None:
        w_init = hk.initializers.VarianceScaling(output_init_scale)
      if isinstance(layer, ns.Flatten):
        x = hk.Flatten(name=layer.name)(x)
      elif isinstance(layer, ns.Dense):
        x = _ACT[layer.activation](hk.Linear(layer.units, w_init=w_init, name=layer.name)(x))
      else:
        conv = hk.Conv2D(layer.channels, layer.kernel, stride=layer.stride,
                         padding="VALID", w_init=w_init, name=layer.name)
        x = _ACT[layer.activation](conv(x))
    return x

  return hk.without_apply_rng(hk.transform(fn))


def init_params(spec: ns.NetworkSpec, key: jax.Array):
  """Initial parameters for a batch-1 dummy observation."""
  dummy = jnp.zeros((1,) + tuple(spec.input_shape), jnp.float32)
  return haiku_network(spec).init(key, dummy)
