"""The one actor/environment loop (Acme's `EnvironmentLoop` shape), with hooks.

Single-process training, the distributed actor and evaluator nodes, evaluation,
`actorq eval` and the benchmark's acting measurement all run `ActorLoop`; what differs
between them is in their hooks (learner steps, counting, logging, evaluation,
checkpoints, frames) and in `learn`.

One step of the loop:

    action = actor.select_action(observation)
    timestep = environment.step(action)        # the episode's step cap may make it LAST
    actor.observe(action, timestep)            # learn=True: the adder writes it
    steps += 1; hooks.on_step(loop, action, timestep)
    actor.update()                             # learn=True: the variable client's pull
    if timestep.last(): hooks.on_episode_end(loop, stats); reset; observe_first;
                        hooks.on_episode_start(loop, timestep)

An episode that reaches `max_episode_steps` without ending is ended by the loop as a
*truncation*: its last timestep becomes LAST with the environment's discount kept (1.0),
so a learner bootstraps from it (the same as a Gymnasium time limit, case E2), and the
next episode starts with a reset. `should_stop()` is asked after every step; when it is
true the loop returns at once (the episode in progress is abandoned).

An exception the environment raises in `reset()` or `step()` leaves the loop as
`actorq.core.EnvironmentFailure`, one line naming the call, the actor step, the episode,
the exception and where it was raised (the original is its `__cause__`); a launcher adds
the environment id.
"""
from __future__ import annotations

import dataclasses
import os
import time
import traceback
from typing import Any, Callable, List, Optional, Sequence

import dm_env
import numpy as np

from actorq import core
from actorq.components.acting import actors

# An episode that never ends is capped at this many steps unless the caller says
# otherwise: 108,000 frames of Atari at frame skip 4 (Machado et al. 2018), far above
# any time limit of the classic-control and DeepMind Control Suite tasks (500-1,000).
DEFAULT_MAX_EPISODE_STEPS = 27_000
_LAST = int(dm_env.StepType.LAST)


@dataclasses.dataclass(frozen=True)
class EpisodeStats:
  """One finished episode: undiscounted return, length (steps), wall seconds, and
  whether the loop's step cap ended it (`truncated_by_cap`)."""
  episode_return: float
  episode_length: int
  seconds: float
  truncated_by_cap: bool = False

  @property
  def steps_per_second(self) -> float:
    return self.episode_length / max(self.seconds, 1e-9)


class Hook:
  """What a caller adds to the loop; every method is optional (no-op here)."""

  def on_episode_start(self, loop: "ActorLoop", timestep: dm_env.TimeStep) -> None:
    """After the reset (and `observe_first`) of every episode."""

  def on_step(self, loop: "ActorLoop", action: Any, timestep: dm_env.TimeStep) -> None:
    """After `observe` of every step (`loop.steps` already counts it)."""

  def on_episode_end(self, loop: "ActorLoop", stats: EpisodeStats) -> None:
    """After the last step of an episode (before the next reset)."""


