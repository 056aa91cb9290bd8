"""A feed-forward actor: policy runtime -> action selector -> adder.

The policy *network* (observation -> outputs such as Q-values or action means) is run
by a policy runtime (fp32 JAX, or a quantized runtime); the cheap, agent-specific
*action selection* (epsilon-greedy, Gaussian noise, sampling) is a numpy function:

    selector(outputs: float32[output_size], rng: np.random.Generator, actor_step: int)
        -> (action, extras)

`extras` (a possibly empty nest of numpy arrays, e.g. behaviour logits) goes to the
adder with the action, so the table's signature must include it (case E3).
"""
from __future__ import annotations

import time
from typing import Any, Callable

import dm_env
import numpy as np
from acme import core as acme_core

from actorq import core

Selector = core.Selector


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


def linear_schedule(start: float, end: float, steps: int) -> Callable[[int], float]:
  """`start` linearly to `end` over `steps` steps, then `end`."""
  steps = max(int(steps), 1)

  def value(step: int) -> float:
    frac = min(max(step, 0) / steps, 1.0)
    return float(start + frac * (end - start))

  return value


def epsilon_greedy(epsilon: Callable[[int], float]) -> Selector:
  """Epsilon-greedy over Q-values; `epsilon(actor_step)` in [0, 1]. Actions are int32."""

  def select(q_values: np.ndarray, rng: np.random.Generator, step: int):
    if rng.random() < epsilon(step):
      return np.int32(rng.integers(q_values.shape[-1])), ()
    return np.int32(np.argmax(q_values)), ()

  return select


def greedy(q_values: np.ndarray, rng: np.random.Generator, step: int):
  """The greedy (evaluation) selector over Q-values."""
  del rng, step
  return np.int32(np.argmax(q_values)), ()
