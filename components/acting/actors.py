"""A feed-forward actor: policy runtime -> action selector -> adder.

The policy *network* (observation -> outputs such as Q-values or action means) is run
by a policy runtime (fp32 JAX, or a quantized runtime); the cheap, agent-specific
*action selection* (epsilon-greedy, Gaussian noise, sampling) is a numpy function:

    selector(outputs: float32[output_size], rng: np.random.Generator, actor_step: int)
        -> (action, extras)

`extras` (a possibly empty nest of numpy arrays, e.g. behaviour logits) goes to the
adder with the action, so the table's signature must include it (case E3).

A selector may carry its form over K rows at once as a `batch` attribute (`with_batch`,
`core.BatchSelector`): `batch(outputs[K, output_size], rng, actor_steps int64[K]) ->
(actions[K, ...], extras)`, one array operation per step for the vectorized actors
(`BatchedFeedForwardActor`); `batch_form` falls back to the selector row by row.
"""
from __future__ import annotations

import time
from typing import Any, Callable

import dm_env
import numpy as np
import tree
from acme import core as acme_core

from actorq import core

Selector = core.Selector
BatchSelector = core.BatchSelector
_LAST = int(dm_env.StepType.LAST)


def with_batch(select: Selector, batch: BatchSelector) -> Selector:
  """`select` with its form over K rows attached as `select.batch` (returned).

  `batch(outputs float32[K, O], rng, actor_steps int64[K]) -> (actions [K, ...], extras)`
  gives row k what `select(outputs[k], rng, actor_steps[k])` gives (same dtype and
  shape), with extras `()` or the rows' extras stacked into a nest of `[K, ...]` arrays.
  Where it draws from `rng`, each batch form documents its order; most draw exactly what
  the row-by-row calls would (e.g. `standard_normal((K, A))` is K draws of `(A,)`).
  """
  select.batch = batch
  return select


def batch_form(selector: Selector) -> BatchSelector:
  """The selector's form over K rows: its `batch` attribute (`with_batch`), or else the
  selector called on each row in row order (its draws in that order), actions and
  extras stacked. K >= 1."""
  batch = getattr(selector, "batch", None)
  if batch is not None:
    return batch

  def per_row(outputs, rng, steps):
    pairs = [selector(outputs[k], rng, int(steps[k])) for k in range(len(outputs))]
    actions = np.stack([np.asarray(a) for a, _ in pairs])
    if not tree.flatten(pairs[0][1]):
      return actions, ()
    return actions, tree.map_structure(lambda *xs: np.stack([np.asarray(x) for x in xs]),
                                       *[e for _, e in pairs])

  return per_row


class NonFiniteOutputError(ValueError):
  """The policy network's outputs for an observation hold a NaN or inf; the message names
  the precision, the parameter version and where in the network it first appears. No
  action is ever selected from such outputs."""


class FeedForwardActor(acme_core.Actor):
  """An `acme.core.Actor` over a policy runtime.

  Args:
    runtime: `__call__(observation[1, ...]) -> float32[1, output_size]`, `version`.
    selector: maps one row of outputs to `(action, extras)`.
    variable_client: refreshes the runtime's parameters (None: fixed policy).
    adder: an acme adder, or None (evaluation).
    seed: seeds the selector's numpy generator.

  Attributes:
    num_steps: actions selected so far (drives exploration schedules; restored on resume).
    timings: cumulative seconds spent in `inference` (runtime call) and `adder`.
  """

  def __init__(self, runtime, selector: Selector, variable_client=None, adder=None,
               seed: int = 0):
    self._runtime = runtime
    self._selector = selector
    self._client = variable_client
    self._adder = adder
    self._rng = np.random.default_rng(seed)
    self._extras: Any = ()
    self.num_steps = 0
    self.timings = {"inference": 0.0, "adder": 0.0}

  @property
  def rng_state(self) -> dict:
    """The selector generator's state (checkpoints); assign it to continue the stream."""
    return self._rng.bit_generator.state

  @rng_state.setter
  def rng_state(self, state: dict) -> None:
    self._rng.bit_generator.state = state

  @property
  def runtime(self):
    """The policy runtime the actor acts with (`actorq.quantization.runtimes`)."""
    return self._runtime

  @property
  def policy_version(self) -> int:
    """The parameter version the actor acts with (-1 before the first load)."""
    return int(self._runtime.version)

  @property
  def variable_client(self):
    """The variable client refreshing the runtime (None: a fixed policy)."""
    return self._client

  def select_action(self, observation) -> Any:
    """Raises NonFiniteOutputError when the network's outputs are not all finite."""
    start = time.perf_counter()
    batch = np.asarray(observation)[None]
    outputs = self._runtime(batch)[0]
    self.timings["inference"] += time.perf_counter() - start
    if not np.isfinite(outputs).all():
      raise NonFiniteOutputError(
          f"the policy's outputs are not finite at {self._runtime.precision} (parameter "
          f"version {self._runtime.version}): {self._runtime.diagnose(batch)}")
    action, self._extras = self._selector(outputs, self._rng, self.num_steps)
    self.num_steps += 1
    return action

  def observe_first(self, timestep: dm_env.TimeStep) -> None:
    if self._adder is not None:
      start = time.perf_counter()
      self._adder.add_first(timestep)
      self.timings["adder"] += time.perf_counter() - start

  def observe(self, action, next_timestep: dm_env.TimeStep) -> None:
    if self._adder is not None:
      start = time.perf_counter()
      self._adder.add(action, next_timestep, extras=self._extras)
      self.timings["adder"] += time.perf_counter() - start

  def update(self, wait: bool = False) -> None:
    if self._client is not None:
      self._client.update(wait)


