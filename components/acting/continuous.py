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

A stochastic policy network may instead emit a diagonal Gaussian `[mean[A], log_std[A]]`
(`2A` outputs, linear head; `split_gaussian` clips the log-std to [LOG_STD_MIN,
LOG_STD_MAX]); `tanh_gaussian_bounded` samples `u ~ N(mean, std^2)` outside the policy
runtime and squashes it, `a = from_unit(tanh(u))` (SAC's policy, Haarnoja et al. 2018).

`uniform_warmup` wraps a behaviour selector so that an actor's first actions are uniform
in the box (TD3's pure-exploration start, Fujimoto et al. 2018 sec. 6.1).

Selectors follow `actorq.components.acting.actors.Selector`:
`(outputs: float32[A] or [2A], rng, actor_step) -> (float32[*action_shape], ())`; each
carries its batch form (`actors.with_batch`: outputs `[K, A]` or `[K, 2A]` -> float32
`[K, *action_shape]`), which draws exactly what K calls of the one-row form draw, in row
order (`standard_normal((K, *shape))` and `uniform(lo, hi, (K, *shape))` fill row by row),
so the actions are the same bit for bit.
"""
from __future__ import annotations

from typing import Tuple

import numpy as np
from dm_env import specs as dm_specs

from actorq.components.acting import actors

# Bounds of a Gaussian policy head's log-std (natural log of the std, in the units of the
# Gaussian's variable): std in [6.7e-3, 7.4].
LOG_STD_MIN = -5.0
LOG_STD_MAX = 2.0


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


def _check_rows(outputs: np.ndarray, shape) -> np.ndarray:
  """`_check_outputs` of each row of `outputs` [K, ...]: float32 [K, *shape]."""
  u = np.asarray(outputs, np.float32)
  rows = u.shape[0]
  if u.size != rows * int(np.prod(shape)):
    raise ValueError(f"policy output has {u.size // max(rows, 1)} values per row, the action "
                     f"shape {shape} needs {int(np.prod(shape))}")
  return u.reshape((rows,) + tuple(shape))


def deterministic_bounded(action_spec):
  """The greedy (evaluation) selector: rescale `u` to the bounds and clip."""
  lo, hi = bounds(action_spec)

  def select(outputs: np.ndarray, rng: np.random.Generator, step: int):
    del rng, step
    u = _check_outputs(outputs, lo.shape)
    return np.clip(from_unit(u, lo, hi), lo, hi).astype(np.float32), ()

  def batch(outputs: np.ndarray, rng: np.random.Generator, steps: np.ndarray):
    del rng, steps
    u = _check_rows(outputs, lo.shape)
    return np.clip(from_unit(u, lo, hi), lo, hi).astype(np.float32), ()

  return actors.with_batch(select, batch)


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

  def batch(outputs: np.ndarray, rng: np.random.Generator, steps: np.ndarray):
    del steps
    u = _check_rows(outputs, lo.shape)
    a = from_unit(u, lo, hi) + scale * rng.standard_normal(u.shape).astype(np.float32)
    return np.clip(a, lo, hi).astype(np.float32), ()

  return actors.with_batch(select, batch)


def split_gaussian(outputs, xp=np):
  """`[..., 2A] -> (mean [..., A], log_std [..., A])`, the log-std clipped to
  [LOG_STD_MIN, LOG_STD_MAX]. `xp`: numpy (actors) or jax.numpy (learners)."""
  a = outputs.shape[-1] // 2
  return outputs[..., :a], xp.clip(outputs[..., a:], LOG_STD_MIN, LOG_STD_MAX)


def tanh_gaussian_bounded(action_spec, evaluation: bool = False):
  """The selector of a tanh-squashed Gaussian policy whose network emits
  `[mean[A], log_std[A]]` (float32 `[2A]`).

  Training: `u = mean + exp(log_std) * eps` with `eps ~ N(0, I)`, `a = from_unit(tanh(u))`;
  evaluation: `a = from_unit(tanh(mean))`. Both clipped to the bounds (float32 rounding
  of the rescale never leaves the box). Extras: none (the learner samples its own
  actions).

  Raises:
    UnboundedActionSpecError: for an action spec that is not a finite float box.
  """
  lo, hi = bounds(action_spec)
  size = int(np.prod(lo.shape))

  def select(outputs: np.ndarray, rng: np.random.Generator, step: int):
    del step
    out = np.asarray(outputs, np.float32).reshape(-1)
    if out.size != 2 * size:
      raise ValueError(f"policy output has {out.size} values, a Gaussian over the action "
                       f"shape {lo.shape} needs {2 * size} (mean and log-std)")
    mean, log_std = split_gaussian(out)
    u = mean if evaluation else (
        mean + np.exp(log_std) * rng.standard_normal(mean.shape).astype(np.float32))
    a = from_unit(np.tanh(u).reshape(lo.shape), lo, hi)
    return np.clip(a, lo, hi).astype(np.float32), ()

  def batch(outputs: np.ndarray, rng: np.random.Generator, steps: np.ndarray):
    del steps
    rows = np.shape(outputs)[0]
    out = np.asarray(outputs, np.float32).reshape(rows, -1)
    if out.shape[1] != 2 * size:
      raise ValueError(f"policy output has {out.shape[1]} values, a Gaussian over the action "
                       f"shape {lo.shape} needs {2 * size} (mean and log-std)")
    mean, log_std = split_gaussian(out)
    u = mean if evaluation else (
        mean + np.exp(log_std) * rng.standard_normal(mean.shape).astype(np.float32))
    a = from_unit(np.tanh(u).reshape((rows,) + lo.shape), lo, hi)
    return np.clip(a, lo, hi).astype(np.float32), ()

  return actors.with_batch(select, batch)


def uniform_warmup(selector, action_spec, steps: int):
  """`selector` preceded by `steps` uniformly random actions.

  For actor steps `0 .. steps - 1` the action is `rng.uniform(minimum, maximum)` (float32,
  the action's shape; the policy's outputs are ignored, the extras are `()`); from actor
  step `steps` on, `selector(outputs, rng, step)`. The step is the actor's own
  (`actors.Actor.num_steps`, restored on resume); a distributed actor node counts it on the
  run's summed steps (`actors.on_shared_schedule`), so N actors together take about `steps`
  random actions, as one single-process actor does. Fujimoto et al. 2018 (TD3), sec. 6.1: "a purely exploratory
  policy for the first 10000 time steps ... and the first 1000 time steps for the
  remaining environments", which removes the dependence on the initial policy.

  Args:
    selector: the behaviour selector to run after the warm-up.
    action_spec: a dm_env `BoundedArray` (finite float box).
    steps: actor steps of uniform actions (int >= 0; 0 returns `selector` itself).

  Raises:
    ValueError: `steps` is not an int >= 0; `UnboundedActionSpecError`.
  """
  if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 0:
    raise ValueError(f"uniform warm-up steps must be an int >= 0, got {steps!r}")
  lo, hi = bounds(action_spec)
  if steps == 0:
    return selector

  inner = actors.batch_form(selector)

  def select(outputs: np.ndarray, rng: np.random.Generator, step: int):
    if step < steps:
      return rng.uniform(lo, hi).astype(np.float32), ()
    return selector(outputs, rng, step)

  def batch(outputs: np.ndarray, rng: np.random.Generator, actor_steps: np.ndarray):
    # The rows' steps increase in row order: the warm-up rows are a prefix.
    warm = int(np.count_nonzero(np.asarray(actor_steps) < steps))
    if warm == 0:
      return inner(outputs, rng, actor_steps)
    uniform = rng.uniform(lo, hi, (warm,) + lo.shape).astype(np.float32)
    if warm == len(actor_steps):
      return uniform, ()
    rest, extras = inner(outputs[warm:], rng, actor_steps[warm:])
    if extras != ():
      raise ValueError("uniform_warmup's batch form needs a selector without extras when "
                       "warm-up and selected rows meet in one batch")
    return np.concatenate([uniform, np.asarray(rest, np.float32)]), ()

  return actors.with_batch(select, batch)
