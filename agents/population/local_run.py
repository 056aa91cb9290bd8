"""A population's one-process run (`actorq pbt --launch local`, `launch.pbt.train`): the
`PopulationBuilder`'s learner (N members in one vmapped update, PBT's exploit/explore) and
actor stepped in one process. The actor steps N x B environments as one vector
environment, each member's adder writes its own seeded in-process replay, and after each
vector step the learner takes the rounds the members owe (`learner.owed`, as `local.run`
asks its builder); when members are evaluated and exploit/explore runs is
`rounds.ReadyRounds`. A run is a function of its spec (seed included) on one machine."""
from __future__ import annotations

import time
from typing import Any, Dict, List, Sequence

import dm_env
import jax
import numpy as np

from actorq import core
from actorq.agents.population import builder as builder_lib
from actorq.agents.population import rounds as rounds_lib
from actorq.components import fault_points
from actorq.components.acting import loop as loop_lib
from actorq.components.envs import environments, seeding, vector_env


class PopulationRun:
  """One population run in one process: the builder's learner and actor, stepped by the
  loop of the module docstring, and what it records (rows, ready rounds, counters).

  Args:
    spec: the run's `launch.spec.RunSpec` (with `population`); read: env, seed, num_envs,
      steps (each member's), eval_every (its ready period), eval_episodes, and `to_json()`
      (kept in the checkpoint).
    builder: its `PopulationBuilder` (`launch.pbt.check(spec)`).
  """

  def __init__(self, spec: Any, builder: builder_lib.PopulationBuilder):
    self.spec = s = spec
    self.builder = builder
    self.n, self.b = builder.config.size, s.num_envs
    self.steps, self.ready_every = s.steps, s.eval_every
    self.max_episode_steps = loop_lib.DEFAULT_MAX_EPISODE_STEPS
    single = environments.make_environment(s.env, seed=s.seed)
    try:
      self.env_spec = environments.environment_spec(single)
    finally:
      single.close()
    self.networks = builder.make_networks(self.env_spec)
    key_init, key_replay = jax.random.split(jax.random.PRNGKey(s.seed))
    clients = builder.make_replay(self.env_spec, key_replay)
    self.learner = builder.make_local_learner(self.networks, self.env_spec, key_init, clients,
                                              s.seed)
    adders = builder.make_adders(clients, self.env_spec, self.b)
    self.actor = builder.make_local_actor(self.networks, self.env_spec, self.learner, adders,
                                          s.seed)
    # Wall-clock seconds of this session by part: acting (inference and action selection),
    # environment (vector env steps and adders), learning (all of `learner.learn`, of
    # which the learner's replay and update), evaluation (and exploit/explore).
    self.timings = {"act": 0.0, "environment": 0.0, "learn": 0.0, "evaluate": 0.0}
    self.actor_steps = self.actor.actor_steps  # the actor's counts (one array)
    # When members are evaluated and exploit/explore runs (population logic).
    self.rounds = rounds_lib.ReadyRounds(self.learner, self.actor, self.ready_every,
                                               self.steps)

  @property
  def rows(self) -> List[Dict[str, Any]]:
    """pbt.csv's rows so far (`ReadyRounds.rows`)."""
    return self.rounds.rows

  def apply_values(self, m: int) -> None:
    """Member m's values (`learner.values[m]`) into the learner's arrays and its actor."""
    self.learner.apply_values(m)
    self.actor.update_member(m)

  def _env(self, env, call: str, *args, during: str = "training"):
    """`env.<call>(*args)`; an exception the environment raises becomes one line
    (`core.EnvironmentFailure`) naming the environment, the call, the error and when (case
    B18); the population's state is that of the last whole vector step."""
    try:
      return getattr(env, call)(*args)
    except Exception as e:  # pylint: disable=broad-except (an environment's own error)
      text = str(e).strip().splitlines()
      what = f"{type(e).__name__}: {text[0]}" if text else type(e).__name__
      raise core.EnvironmentFailure(
          f"{self.spec.env}: the environment's {call}() raised {what} during "
          f"{during}, at {int(self.actor_steps.sum())} actor steps of the population "
          f"(members: {', '.join(str(int(n)) for n in self.actor_steps)})") from e

  def _evaluate(self, members: Sequence[int]) -> np.ndarray:
    """float [len(members)]: the actor's greedy evaluation of `members`, every member on
    the same start states (rows seeded seed + EVAL_SEED_OFFSET + i), all in one vector
    environment."""
    s, e = self.spec, self.spec.eval_episodes
    env = vector_env.make_vector_environment(
        s.env, len(members) * e, seed=s.seed + seeding.EVAL_SEED_OFFSET,
        max_episode_steps=self.max_episode_steps)
    try:
      return self.actor.evaluate(
          env, members, e, lambda env, call, *args: self._env(env, call, *args,
                                                              during="an evaluation"))
    finally:
      env.close()

  # -- checkpoints ------------------------------------------------------------------------
  def checkpoint(self) -> Dict[str, Any]:
    """Everything a resumed run continues from (numpy and plain Python): the learner's
    states, values and replays, the actor's counts and generator, the loop's counters and
    rows. Not kept (as in `local.run`): the episodes in progress and the environments'
    state."""
    return {"settings": self.spec.to_json(), **self.learner.save(), **self.actor.save(),
            **self.rounds.save()}

  def restore(self, saved: Dict[str, Any]) -> None:
    """Takes back a `checkpoint()` of a run with the same spec."""
    self.learner.restore(saved)
    self.actor.restore(saved)
    self.rounds.restore(saved)

  # -- the loop ---------------------------------------------------------------------------
  def run(self, logger_fn=None, on_ready=None, should_stop=None) -> bool:
    """Steps until every member has `steps` actor steps; `on_ready()` after each round of
    evaluations; returns False when `should_stop()` ended it first (checked once per
    vector step, where the population's state is whole)."""
    s, steps = self.spec, self.steps
    # A resumed run's environments start anew with another seed (their state is not
    # checkpointed), as `local.run` does.
    env = vector_env.make_vector_environment(
        s.env, self.n * self.b,
        seed=seeding.training_seed(s.seed, int(self.actor_steps.sum()), self.n * self.b),
        max_episode_steps=self.max_episode_steps)
    adders = self.actor.adders
    try:
      batch = self._env(env, "reset")
      rows = np.arange(self.n * self.b).reshape(self.n, self.b)
      for m in range(self.n):
        adders[m].add_first(np.arange(self.b), batch.observation[rows[m]])
      resetting = np.zeros(self.n * self.b, bool)
      while (self.actor_steps < steps).any() or self.rounds.evaluating():
        fault_points.point("acting")  # a test's signal lands between two vector steps
        if should_stop is not None and should_stop():
          return False
        if (self.actor_steps < steps).any():
          t0 = time.perf_counter()
          actions = self.actor.act(batch.observation)
          t1 = time.perf_counter()
          self.timings["act"] += t1 - t0
          batch = self._env(env, "step", actions)
          last = batch.step_type == dm_env.StepType.LAST
          for m in range(self.n):
            local_rows = np.flatnonzero(~resetting[rows[m]])
            local_rows = local_rows[:max(int(steps - self.actor_steps[m]), 0)]
            fresh = np.flatnonzero(resetting[rows[m]])
            if len(local_rows):
              g = rows[m][local_rows]
              adders[m].add(local_rows, actions[g], batch.reward[g], batch.discount[g],
                            batch.observation[g], last[g], [()] * len(local_rows))
            adders[m].flush()
            if len(fresh):
              adders[m].add_first(fresh, batch.observation[rows[m][fresh]])
            self.actor_steps[m] += len(local_rows)
            self.actor.act_counted[m] += len(local_rows)
          resetting = last
          t2 = time.perf_counter()
          self.timings["environment"] += t2 - t1
          self.learner.learn(self.learner.owed(self.actor_steps, self.actor.items_written()))
          self.timings["learn"] += time.perf_counter() - t2
        ready = self.rounds.due()
        if ready:
          t0 = time.perf_counter()
          scalars = self.rounds.record(ready, self._evaluate(ready))
          self.timings["evaluate"] += time.perf_counter() - t0
          if logger_fn is not None:
            for row in scalars:
              logger_fn(f"pbt_member{row.pop('member')}").write(
                  {k: v for k, v in row.items() if k != "copied_from"})
          if on_ready is not None:
            on_ready()
    finally:
      env.close()
    return True