class BatchedFeedForwardActor(FeedForwardActor):
  """A `FeedForwardActor` for B environments at once (`loop.VectorActorLoop`).

  `select_actions` runs the policy runtime ONCE on the `[B, ...]` observations (every
  precision's runtime takes a batch; the int8 LiteRT interpreter is sized for B once),
  then the selector ONCE on the active rows' outputs (`batch_form(selector)`: its `batch`
  form, one array operation per step, else the selector row by row), with the active
  rows' actor steps `num_steps, num_steps + 1, ...` in row order, drawing from the one
  seeded generator (so a run stays a function of its seed). Inactive rows (being reset by
  the vector environment, which ignores their action) get `dummy_action` and use no
  randomness and no schedule step. The adder is a batched one
  (`adders.BatchedNStepTransitionAdder`, `adders.PerEnvAdders`): each env's steps go
  through its own adder state.

  Args:
    runtime, selector, variable_client, seed: as `FeedForwardActor`.
    adder: a batched adder, or None.
    dummy_action: the action sent for inactive rows (a valid action of the spec, e.g.
      `action_spec.generate_value()`).

  Attributes:
    num_steps: actions selected for active rows so far (drives exploration schedules).
    timings: cumulative seconds in `inference` (the runtime call), `select` (the
      selector) and `adder`.
  """

  def __init__(self, runtime, selector: Selector, variable_client=None, adder=None,
               seed: int = 0, *, dummy_action: Any):
    super().__init__(runtime, selector, variable_client, adder, seed)
    self._dummy = np.asarray(dummy_action)
    self._batch = batch_form(selector)
    self._row_extras: Any = ()  # () or, per row of the last batch, its extras nest
    self._offsets = np.arange(0, dtype=np.int64)
    self.timings["select"] = 0.0

  def select_actions(self, observations, active=None) -> np.ndarray:
    """Actions `[B, ...]` for observations `[B, ...]`; `active` bool [B] (None: all).

    Raises:
      NonFiniteOutputError: an active row's outputs are not all finite.
    """
    start = time.perf_counter()
    batch = np.asarray(observations)
    outputs = self._runtime(batch)
    mid = time.perf_counter()
    self.timings["inference"] += mid - start
    rows = outputs.shape[0]
    if active is not None:
      active = np.asarray(active, bool)
    if not np.isfinite(outputs).all():  # one reduction; the rows only when it fails
      bad = ~np.isfinite(outputs.reshape(rows, -1)).all(axis=1)
      if active is not None:
        bad &= active
      if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise NonFiniteOutputError(
            f"the policy's outputs are not finite at {self._runtime.precision} (parameter "
            f"version {self._runtime.version}), env {i} of {rows}: "
            f"{self._runtime.diagnose(batch[i:i + 1])}")
    if len(self._offsets) < rows:
      self._offsets = np.arange(rows, dtype=np.int64)
    index = None if active is None else np.flatnonzero(active)
    if index is None or len(index) == rows:  # every row
      actions, extras = self._batch(outputs, self._rng, self.num_steps + self._offsets[:rows])
      self.num_steps += rows
      index = None
    else:
      k = len(index)
      if k:
        chosen, extras = self._batch(outputs[index], self._rng,
                                     self.num_steps + self._offsets[:k])
        chosen = np.asarray(chosen)
        self.num_steps += k
        actions = np.empty((rows,) + chosen.shape[1:],
                           np.result_type(chosen.dtype, self._dummy.dtype))
        actions[...] = self._dummy
        actions[index] = chosen
      else:
        actions, extras = np.stack([self._dummy] * rows), ()
    self._row_extras = () if not tree.flatten(extras) else self._split_extras(
        extras, rows, index)
    self.timings["select"] += time.perf_counter() - mid
    return np.asarray(actions)

  @staticmethod
  def _split_extras(extras, rows: int, index) -> list:
    """The stacked extras as one nest per row of the batch (() on inactive rows)."""
    positions = range(rows) if index is None else index.tolist()
    out: list = [()] * rows
    for k, i in enumerate(positions):
      out[i] = tree.map_structure(lambda x, k=k: x[k], extras)
    return out

  def update_steps(self, steps: int) -> None:
    """`steps` (>= 1) calls of `update()` with nothing in between, at once: the variable
    client counts them in one call (`VariableClient.update(steps=...)`)."""
    if self._client is not None:
      if steps == 1:
        self._client.update()
      else:
        self._client.update(steps=steps)

  def observe_first(self, rows, observations) -> None:  # pylint: disable=arguments-differ
    """Episode starts of envs `rows` (int [K]) with `observations` [K, ...]."""
    if self._adder is not None:
      start = time.perf_counter()
      self._adder.add_first(rows, observations)
      self.timings["adder"] += time.perf_counter() - start

  def observe(self, rows, actions, batch) -> None:  # pylint: disable=arguments-differ
    """Writes the step of envs `rows` (int [K], distinct, increasing, or bool [B]: the
    rows where it is True): their `actions[rows]` and the rows of the
    `vector_env.BatchedTimeStep` `batch`; then flushes the adder (one batched write). A
    mask goes to the adder as it is, with the whole batch (`adders.BatchedNStepTransitionAdder.add`
    takes either form): no gathers."""
    if self._adder is not None:
      start = time.perf_counter()
      rows = np.asarray(rows)
      if rows.dtype == bool:
        extras = (() if not self._row_extras else
                  [self._row_extras[i] for i in np.flatnonzero(rows).tolist()])
        self._adder.add(rows, actions, batch.reward, batch.discount, batch.observation,
                        batch.step_type == _LAST, extras)
      elif len(rows):
        extras = (() if not self._row_extras else
                  [self._row_extras[i] for i in rows.tolist()])
        if len(rows) == len(actions):  # every row (distinct, in order): no gathers
          self._adder.add(rows, actions, batch.reward, batch.discount, batch.observation,
                          batch.step_type == _LAST, extras)
        else:
          self._adder.add(rows, actions[rows], batch.reward[rows], batch.discount[rows],
                          batch.observation[rows], batch.step_type[rows] == _LAST, extras)
      self._adder.flush()
      self.timings["adder"] += time.perf_counter() - start


