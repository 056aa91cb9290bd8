"""Range observers for calibrating activations (and weights) before quantization.

Each observer is a pair of pure functions over a small NamedTuple state, usable
under jit; `qparams` turns the observed range into `(scale, zero_point)` with
`ops.compute_qparams` (Jacob et al. 2018, sec. 3: EMA ranges for activations).

* `MinMaxObserver`: running min / max over all observed batches.
* `MovingAverageMinMaxObserver`: `m <- momentum * m + (1 - momentum) * batch_min`
  (same for max); the first batch initialises the averages.
* `PercentileObserver`: running mean of the per-batch `(100 - p)`-th and `p`-th
  percentiles, clipping outliers (as used by TensorRT-style calibration).

`axis=None` observes per-tensor; `axis=k` keeps one range per channel of axis k.
"""
from __future__ import annotations

import dataclasses
from typing import NamedTuple, Optional

import jax.numpy as jnp

from actorq.quantization import ops


class RangeState(NamedTuple):
  """Observed range: `min`, `max` float32 `[]` or `[C]`; `count` int32 batches seen."""
  min: jnp.ndarray
  max: jnp.ndarray
  count: jnp.ndarray


def _batch_range(x, axis, lo_q=None, hi_q=None):
  x = jnp.asarray(x, jnp.float32)
  if lo_q is None:
    return ops.min_max(x, axis)
  if axis is None:
    flat = x.reshape(-1)
    return jnp.percentile(flat, lo_q), jnp.percentile(flat, hi_q)
  moved = jnp.moveaxis(x, axis, 0).reshape(x.shape[axis], -1)
  return jnp.percentile(moved, lo_q, axis=1), jnp.percentile(moved, hi_q, axis=1)


@dataclasses.dataclass(frozen=True)
class MinMaxObserver:
  axis: Optional[int] = None

  def init(self, num_channels: Optional[int] = None) -> RangeState:
    shape = () if self.axis is None else (num_channels,)
    return RangeState(jnp.full(shape, jnp.inf), jnp.full(shape, -jnp.inf),
                      jnp.zeros((), jnp.int32))

  def update(self, state: RangeState, x: jnp.ndarray) -> RangeState:
    lo, hi = _batch_range(x, self.axis)
    return RangeState(jnp.minimum(state.min, lo), jnp.maximum(state.max, hi),
                      state.count + 1)

  def qparams(self, state: RangeState, bits: int = 8, symmetric: bool = False):
    """`(scale, zero_point)`; an unobserved state yields the all-zero range."""
    lo = jnp.where(state.count > 0, state.min, 0.0)
    hi = jnp.where(state.count > 0, state.max, 0.0)
    return ops.compute_qparams(lo, hi, bits, symmetric)


@dataclasses.dataclass(frozen=True)
class MovingAverageMinMaxObserver(MinMaxObserver):
  momentum: float = 0.9

  def update(self, state: RangeState, x: jnp.ndarray) -> RangeState:
    lo, hi = _batch_range(x, self.axis)
    first = state.count == 0
    m = self.momentum
    return RangeState(jnp.where(first, lo, m * state.min + (1 - m) * lo),
                      jnp.where(first, hi, m * state.max + (1 - m) * hi),
                      state.count + 1)


@dataclasses.dataclass(frozen=True)
class PercentileObserver(MinMaxObserver):
  percentile: float = 99.9

  def __post_init__(self):
    if not 50.0 < self.percentile <= 100.0:
      raise ValueError(f"percentile={self.percentile} not allowed; allowed: (50, 100]")

  def update(self, state: RangeState, x: jnp.ndarray) -> RangeState:
    lo, hi = _batch_range(x, self.axis, 100.0 - self.percentile, self.percentile)
    n = state.count.astype(jnp.float32)
    first = state.count == 0
    return RangeState(jnp.where(first, lo, (state.min * n + lo) / (n + 1)),
                      jnp.where(first, hi, (state.max * n + hi) / (n + 1)),
                      state.count + 1)


def make_observer(kind: str, axis: Optional[int] = None, **kwargs) -> MinMaxObserver:
  """`kind` in {"minmax", "moving_average", "percentile"}."""
  kinds = {"minmax": MinMaxObserver, "moving_average": MovingAverageMinMaxObserver,
           "percentile": PercentileObserver}
  if kind not in kinds:
    raise ValueError(f"observer {kind!r} unknown; allowed: {sorted(kinds)}")
  return kinds[kind](axis=axis, **kwargs)
