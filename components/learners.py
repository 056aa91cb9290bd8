"""What every actorq learner does besides its update: Acme's `core.Learner` with the
step bookkeeping (counter, logger), the step count and save/restore of a jitted
training state.

A subclass keeps its whole training state in `self._state`, a NamedTuple with a scalar
`steps` field (learner steps taken), calls `self._init_bookkeeping(counter, logger)` in
its constructor and ends each `step()` with `self._commit(new_state, metrics)` (the default
`step` does exactly that with `self._iterator` and a jitted `self._sgd_step`): a step
whose metrics (loss, gradient norm, ...) are not all finite is not taken (the learner
keeps its state from before it, which a checkpoint may then hold) and raises
`actorq.core.NonFiniteLossError` naming the step and the metrics.
"""
from __future__ import annotations

import math
import time
from typing import Any, Callable, Iterator, Mapping, Optional, Tuple

import jax
import jax.numpy as jnp
import numpy as np
from acme import core as acme_core
from acme.utils import counting, loggers

from actorq import core
from actorq.components.replay import priorities as priorities_lib


class PackedMetrics(Mapping):
  """A step's scalar metrics as one float32 vector [M] with their names (a read-only
  mapping name -> float32 scalar). Read to the host with one transfer (`host()`): a dict
  of M device scalars costs M transfers (~50 us for 5 on one core, against ~1 us)."""

  def __init__(self, names: Tuple[str, ...], vector: Any):
    self.names, self.vector = names, vector

  def host(self) -> dict:
    """name -> Python float, from one device-to-host read."""
    return dict(zip(self.names, np.asarray(self.vector).tolist()))

  def __getitem__(self, name: str):
    return self.vector[self.names.index(name)]

  def __iter__(self) -> Iterator[str]:
    return iter(self.names)

  def __len__(self) -> int:
    return len(self.names)


def jit_with_packed_metrics(fn: Callable) -> Callable:
  """`jax.jit(fn)` for a step function whose LAST output is a dict of scalar metrics: the
  compiled function stacks them into one float32 vector, and the returned callable gives
  the other outputs unchanged followed by a `PackedMetrics`.

  The names are recorded when `fn` is traced (the dict's order); metrics are cast to
  float32 (the logger writes them as floats). Values are not otherwise changed.
  """
  names: list = []

  def packed(*args):
    *outputs, metrics = fn(*args)
    names[:] = list(metrics)
    return (*outputs, jnp.stack([jnp.asarray(metrics[n], jnp.float32) for n in names]))

  jitted = jax.jit(packed)

  def call(*args):
    *outputs, vector = jitted(*args)
    return (*outputs, PackedMetrics(tuple(names), vector))

  return call


class JaxLearner(acme_core.Learner):
  """Base for learners whose state is one NamedTuple `self._state` (see module doc)."""

  _state: Any

  def _init_bookkeeping(self, counter: Optional[counting.Counter],
                        logger: Optional[loggers.Logger]) -> None:
    self._counter = counter or counting.Counter()
    self._logger = logger or loggers.NoOpLogger()
    self._timestamp: Optional[float] = None

  @property
  def step_count(self) -> int:
    """Learner steps taken (restored ones included). Read from the device once per state:
    the count is asked for several times a step, and each read is a host transfer."""
    steps = self._state.steps  # the cache keeps this scalar alive, not the whole state
    cached = getattr(self, "_step_count_cache", None)
    if cached is None or cached[0] is not steps:
      cached = self._step_count_cache = (steps, int(steps))
    return cached[1]

  def _check_finite(self, metrics: Mapping[str, Any], detail: str = "") -> Mapping[str, float]:
    """The metrics as floats (read to the host once: the logger needs them as floats
    anyway, so the check costs no extra device synchronisation). A message names the
    non-finite ones, losses first.

    Raises:
      core.NonFiniteLossError: some metric is NaN or infinite (`detail` is appended).
    """
    if isinstance(metrics, PackedMetrics):
      values = metrics.host()  # one transfer
    else:
      values = {k: float(v) for k, v in jax.device_get(dict(metrics)).items()}  # one transfer
    bad = [f"{k}={values[k]}" for k in sorted(values, key=lambda k: ("loss" not in k, k))
           if not math.isfinite(values[k])]
    if bad:
      raise core.NonFiniteLossError(
          f"learner step {self.step_count + 1} is not finite ({', '.join(bad)}); the learner "
          f"keeps its state from before that step{detail}")
    return values

  def step(self) -> None:
    """One update on the next replay sample: ``self._sgd_step(self._state, sample.data)``
    (a jitted pure function returning the new state and its metrics), committed with
    `_commit`. A learner whose update needs more (priorities to write back, rollouts)
    overrides this.

    Raises:
      core.NonFiniteLossError: the step's metrics are not all finite (see `_commit`).
    """
    sample = next(self._iterator)
    state, metrics = self._sgd_step(self._state, sample.data)
    self._commit(state, metrics)

  def _commit(self, state: Any, metrics: Mapping[str, Any]) -> None:
    """Takes `state` (the training state after this step) and records the step.

    Raises:
      core.NonFiniteLossError: some metric is NaN or infinite; `state` is dropped.
    """
    values = self._check_finite(metrics)
    self._state = state
    self._record_step(values)

  def _commit_with_priorities(self, state: Any, metrics: Mapping[str, Any], client: Any,
                              table: str, keys: Any, priorities: Any) -> None:
    """Writes the sampled items' new `priorities` (float [B]) to `table` of the replay
    `client` (`priorities.update_priorities`), then `_commit`s the step.

    Raises:
      core.NonFiniteLossError: a priority is not finite because the loss is not (named).
      ValueError: other invalid priorities (named by `update_priorities`).
    """
    try:
      priorities_lib.update_priorities(client, table, keys, priorities)
    except ValueError as e:  # NaN TD errors: name the non-finite loss, if that is why
      self._check_finite(metrics, f" ({e})")
      raise
    self._commit(state, metrics)

  def _record_step(self, metrics: Mapping[str, Any]) -> None:
    """Counts one learner step (with the wall-clock seconds since the previous one, 0 for
    the first) and logs `learner_steps` with the step's scalar metrics as floats."""
    now = time.time()
    elapsed = now - self._timestamp if self._timestamp else 0.0
    self._timestamp = now
    self._counter.increment(steps=1, walltime=elapsed)
    self._logger.write({"learner_steps": self.step_count,
                        **{k: float(v) for k, v in metrics.items()}})

  def get_variables(self, names):
    """`policy` (online parameters), `target` (target-network parameters) and `version`
    (learner steps) of one consistent state snapshot (also when read from another
    thread), for a state with `params` and `target_params`."""
    state = self._state
    out = {"policy": state.params, "target": state.target_params, "version": int(state.steps)}
    return [out[name] for name in names]

  def save(self):
    """The training state as host (numpy) arrays."""
    return jax.device_get(self._state)

  def restore(self, state) -> None:
    """Restores a state from `save()` (a NamedTuple or the plain tuple a checkpoint keeps)."""
    self._state = jax.device_put(type(self._state)(*state))