class RecurrentActor(FeedForwardActor):
  """An actor that keeps a recurrent state (`quantization.runtimes.RecurrentRuntime`).

  The state (h, c), float32 [1, H] each, is zeroed by `observe_first` (a training
  episode's first step) and by `reset_state()` (what the loop calls at an evaluation
  episode's start, where nothing is observed). Every action's extras for the adder are
  `{"core_state": {"hidden": h, "cell": c}, "real": 1.0}` with the state *before* the
  step (the one the observation was processed from; acme's R2D2 stores the same), so a
  sequence read from replay can restart the network from its first step's state; acme's
  terminal step and zero padding carry zeros there, so `real` marks the acted steps.

  Args: as `FeedForwardActor`; `runtime` has `step(observation [1, ...], state) ->
  (outputs [1, O], state)` and `initial_state(batch_size)`.
  """

  def __init__(self, runtime, selector: Selector, variable_client=None, adder=None,
               seed: int = 0):
    super().__init__(runtime, selector, variable_client, adder, seed)
    self._state = runtime.initial_state(1)

  @property
  def state(self):
    """The current recurrent state (h, c), float32 [1, H] each."""
    return self._state

  def reset_state(self) -> None:
    self._state = self._runtime.initial_state(1)

  def select_action(self, observation) -> Any:
    """Raises NonFiniteOutputError when the network's outputs are not all finite."""
    start = time.perf_counter()
    batch = np.asarray(observation)[None]
    prev = self._state
    outputs, state = self._runtime.step(batch, prev)
    outputs = outputs[0]
    self.timings["inference"] += time.perf_counter() - start
    if not np.isfinite(outputs).all():
      raise NonFiniteOutputError(
          f"the policy's outputs are not finite at {self._runtime.precision} (parameter "
          f"version {self._runtime.version}): {self._runtime.diagnose(batch, prev)}")
    action, _ = self._selector(outputs, self._rng, self.num_steps)
    self._extras = {"core_state": {"hidden": prev[0][0], "cell": prev[1][0]},
                    "real": np.float32(1.0)}
    self._state = state
    self.num_steps += 1
    return action

  def observe_first(self, timestep: dm_env.TimeStep) -> None:
    self.reset_state()
    super().observe_first(timestep)


