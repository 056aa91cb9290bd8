"""Bounded continuous actions: from a tanh-squashed policy output to the environment's box.

A deterministic policy network (e.g. `ns.mlp(..., output_activation="tanh")`) emits
`u in [-1, 1]^A`. Actors map it to the action spec `[minimum, maximum]` with

    a = minimum + (u + 1) / 2 * (maximum - minimum)                     (rescale)
    a = clip(a + sigma * (maximum - minimum) / 2 * eps, minimum, maximum),  eps ~ N(0, I)

so `sigma` is measured in units of the *half* action range, i.e. in the units of the
tanh output (sigma = 0.3 on a [-1, 1] action is Acme's D4PG default, absolute std 0.3;
on [0, 10] it is an absolute std of 1.5). The final clip guarantees every action lies
inside the bounds, and a saturated output (u = +-1) gives exactly the bounds (handed
case E4). Learners use `to_unit` to map stored actions back to `[-1, 1]`.

Selectors follow `actorq.components.actors.Selector`:
`(outputs: float32[A], rng, actor_step) -> (float32[*action_shape], ())`.
"""
from __future__ import annotations

from typing import Tuple

import numpy as np
from dm_env import specs as dm_specs


class UnboundedActionSpecError(ValueError):
  """The action spec is not a finite, non-empty float box."""


def bounds(action_spec) -> Tuple[np.ndarray, np.ndarray]:
  """float32 `(minimum, maximum)` broadcast to the action shape.

  Raises:
    UnboundedActionSpecError: for a discrete spec, a spec without bounds, non-finite
      bounds, or minimum >= maximum in some dimension.
  """
  if isinstance(action_spec, dm_specs.DiscreteArray) or not isinstance(
      action_spec, dm_specs.BoundedArray):
    raise UnboundedActionSpecError(
        f"a bounded continuous action spec (dm_env BoundedArray) is needed, got {action_spec!r}")
  shape = tuple(action_spec.shape)
  lo = np.broadcast_to(np.asarray(action_spec.minimum, np.float32), shape).copy()
  hi = np.broadcast_to(np.asarray(action_spec.maximum, np.float32), shape).copy()
  if not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi))):
    raise UnboundedActionSpecError(
        f"action bounds must be finite, got minimum {lo} and maximum {hi}")
  if np.any(lo >= hi):
    raise UnboundedActionSpecError(
        f"action minimum must be < maximum in every dimension, got {lo} and {hi}")
  return lo, hi


def from_unit(u, minimum, maximum):
  """Maps `u in [-1, 1]` to `[minimum, maximum]` (numpy or jax arrays, broadcasting)."""
  return minimum + (u + 1.0) * 0.5 * (maximum - minimum)


def to_unit(a, minimum, maximum):
  """Inverse of `from_unit`: `[minimum, maximum]` to `[-1, 1]`."""
  return 2.0 * (a - minimum) / (maximum - minimum) - 1.0


def _check_outputs(outputs: np.ndarray, shape) -> np.ndarray:
  u = np.asarray(outputs, np.float32)
  if u.size != int(np.prod(shape)):
    raise ValueError(f"policy output has {u.size} values, the action shape {shape} needs "
                     f"{int(np.prod(shape))}")
  return u.reshape(shape)


def deterministic_bounded(action_spec):
  """The greedy (evaluation) selector: rescale `u` to the bounds and clip."""
  lo, hi = bounds(action_spec)

  def select(outputs: np.ndarray, rng: np.random.Generator, step: int):
    del rng, step
    u = _check_outputs(outputs, lo.shape)
    return np.clip(from_unit(u, lo, hi), lo, hi).astype(np.float32), ()

  return select


def gaussian_bounded(action_spec, sigma: float):
  """Exploration selector: rescale, add Gaussian noise, clip to the bounds.

  Args:
    action_spec: a dm_env `BoundedArray`.
    sigma: noise std in units of half the action range (>= 0; 0 is deterministic).

  Raises:
    ValueError: for a negative or non-finite sigma; `UnboundedActionSpecError`.
  """
  sigma = float(sigma)
  if not np.isfinite(sigma) or sigma < 0:
    raise ValueError(f"exploration noise sigma must be finite and >= 0, got {sigma}")
  lo, hi = bounds(action_spec)
  scale = (sigma * 0.5 * (hi - lo)).astype(np.float32)

  def select(outputs: np.ndarray, rng: np.random.Generator, step: int):
    del step
    u = _check_outputs(outputs, lo.shape)
    a = from_unit(u, lo, hi) + scale * rng.standard_normal(lo.shape).astype(np.float32)
    return np.clip(a, lo, hi).astype(np.float32), ()

  return select
