"""Rollouts of an on-policy agent through Reverb: a queue, the sequence adder that
writes `[T + 1]`-step rollouts, and the iterator that batches them.

Data path (one builder for every launch mode):

    actor (policy runtime, any precision) -> stochastic selector, extras = behaviour
    log-prob (+ logits / raw action) -> acme `SequenceAdder` (rollouts of T transitions,
    T + 1 steps, consecutive rollouts overlap by one step for the bootstrap value, and
    they run on across episode ends) -> Reverb *queue* (each rollout is consumed once,
    in order; a full queue blocks the actors: IMPALA's back-pressure) -> batches of
    `[B, T + 1]` rollouts -> learner.
"""
from __future__ import annotations

from typing import Any, Iterator

import jax
import numpy as np
import reverb
from acme import specs
from acme.adders import base as adders_base
from acme.adders import reverb as adders_reverb

from actorq.components.replay import local_replay, reverb_replay as replay

def rollout_queue(name: str, environment_spec: specs.EnvironmentSpec, extras: Any,
                  rollout_length: int, max_size: int) -> reverb.Table:
  """A Reverb queue of rollouts of `rollout_length + 1` steps whose signature includes
  the actor's extras (case E3). Items are sampled once, oldest first; a full queue
  blocks inserts (back-pressure on actors)."""
  signature = adders_reverb.SequenceAdder.signature(environment_spec, extras,
                                                    sequence_length=rollout_length + 1)
  return reverb.Table.queue(name=name, max_size=int(max_size), signature=signature)


class CountingAdder(adders_base.Adder):
  """Wraps the rollout adder and counts the rollouts it has written.

  With `EndBehavior.CONTINUE`, `sequence_length = T + 1` and `period = T`, acme writes
  a rollout when its stored step count s reaches T + 1, 2T + 1, ...; every action is
  one step and every episode end one more (the terminal step).
  """

  def __init__(self, adder: adders_base.Adder, rollout_length: int):
    self._adder = adder
    self._t = int(rollout_length)
    self.stored_steps = 0

  @property
  def items_written(self) -> int:
    return 0 if self.stored_steps < self._t + 1 else (self.stored_steps - 1) // self._t

  def add_first(self, timestep):
    self._adder.add_first(timestep)

  def add(self, action, next_timestep, extras=()):
    self._adder.add(action, next_timestep, extras)
    self.stored_steps += 2 if next_timestep.last() else 1

  def reset(self):
    self._adder.reset()

  def close(self) -> None:
    self._adder.close()


def make_rollout_adder(client: reverb.Client, table: str, environment_spec: specs.EnvironmentSpec,
                       extras: Any, rollout_length: int) -> CountingAdder:
  """acme's `SequenceAdder` writing `[T + 1]`-step rollouts every T steps across
  episode ends, behind spec validation (case E3) and an item counter.

  Each rollout is flushed when it is created (`max_in_flight_items=0`): a learner that
  is owed a rollout can sample it at once, and a full queue blocks the actor there.
  """
  adder = adders_reverb.SequenceAdder(
      client, sequence_length=rollout_length + 1, period=rollout_length,
      priority_fns={table: None}, max_in_flight_items=0,
      end_of_episode_behavior=adders_reverb.EndBehavior.CONTINUE)
  return CountingAdder(replay.ValidatingAdder(adder, environment_spec, extras), rollout_length)


class RolloutIterator:
  """Batches of `batch_size` rollouts from a queue, as numpy `reverb.ReplaySample`s with
  leading dim B.

  Rollouts are read one at a time by a single reader (insertion order) and stacked here,
  not by `Dataset.batch`: a reader whose rate-limiter timeout expires while the queue is
  empty (normal between learner steps, e.g. during an evaluation) would otherwise drop
  the rollouts of a partial batch it already took off the queue. A reader that timed out
  in the background is replaced once; a wait longer than `timeout_ms` *after* the
  request raises (case R1).

  Raises (from `next`):
    replay.ReplayTimeoutError: no rollout within the timeout, or the server is gone.
  """

  def __init__(self, server_address: str, table: str, batch_size: int,
               timeout_ms: int = replay.DEFAULT_TIMEOUT_MS):
    self._address, self._table = server_address, table
    self._batch_size = int(batch_size)
    self._timeout_ms = int(timeout_ms)
    self._reader = None
    self._pending: list = []

  def _new_reader(self):
    ds = reverb.TrajectoryDataset.from_table_signature(
        server_address=self._address, table=self._table, max_in_flight_samples_per_worker=1,
        rate_limiter_timeout_ms=self._timeout_ms)
    return replay.numpy_iterator(ds)

  def _next_item(self):
    for attempt in (0, 1):
      if self._reader is None:
        self._reader = self._new_reader()
      try:
        return next(self._reader)
      except replay.ReplayTimeoutError:
        self._reader = None
        if attempt == 1:
          raise

  def __iter__(self):
    return self

  def __next__(self) -> reverb.ReplaySample:
    while len(self._pending) < self._batch_size:
      self._pending.append(self._next_item())
    items, self._pending = self._pending, []
    return jax.tree_util.tree_map(lambda *x: np.stack(x), *items)


def make_iterator(client: Any, table: str, batch_size: int) -> Iterator[reverb.ReplaySample]:
  """Batches of `batch_size` rollouts of `table`, oldest first: a `RolloutIterator` over
  Reverb, or the in-process replay's own queue sampling (single-process runs)."""
  if isinstance(client, local_replay.LocalReplayClient):
    return client.iterator(table, batch_size)
  return RolloutIterator(client.server_address, table, batch_size)
