"""A population as a Launchpad program's agent (issue 52): the environment family that the
program's nodes (`launch.distributed_nodes`) use for a `PopulationBuilder`, a row of
`launch.experiment.ENVIRONMENTS` beside the single-agent and multi-agent ones.

  * actor node: one vector environment of N x B rows (rows m*B .. m*B+B-1: member m's),
    stepped by `PopulationLoop`; the builder's actor (`PopulationActor` over a
    `LearnerView` of the learner node) acts for every member, each member's rows written
    by its own adder into its own Reverb table (`PopulationBuilder.member_builder`);
  * learner node: the builder's learner, one vmapped round per step on the N members'
    batches; it serves every member's parameters and values;
  * evaluator node: every `eval_every` actor steps (summed: N x ready_every) it evaluates
    EVERY member greedily on the same start states and hands the returns to the
    learner's `record_round` (`LearnerNode.learner_call`): pbt.csv's rows of that round
    and PBT's exploit/explore, in the learner, between two of its steps.

What differs from one process (`launch.pbt`): the members act, learn and are evaluated
concurrently, so a run is not a function of its seed alone (as any program's); a
member's ready points are the population's summed actor steps / N (not its own count)
and all members are evaluated together; an int8 member's payload is quantized on the
actor without bias correction.
"""
from __future__ import annotations

import time
from typing import Any, Dict, List, Optional

import dm_env
import numpy as np

from actorq.agents.population import builder as builder_lib
from actorq.components.acting import loop as loop_lib
from actorq.components.envs import single_agent, vector_env
from actorq.components.envs.seeding import training_seed


class PopulationLoop:
  """A program's population actor in its vector environment of N x B rows: every vector
  step the actor acts for every member, each member's rows go to its adder, and the
  hooks see one `on_step` per actor step (a resetting row is none) and one
  `on_episode_end` per finished episode; the actor pulls the learner's members every
  `update_period` vector steps. Attributes `steps`, `episodes`, `actor` as
  `loop.ActorLoop`'s."""

  def __init__(self, env, actor, num_envs: int, hooks=(), should_stop=None,
               update_period: int = 1):
    self.env, self.actor, self.b = env, actor, int(num_envs)
    self.hooks, self.should_stop = list(hooks), should_stop
    self.update_period = int(update_period)
    self.steps = self.episodes = 0

  def run(self) -> List[loop_lib.EpisodeStats]:
    actor, env, n, b = self.actor, self.env, self.actor.n, self.b
    rows = np.arange(n * b).reshape(n, b)
    returns, lengths = np.zeros(n * b), np.zeros(n * b, np.int64)
    starts = np.full(n * b, time.time())
    finished: List[loop_lib.EpisodeStats] = []
    batch = env.reset()
    for m in range(n):
      actor.adders[m].add_first(np.arange(b), batch.observation[rows[m]])
    resetting = np.zeros(n * b, bool)
    vector_steps = 0
    while self.should_stop is None or not self.should_stop():
      if vector_steps % self.update_period == 0:
        actor.update()
      vector_steps += 1
      actions = actor.act(batch.observation)
      batch = env.step(actions)
      last = batch.step_type == dm_env.StepType.LAST
      for m in range(n):
        moving, fresh = np.flatnonzero(~resetting[rows[m]]), np.flatnonzero(resetting[rows[m]])
        if len(moving):
          g = rows[m][moving]
          actor.adders[m].add(moving, actions[g], batch.reward[g], batch.discount[g],
                              batch.observation[g], last[g], [()] * len(moving))
        actor.adders[m].flush()
        if len(fresh):
          actor.adders[m].add_first(fresh, batch.observation[rows[m][fresh]])
        actor.actor_steps[m] += len(moving)
      moved = np.flatnonzero(~resetting)
      returns[moved] += batch.reward[moved]
      lengths[moved] += 1
      for i in moved:
        self.steps += 1
        for hook in self.hooks:
          hook.on_step(self, actions[i], None)
        if last[i]:
          self.episodes += 1
          stats = loop_lib.EpisodeStats(float(returns[i]), int(lengths[i]),
                                        time.time() - starts[i])
          finished.append(stats)
          for hook in self.hooks:
            hook.on_episode_end(self, stats)
          returns[i], lengths[i], starts[i] = 0.0, 0, time.time()
      resetting = last
    return finished


class PopulationEnvironments:
  """The environment family of a `PopulationBuilder` (`launch.experiment.ENVIRONMENTS`;
  see the module docstring)."""

  @staticmethod
  def matches(builder) -> bool:
    return isinstance(builder, builder_lib.PopulationBuilder)

  def make(self, config, seed: int):
    """A vector environment of N x `num_envs` rows (row i seeded `seed + i`, `seed` taken
    through `training_seed` as the single-agent family does)."""
    rows = config.builder.config.size * config.num_envs
    if seed >= config.seed:
      seed = training_seed(config.seed, seed - config.seed, rows)
    return vector_env.make_vector_environment(config.env_id, rows, seed=seed,
                                              max_episode_steps=config.max_episode_steps)

  def bind(self, builder, env):
    return builder, env.environment_spec()

  def make_actor(self, config, parts, random_key, replay_client, variable_source):
    return single_agent.make_actor_over_batched_adder(config, parts, random_key,
                                                      replay_client, variable_source)

  def make_loop(self, config, env, actor, hooks, should_stop=None):
    hooks = [make(actor) for make in config.training_hooks] + list(hooks)
    return PopulationLoop(env, actor, config.num_envs, hooks, should_stop,
                          config.builder.member.config.variable_update_period)

  def episode_logger(self, logger, precision: Optional[str]) -> loop_lib.Hook:
    del precision  # (each member's own)
    return loop_lib.EpisodeLogger(logger)

  def evaluate(self, config, parts, actor, seed: int, should_stop=None,
               actor_steps: int = 0) -> Optional[Dict[str, Any]]:
    """Every member's mean greedy return over `eval_episodes` episodes on the same start
    states (rows seeded `seed` + i), handed to the learner's `record_round` with the run's
    summed `actor_steps` (the counter's when the evaluator began); the row of eval.csv:
    the best member's return (episode_return) and each member's (return_member<m>)."""
    del parts
    n, e = actor.n, config.eval_episodes
    if should_stop is not None and should_stop():
      return None
    env = vector_env.make_vector_environment(config.env_id, n * e, seed=seed,
                                             max_episode_steps=config.max_episode_steps)
    try:
      returns = actor.evaluate(env, range(n), e, lambda env, call, *a: getattr(env, call)(*a))
    finally:
      env.close()
    actor.learner.source.learner_call("record_round", [float(r) for r in returns],
                                      int(actor_steps), int(config.num_steps))
    return {"episode_return": float(np.max(returns)),
            **{f"return_member{m}": float(r) for m, r in enumerate(returns)}}

  def close(self, env) -> None:
    env.close()

  def close_acting(self, adders, env) -> None:
    """An actor node's end: the members' adders (Reverb may be gone: errors ignored)."""
    del env
    for adder in adders:
      try:
        adder.close()
      except Exception:  # pylint: disable=broad-except
        pass  # the program is stopping: Reverb may be gone

