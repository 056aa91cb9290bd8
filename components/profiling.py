"""Timing instrumentation wrapped around an agent from the outside.

`InstrumentedBuilder(builder)` is a drop-in builder for `actorq.launch.local.run`: it
returns the agent's own objects wrapped in thin proxies that time what the
single-process loop does with them, without changing behaviour:

* the training actor (`TimedActor`): `select_action` (policy inference + action
  selection), `observe`/`observe_first` (adder), `update` (loading a pulled version
  into the runtime happens here), and the environment step, measured as the interval
  between the end of `select_action` and the start of the following `observe` (the
  loop does nothing else in between: `timestep = env.step(action)`);
* the variable source the actors pull from (`TimedSource`): fetch seconds, the
  publisher's conversion seconds inside them, payload bytes, the last payload;
* the learner (`TimedLearner`): seconds in `step()`; the dataset iterator
  (`TimedIterator`): seconds in `next()` (sampling), so update = step - sample;
* the evaluation actor: `update(wait=True)` marks the start of an evaluation
  (`local.run` calls it first thing in every evaluation); `end_evaluation()` from the
  loop's `progress` callback (called right after) closes it, so evaluation time can be
  taken out of training wall-clock.

All times are `time.perf_counter()` seconds.
"""
from __future__ import annotations

import threading
import time
from typing import Iterator, List, Optional

from actorq.components.acting import variable_client


class TimedIterator:
  """Wraps an iterator; `seconds` is the total time spent in `next()`, `count` the items."""

  def __init__(self, iterator: Iterator):
    self._iterator = iterator
    self.seconds = 0.0
    self.count = 0

  def __iter__(self):
    return self

  def __next__(self):
    start = time.perf_counter()
    try:
      return next(self._iterator)
    finally:
      self.seconds += time.perf_counter() - start
      self.count += 1


class _Proxy:
  """Delegates every attribute it does not define to the wrapped object."""

  def __init__(self, inner):
    object.__setattr__(self, "_inner", inner)

  def __getattr__(self, name):
    return getattr(object.__getattribute__(self, "_inner"), name)


class TimedLearner(_Proxy):
  """A learner whose `step()` calls are timed: `step_seconds` (all of them), `steps`, and
  `first_step_seconds` (the first call alone: jit compilation of the update included)."""

  def __init__(self, learner):
    super().__init__(learner)
    object.__setattr__(self, "step_seconds", 0.0)
    object.__setattr__(self, "first_step_seconds", 0.0)
    object.__setattr__(self, "steps", 0)

  def step(self):
    start = time.perf_counter()
    try:
      return self._inner.step()
    finally:
      took = time.perf_counter() - start
      if self.steps == 0:
        object.__setattr__(self, "first_step_seconds", took)
      object.__setattr__(self, "step_seconds", self.step_seconds + took)
      object.__setattr__(self, "steps", self.steps + 1)