def batched(actor: FeedForwardActor, adder, dummy_action: Any) -> BatchedFeedForwardActor:
  """The batched twin of a builder's `FeedForwardActor`: the same runtime, selector,
  variable client and generator (state included), with a batched `adder`."""
  # pylint: disable=protected-access
  out = BatchedFeedForwardActor(actor._runtime, actor._selector, actor._client, adder,
                                dummy_action=dummy_action)
  out._rng = actor._rng
  out.num_steps = actor.num_steps
  return out


def linear_schedule(start: float, end: float, steps: int) -> Callable[[int], float]:
  """`start` linearly to `end` over `steps` steps, then `end`."""
  steps = max(int(steps), 1)

  def value(step):
    if np.ndim(step):  # int [K] -> float64 [K], the same float operations per element
      if step[0] >= steps and step[-1] >= steps:  # past the decay (frac = 1.0)
        return np.full(len(step), float(start + 1.0 * (end - start)))
      frac = np.minimum(np.maximum(step, 0) / steps, 1.0)
      return start + frac * (end - start)
    frac = min(max(step, 0) / steps, 1.0)
    return float(start + frac * (end - start))

  value.vectorized = True  # takes an int array of steps as well (`schedule_values`)
  return value


def schedule_values(schedule: Callable[[int], float], steps: np.ndarray) -> np.ndarray:
  """float64 [K]: `schedule` at each of `steps` (int [K]); one array operation for a
  schedule marked `vectorized` (`linear_schedule`), else one call per step."""
  if getattr(schedule, "vectorized", False):
    return np.asarray(schedule(np.asarray(steps)), np.float64)
  return np.array([schedule(int(s)) for s in steps], np.float64)


def on_shared_schedule(selector: Selector, num_actors: int) -> Selector:
  """`selector` with its step counted on the run's summed actor steps: one of `num_actors`
  actors that step at about the same rate calls it at its own step k, and it runs at step
  `k * num_actors`, about the steps all actors have taken together.

  Every other schedule of a run counts summed actor steps: the step limit, the evaluations
  and, through samples-per-insert, the learner steps that the learning-rate and
  importance-sampling schedules count. An exploration schedule on each actor's own steps
  (epsilon decay, a random warm-up) would instead stretch N-fold in those units with N
  actors, and a distributed run would explore longer, relative to its learning, than the
  single-process run of the same config. (RLlib's epsilon schedules count the global
  timestep for the same reason.) With `num_actors` 1 it returns `selector` itself.

  Raises:
    ValueError: `num_actors` is not an int >= 1.
  """
  if isinstance(num_actors, bool) or not isinstance(num_actors, int) or num_actors < 1:
    raise ValueError(f"num_actors must be an integer >= 1, got {num_actors!r}")
  if num_actors == 1:
    return selector
  inner = batch_form(selector)

  def select(outputs, rng: np.random.Generator, step: int):
    return selector(outputs, rng, step * num_actors)

  return with_batch(select, lambda outputs, rng, steps: inner(outputs, rng, steps * num_actors))


def epsilon_greedy(epsilon: Callable[[int], float]) -> Selector:
  """Epsilon-greedy over Q-values; `epsilon(actor_step)` in [0, 1]. Actions are int32.

  One row (float [A]) draws `u = rng.random()` and, when `u < epsilon(step)`, a uniform
  action `rng.integers(A)`. The batch form (float [K, A]) draws the K uniforms first,
  `rng.random(K)`, then one `rng.integers(A)` per exploring row in row order
  (`rng.integers(A, size=M)`): each row has the same distribution as one row's, from a
  differently ordered stream (a single-process run with B > 1 stays a function of its
  seed; B = 1 uses the one-row form)."""

  def select(q_values: np.ndarray, rng: np.random.Generator, step: int):
    if rng.random() < epsilon(step):
      return np.int32(rng.integers(q_values.shape[-1])), ()
    return np.int32(np.argmax(q_values)), ()

  def batch(q_values: np.ndarray, rng: np.random.Generator, steps: np.ndarray):
    actions = np.argmax(q_values, axis=-1).astype(np.int32)
    explore = rng.random(len(actions)) < schedule_values(epsilon, steps)
    count = int(np.count_nonzero(explore))
    if count:
      actions[explore] = rng.integers(q_values.shape[-1], size=count)
    return actions, ()

  return with_batch(select, batch)


def greedy(q_values: np.ndarray, rng: np.random.Generator, step: int):
  """The greedy (evaluation) selector over Q-values (batch form: argmax per row)."""
  del rng, step
  return np.int32(np.argmax(q_values)), ()


with_batch(greedy, lambda q_values, rng, steps: (np.argmax(q_values, axis=-1).astype(np.int32),
                                                 ()))