class ActorLoop:
  """An actor acting in an environment.

  Args:
    environment: a `dm_env.Environment`.
    actor: `select_action(observation)`; with `learn`, also `observe_first`, `observe`
      and `update()` (an `acme.core.Actor`).
    hooks: called in order (see `Hook`).
    learn: True for a training actor (its adder observes, its variable client updates);
      False for evaluation and acting-only measurements (only `select_action`, and a
      `RecurrentActor`'s `reset_state()` at every episode start).
    should_stop: asked after every step; True ends `run` at once.
    max_episode_steps: the step cap of an episode (>= 1; see the module docstring).

  Attributes:
    steps: actor steps taken (a resumed run may set it before `run`).
    episodes: episodes finished (likewise).

  Raises:
    ValueError: `max_episode_steps` < 1.
  """

  def __init__(self, environment: dm_env.Environment, actor, *, hooks: Sequence[Hook] = (),
               learn: bool = True, should_stop: Optional[Callable[[], bool]] = None,
               max_episode_steps: int = DEFAULT_MAX_EPISODE_STEPS):
    if (isinstance(max_episode_steps, bool) or not isinstance(max_episode_steps, (int, np.integer))
        or max_episode_steps < 1):
      raise ValueError(f"max_episode_steps must be an integer >= 1, got {max_episode_steps!r}")
    self.environment = environment
    self.actor = actor
    self._hooks = list(hooks)
    self._learn = bool(learn)
    self._should_stop = should_stop or (lambda: False)
    self._stop_given = should_stop is not None
    self._cap = int(max_episode_steps)
    self.steps = 0
    self.episodes = 0

  def _failure(self, call: str, error: Exception, length: int) -> core.EnvironmentFailure:
    """The one-line `EnvironmentFailure` for `error` raised by the environment's `call`
    during step `length + 1` of the current episode (0: its reset)."""
    where = ""
    frames = traceback.extract_tb(error.__traceback__)
    if frames:
      last = frames[-1]
      where = f" (at {os.path.basename(last.filename)}:{last.lineno} in {last.name})"
    text = str(error).strip().splitlines()
    what = f"{type(error).__name__}: {text[0]}" if text else type(error).__name__
    when = (f"at actor step {self.steps + 1} (step {length + 1} of episode "
            f"{self.episodes + 1})" if call == "step" else
            f"at the start of episode {self.episodes + 1} (after {self.steps} actor steps)")
    return core.EnvironmentFailure(f"the environment's {call}() raised {what}{where} {when}")

  def _reset(self) -> dm_env.TimeStep:
    try:
      timestep = self.environment.reset()
    except Exception as e:  # pylint: disable=broad-except
      raise self._failure("reset", e, 0) from e
    if self._learn:
      self.actor.observe_first(timestep)
    elif isinstance(self.actor, actors.RecurrentActor):
      self.actor.reset_state()  # nothing is observed here, but a new episode starts
    for hook in self._hooks:
      hook.on_episode_start(self, timestep)
    return timestep

  def run(self, num_episodes: Optional[int] = None,
          num_steps: Optional[int] = None) -> List[EpisodeStats]:
    """Acts until `num_episodes` episodes end or `num_steps` steps are taken (in this
    call), whichever comes first, or until `should_stop()`; with neither count, until
    `should_stop()`. A run that ends mid-episode abandons that episode.

    Returns:
      the episodes finished in this call, in order.

    Raises:
      ValueError: a count < 1.
      core.EnvironmentFailure: the environment raised in `reset()` or `step()`.
    """
    for name, value in (("num_episodes", num_episodes), ("num_steps", num_steps)):
      if value is not None and int(value) < 1:
        raise ValueError(f"{name} must be >= 1, got {value}")
    finished: List[EpisodeStats] = []
    taken = 0
    timestep = self._reset()
    episode_return, length, start = 0.0, 0, time.time()
    while True:
      action = self.actor.select_action(timestep.observation)
      try:
        timestep = self.environment.step(action)
      except Exception as e:  # pylint: disable=broad-except
        raise self._failure("step", e, length) from e
      length += 1
      capped = length >= self._cap and not timestep.last()
      if capped:  # a truncation: LAST with the environment's discount (bootstrap)
        timestep = timestep._replace(step_type=dm_env.StepType.LAST)
      if self._learn:
        self.actor.observe(action, timestep)
      self.steps += 1
      taken += 1
      episode_return += float(np.asarray(timestep.reward))
      for hook in self._hooks:
        hook.on_step(self, action, timestep)
      if self._learn:
        self.actor.update()
      done = num_steps is not None and taken >= num_steps
      if timestep.last():
        self.episodes += 1
        stats = EpisodeStats(episode_return, length, time.time() - start, capped)
        finished.append(stats)
        for hook in self._hooks:
          hook.on_episode_end(self, stats)
        if num_episodes is not None and len(finished) >= num_episodes:
          return finished
        if not done and not self._should_stop():
          timestep = self._reset()
          episode_return, length, start = 0.0, 0, time.time()
      if done or self._should_stop():
        return finished


