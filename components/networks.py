"""Haiku networks built from a `NetworkSpec`.

The learner trains the Haiku network; actors execute the same architecture through
a policy runtime (`actorq.quantization.runtimes`). Both compute the one forward pass of
`actorq.quantization.forward`. Module names equal layer names so
the params tree is `{layer.name: {"w", "b"}}` for both.
"""
from __future__ import annotations

import contextlib
import contextvars
from typing import Iterator, Optional

import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np

from actorq.quantization import forward
from actorq.quantization import network_spec as ns


# How a Haiku network of this module computes a layer's pre-activation from (layer, x, w, b)
# (a `forward.LayerFn` with the weights): `forward.pre_activation` unless a caller chose
# another arithmetic for what it traces (`layer_arithmetic`).
_PRE_ACTIVATION: contextvars.ContextVar = contextvars.ContextVar(
    "pre_activation", default=forward.pre_activation)


@contextlib.contextmanager
def layer_arithmetic(pre_activation) -> Iterator[None]:
  """Networks from `haiku_network` traced (applied) inside this block compute each layer's
  pre-activation with `pre_activation(layer, x, w, b)` instead of
  `forward.pre_activation`: the same parameters and values, another way to compute them
  (e.g. `components.anakin.layers.pre_activation`, the compiled launch's: fast under
  `jax.vmap` on XLA's CPU backend). Applies to tracing only: a jitted function keeps the
  arithmetic it was traced with."""
  token = _PRE_ACTIVATION.set(pre_activation)
  try:
    yield
  finally:
    _PRE_ACTIVATION.reset(token)


class _LayerParams(hk.Module):
  """The `w` and `b` of one Dense / Conv2D layer, as `hk.Linear` / `hk.Conv2D` make them:
  w from a truncated normal of std 1/sqrt(fan_in) (or `w_init`), b zeros."""

  def __init__(self, layer, w_init=None, name=None):
    super().__init__(name=name)
    self._layer = layer
    self._w_init = w_init

  def __call__(self, x):
    layer = self._layer
    if isinstance(layer, ns.Dense):
      shape, units = [x.shape[-1], layer.units], layer.units
    else:
      shape, units = (layer.kernel, layer.kernel, x.shape[-1], layer.channels), layer.channels
    w_init = self._w_init or hk.initializers.TruncatedNormal(
        stddev=1. / np.sqrt(np.prod(shape[:-1])))
    w = hk.get_parameter("w", shape, x.dtype, init=w_init)
    b = hk.get_parameter("b", [units], x.dtype, init=jnp.zeros)
    return w, b


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
  last = spec.parameter_layers[-1].name

  def layer_fn(layer, x):
    # The parameters hk.Linear / hk.Conv2D would create (same module names, shapes,
    # initialisers and rng order), computed by the one forward pass (`forward`).
    w_init = None
    if layer.name == last and output_init_scale is not None:
      w_init = hk.initializers.VarianceScaling(output_init_scale)
    w, b = _LayerParams(layer, w_init, name=layer.name)(x)
    return _PRE_ACTIVATION.get()(layer, x, w, b)

  def fn(observation):
    return forward.apply(spec.layers,
                         forward.scaled_input(spec, jnp.asarray(observation)), layer_fn)

  return hk.without_apply_rng(hk.transform(fn))


def init_params(spec: ns.NetworkSpec, key: jax.Array):
  """Initial parameters for a batch-1 dummy observation."""
  dummy = jnp.zeros((1,) + tuple(spec.input_shape), jnp.float32)
  return haiku_network(spec).init(key, dummy)