class TimedSource(_Proxy):
  """A variable source (e.g. `PolicyServer`) whose `get_variables` calls are timed.

  Attributes:
    fetch_seconds: total seconds in `get_variables` (any thread).
    convert_seconds: the part of it the wrapped publisher spent converting in the
      calling thread (difference of its `thread_convert_seconds()` across each call;
      0 for a source without that method).
    pulls, versions: calls that returned a payload, and the distinct versions returned
      (a variable client's ``"version"`` check counts in fetch_seconds only).
    last_payload: the last payload returned.
  """

  def __init__(self, source):
    super().__init__(source)
    for name, value in (("fetch_seconds", 0.0), ("convert_seconds", 0.0), ("pulls", 0),
                        ("versions", set()), ("last_payload", None), ("_lock", threading.Lock())):
      object.__setattr__(self, name, value)

  def _convert_total(self) -> float:
    # Per thread, not the publisher-wide stats["convert_seconds"]: an evaluation actor
    # pulling through the same publisher converts a new version in its own thread, and
    # counting that in this call made fetch - convert negative (pull_transfer came out 0).
    # Looked up on the class: a remote source (a Courier client) answers any attribute
    # with a remote call, which the learner node does not serve.
    per_thread = getattr(type(self._inner), "thread_convert_seconds", None)
    return float(per_thread(self._inner)) if callable(per_thread) else 0.0

  def get_variables(self, names=("policy",)):
    before = self._convert_total()
    start = time.perf_counter()
    out = self._inner.get_variables(names)
    elapsed = time.perf_counter() - start
    converted = self._convert_total() - before
    with self._lock:
      object.__setattr__(self, "fetch_seconds", self.fetch_seconds + elapsed)
      object.__setattr__(self, "convert_seconds", self.convert_seconds + converted)
      if list(names) != [variable_client.VERSION]:  # a client's version check is no pull
        object.__setattr__(self, "pulls", self.pulls + 1)
        payload = out[0]
        self.versions.add(int(getattr(payload, "version", -1)))
        object.__setattr__(self, "last_payload", payload)
    return out


class TimedActor(_Proxy):
  """The training actor, timed per call (see the module docstring).

  Attributes (seconds): `inference_s`, `adder_s`, `update_s`, `env_s`; `steps` (actions
  selected); `first_time`: perf_counter of the first `observe_first` (start of acting);
  `client_at_start`: the variable client's stats (`actor_client_stats`) at that moment, so
  that the initial pull the builder makes before acting (`make_actor`) can be told apart
  from the pulls made while acting.
  """

  def __init__(self, actor):
    super().__init__(actor)
    for name in ("inference_s", "adder_s", "update_s", "env_s"):
      object.__setattr__(self, name, 0.0)
    object.__setattr__(self, "steps", 0)
    object.__setattr__(self, "first_time", None)
    object.__setattr__(self, "client_at_start", {})
    object.__setattr__(self, "_selected_at", None)

  @property
  def num_steps(self):
    return self._inner.num_steps

  @num_steps.setter
  def num_steps(self, value):
    self._inner.num_steps = value

  def _add(self, name, seconds):
    object.__setattr__(self, name, getattr(self, name) + seconds)

  def select_action(self, observation):
    start = time.perf_counter()
    action = self._inner.select_action(observation)
    end = time.perf_counter()
    self._add("inference_s", end - start)
    object.__setattr__(self, "steps", self.steps + 1)
    object.__setattr__(self, "_selected_at", end)
    return action

  def observe_first(self, timestep):
    start = time.perf_counter()
    if self.first_time is None:
      object.__setattr__(self, "first_time", start)
      object.__setattr__(self, "client_at_start", actor_client_stats(self))
    self._inner.observe_first(timestep)
    self._add("adder_s", time.perf_counter() - start)
    object.__setattr__(self, "_selected_at", None)

  def observe(self, action, next_timestep):
    start = time.perf_counter()
    if self._selected_at is not None:
      self._add("env_s", start - self._selected_at)
      object.__setattr__(self, "_selected_at", None)
    self._inner.observe(action, next_timestep)
    self._add("adder_s", time.perf_counter() - start)

  def update(self, wait: bool = False):
    start = time.perf_counter()
    self._inner.update(wait)
    self._add("update_s", time.perf_counter() - start)


class EvalActor(_Proxy):
  """The evaluation actor: `update(wait=True)` opens an evaluation interval."""

  def __init__(self, actor, marks: List[float]):
    super().__init__(actor)
    object.__setattr__(self, "_marks", marks)

  def update(self, wait: bool = False):
    if wait:
      self._marks.append(time.perf_counter())
    return self._inner.update(wait)