class VectorActorLoop(ActorLoop):
  """The batched variant of `ActorLoop`: B environments (`vector_env.VectorEnvironment`)
  and one batched actor (`actors.BatchedFeedForwardActor`): one inference for the B rows
  per iteration, one batched adder call, and every env's transitions through its own
  adder state. For B = 1 use `ActorLoop` (the launchers do).

  One iteration:

      actions = actor.select_actions(observations, active)   # one runtime call, [B]
      batch = environment.step(actions)    # rows LAST before are reset now (FIRST)
      actor.observe(active, actions, batch); actor.observe_first(reset rows, batch)
      per moving row, in row order: steps += 1; hooks.on_step(loop, action_i, timestep_i);
        actor.update(); if LAST: hooks.on_episode_end(loop, stats_i)
      per reset row: hooks.on_episode_start(loop, timestep_i)

  so hooks see one call per env transition, as from `ActorLoop` (`steps` counts
  transitions, summed over the rows; `EveryNSteps` fires at its exact multiples). The
  returns and lengths are kept as arrays over the rows. When no hook overrides
  `on_step`, no `should_stop` is given and the actor is a `BatchedFeedForwardActor`,
  nothing happens between two rows' steps but the variable client's counting, so the
  rows are counted at once: `steps` advances to each ending row (whose
  `on_episode_end` hooks see it as before) and one `actor.update_steps(k)` after them
  stands for the iteration's k `update()` calls (`VariableClient.update(steps=k)`: at
  most one pull, whose parameters the next iteration acts with, as before; an
  episode-end hook sees the parameters its iteration acted with). Returns are summed over
  the whole batch (a row being reset has reward 0, `vector_env.BatchedTimeStep`). A run
  that reaches `num_steps` part-way through an iteration counts (and writes) only the
  rows up to it; the others' steps are abandoned. The episode step cap is the vector
  environment's own time limit (`vector_env.make_vector_environment`).

  Raises:
    ValueError: as `ActorLoop`.
    core.EnvironmentFailure: the vector environment raised in `reset()` or `step()`.
  """

  def run(self, num_episodes: Optional[int] = None,
          num_steps: Optional[int] = None) -> List[EpisodeStats]:
    """As `ActorLoop.run`; the episodes are those of every row, in the order they end."""
    for name, value in (("num_episodes", num_episodes), ("num_steps", num_steps)):
      if value is not None and int(value) < 1:
        raise ValueError(f"{name} must be >= 1, got {value}")
    env, actor, hooks = self.environment, self.actor, self._hooks
    b = env.num_envs
    # Hooks that do something per step (the base class's on_step is a no-op).
    step_hooks = [h for h in hooks if type(h).on_step is not Hook.on_step]
    # Without per-step hooks or a stop condition nothing happens between the rows' steps
    # but the variable client's counting: one `update_steps(k)` stands for k updates.
    per_row = (bool(step_hooks) or self._stop_given
               or not isinstance(actor, actors.BatchedFeedForwardActor))
    finished: List[EpisodeStats] = []
    taken = 0
    try:
      batch = env.reset()
    except Exception as e:  # pylint: disable=broad-except
      raise self._failure("reset", e, 0) from e
    all_rows = np.arange(b)
    if self._learn:
      actor.observe_first(all_rows, batch.observation)
    for i in range(b):
      for hook in hooks:
        hook.on_episode_start(self, batch.row(i))
    returns = np.zeros(b, np.float64)
    lengths = np.zeros(b, np.int64)
    starts = np.full(b, time.time())
    resetting = np.zeros(b, bool)

    def end_episode(i: int) -> bool:
      """Row i's episode ended: its stats and hooks; True when `num_episodes` are done."""
      self.episodes += 1
      stats = EpisodeStats(float(returns[i]), int(lengths[i]), time.time() - starts[i],
                           bool(lengths[i] >= self._cap))
      finished.append(stats)
      for hook in hooks:
        hook.on_episode_end(self, stats)
      return num_episodes is not None and len(finished) >= num_episodes

    while True:
      active = ~resetting  # rows that step now (the others are being reset)
      actions = actor.select_actions(batch.observation, active)
      try:
        batch = env.step(actions)
      except Exception as e:  # pylint: disable=broad-except
        raise self._failure("step", e, int(lengths.max())) from e
      last = batch.step_type == _LAST  # never on a row being reset (it is FIRST)
      if num_steps is not None and num_steps - taken < b:  # the run may end in this step:
        moving = np.flatnonzero(active)[:max(num_steps - taken, 0)]  # the rows counted
        active = np.zeros(b, bool)
        active[moving] = True
        last = last & active
      any_reset = bool(resetting.any())
      if self._learn:
        actor.observe(active, actions, batch)
        if any_reset:
          fresh = np.flatnonzero(resetting)
          actor.observe_first(fresh, batch.observation[fresh])
      lengths += active
      returns += batch.reward  # 0 on the rows being reset (FIRST); cut rows end the run
      if per_row:
        for i in np.flatnonzero(active).tolist():
          self.steps += 1
          taken += 1
          if step_hooks:
            timestep = batch.row(i)
            for hook in step_hooks:
              hook.on_step(self, actions[i], timestep)
          if self._learn:
            actor.update()
          if last[i] and end_episode(i):
            return finished
          if (num_steps is not None and taken >= num_steps) or self._should_stop():
            return finished
      else:
        before = self.steps  # `steps` reaches each ending row for its episode-end hooks
        if last.any():
          counted = np.cumsum(active)  # rows counted up to each row, in row order
          ends = np.flatnonzero(last).tolist()
        else:
          ends = ()
        for i in ends:
          self.steps = before + int(counted[i])
          if end_episode(i):
            taken += self.steps - before
            if self._learn:
              actor.update_steps(self.steps - before)
            return finished
        count = int(np.count_nonzero(active))
        self.steps = before + count
        taken += count
        if self._learn and count:
          actor.update_steps(count)
        if num_steps is not None and taken >= num_steps:
          return finished
      if any_reset:
        returns[resetting], lengths[resetting], starts[resetting] = 0.0, 0, time.time()
        if hooks:
          for i in np.flatnonzero(resetting).tolist():
            timestep = batch.row(i)
            for hook in hooks:
              hook.on_episode_start(self, timestep)
      resetting = last


def summarize(episodes: Sequence[EpisodeStats]) -> dict:
  """Mean/std of the undiscounted return and the mean length (steps) of `episodes`."""
  returns = [e.episode_return for e in episodes]
  return {"episode_return": float(np.mean(returns)),
          "episode_return_std": float(np.std(returns)),
          "episode_length": float(np.mean([e.episode_length for e in episodes]))}


def evaluate(environment: dm_env.Environment, actor, episodes: int,
             should_stop: Optional[Callable[[], bool]] = None,
             max_episode_steps: int = DEFAULT_MAX_EPISODE_STEPS) -> Optional[dict]:
  """Runs `episodes` full episodes with `actor` (which neither learns nor adds).

  Returns:
    `summarize` of them, or None when `should_stop()` ended the evaluation first.

  Raises:
    ValueError: `episodes` < 1.
  """
  if int(episodes) < 1:
    raise ValueError(f"episodes must be >= 1, got {episodes}")
  loop = ActorLoop(environment, actor, learn=False, should_stop=should_stop,
                   max_episode_steps=max_episode_steps)
  finished = loop.run(num_episodes=episodes)
  return summarize(finished) if len(finished) == episodes else None


class EpisodeLogger(Hook):
  """Writes one row per finished episode (`train.csv`, `actor_<i>.csv`): actor steps,
  episodes, return, length, steps/s, the policy version acted with, and `extra`."""

  def __init__(self, logger, **extra: Any):
    self._logger = logger
    self._extra = extra

  def on_episode_end(self, loop: ActorLoop, stats: EpisodeStats) -> None:
    self._logger.write({"actor_steps": loop.steps, "episodes": loop.episodes,
                        "episode_return": stats.episode_return,
                        "episode_length": stats.episode_length,
                        "steps_per_second": stats.steps_per_second,
                        "policy_version": loop.actor.policy_version, **self._extra})


class EveryNSteps(Hook):
  """Calls `fn(loop)` when `loop.steps` reaches a multiple of `period` (actor steps)."""

  def __init__(self, period: int, fn: Callable[[ActorLoop], None]):
    if int(period) < 1:
      raise ValueError(f"period must be >= 1 actor step, got {period}")
    self._period = int(period)
    self._fn = fn

  def on_step(self, loop: ActorLoop, action: Any, timestep: dm_env.TimeStep) -> None:
    if loop.steps % self._period == 0:
      self._fn(loop)


class EveryNSeconds(Hook):
  """Calls `fn(loop)` after a step once `seconds` have passed since the last call (or
  since construction)."""

  def __init__(self, seconds: float, fn: Callable[[ActorLoop], None]):
    self._seconds = float(seconds)
    self._fn = fn
    self._last = time.time()

  def on_step(self, loop: ActorLoop, action: Any, timestep: dm_env.TimeStep) -> None:
    if time.time() - self._last >= self._seconds:
      self._fn(loop)
      self._last = time.time()