class InstrumentedBuilder:
  """Wraps an agent builder; everything not overridden is the builder's own.

  `make_actor` calls with an adder make training actors, calls without one evaluation
  actors (as in `actorq.launch.local.run`). One builder may serve several training
  actors (the actor threads of a `local_mt` program share it): each is timed on its own,
  `actor` and `source` are the first one's.

  Attributes:
    actor (TimedActor), learner (TimedLearner), dataset (TimedIterator), source
    (TimedSource of the first training actor), eval_seconds (closed evaluation
    intervals), eval_intervals [(start, end)].
  """

  def __init__(self, builder):
    self._builder = builder
    self.actor: Optional[TimedActor] = None
    self.learner: Optional[TimedLearner] = None
    self.dataset: Optional[TimedIterator] = None
    self.source: Optional[TimedSource] = None
    self._eval_marks: List[float] = []
    self.eval_intervals: List[tuple] = []

  def __getattr__(self, name):
    # Private and dunder names are never delegated: unpickling (a distributed node
    # receives the builder pickled) looks up `__setstate__` before `_builder` is set.
    if name.startswith("_"):
      raise AttributeError(name)
    return getattr(self._builder, name)

  def make_dataset_iterator(self, replay_client):
    self.dataset = TimedIterator(self._builder.make_dataset_iterator(replay_client))
    return self.dataset

  def make_learner(self, *args, **kwargs):
    self.learner = TimedLearner(self._builder.make_learner(*args, **kwargs))
    return self.learner

  def make_actor(self, random_key, policy, environment_spec, variable_source, adder=None):
    if adder is not None:
      source = TimedSource(variable_source)
      actor = TimedActor(self._builder.make_actor(
          random_key, policy, environment_spec, source, adder))
      if self.actor is None:
        self.source, self.actor = source, actor
      return actor
    return EvalActor(self._builder.make_actor(random_key, policy, environment_spec,
                                              variable_source, adder), self._eval_marks)

  def end_evaluation(self, now: Optional[float] = None) -> None:
    """Closes the open evaluation interval, if any (call right after an evaluation)."""
    if self._eval_marks:
      start = self._eval_marks.pop()
      self._eval_marks.clear()
      self.eval_intervals.append((start, time.perf_counter() if now is None else now))

  @property
  def eval_seconds(self) -> float:
    return float(sum(end - start for start, end in self.eval_intervals))

  def snapshot(self) -> dict:
    """What this process's wrapped objects have measured so far (plain floats and ints,
    for a distributed node to send over Courier): ``"actor"`` (seconds in
    inference/adder/update/env, steps, and the variable client's pulls, bytes, fetch and
    load seconds) once a training actor exists, ``"learner"`` (step seconds, steps) and
    ``"dataset"`` (seconds in next(), batches) once a learner exists. Each key is absent
    where this process made no such object."""
    out = {}
    if self.actor is not None:
      out["actor"] = actor_snapshot(self.actor)
    if self.learner is not None:
      out["learner"] = {"step_s": self.learner.step_seconds, "steps": self.learner.steps}
    if self.dataset is not None:
      out["dataset"] = {"next_s": self.dataset.seconds, "batches": self.dataset.count}
    return out


def actor_snapshot(actor) -> dict:
  """A `TimedActor`'s seconds so far (inference_s, adder_s, update_s, env_s), its steps
  and its variable client's stats (`actor_client_stats`) as plain numbers; {} for an
  actor that is not timed."""
  if not isinstance(actor, TimedActor):
    return {}
  return {"inference_s": actor.inference_s, "adder_s": actor.adder_s,
          "update_s": actor.update_s, "env_s": actor.env_s, "steps": actor.steps,
          "client": actor_client_stats(actor)}


def actor_client_stats(actor) -> dict:
  """The `VariableClient.stats` of a `FeedForwardActor` (through proxies), or {}."""
  inner = actor
  while isinstance(inner, _Proxy):
    inner = object.__getattribute__(inner, "_inner")
  client = getattr(inner, "_client", None)
  return dict(getattr(client, "stats", {}) or {})

