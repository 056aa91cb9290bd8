"""The single-agent environment family: how a run makes, steps and evaluates `dm_env`
environments (`components.envs.environments`), one or a vector of `num_envs`
(`vector_env`), with the builder's actor in `loop.ActorLoop` (`VectorActorLoop`). It is a
row of the launchers' table of families (`launch.experiment.ENVIRONMENTS`), beside the
multi-agent one (`agents.multiagent_common.decentralized.MultiAgentEnvironments`).

`config` below is a run's `launch.experiment.ExperimentConfig` (read for `env_id`, `seed`,
`num_envs`, `max_episode_steps`, `eval_episodes`, `training_hooks` and `builder`); `parts`
its `AgentParts` (environment spec and policies).
"""
from __future__ import annotations

from typing import Dict, Optional

from acme import specs

from actorq.components.acting import actors
from actorq.components.acting import loop as loop_lib
from actorq.components.envs import environments, vector_env
from actorq.components.envs.seeding import EVAL_SEED_OFFSET, training_seed


def make_environment(config, seed: int):
  """`config.env_id` seeded with `seed`."""
  return environments.make_environment(config.env_id, seed=seed)


def make_training_environment(config, seed: int):
  """What a training actor steps: `config.env_id` seeded with `seed` (a
  `dm_env.Environment`) when `config.num_envs` is 1, else a
  `vector_env.VectorEnvironment` of `num_envs` rows (row i seeded `seed + i`) capped at
  `config.max_episode_steps`. `seed` is `config.seed` plus an offset into the training
  seeds, taken through `training_seed` (never an evaluation seed); a seed below
  `config.seed` is used as given."""
  if seed >= config.seed:  # (a seed below the run's is taken as given)
    seed = training_seed(config.seed, seed - config.seed, config.num_envs)
  if config.num_envs == 1:
    return make_environment(config, seed)
  return vector_env.make_vector_environment(config.env_id, config.num_envs, seed=seed,
                                            max_episode_steps=config.max_episode_steps)


def training_environment_spec(env) -> specs.EnvironmentSpec:
  """The spec of one environment of `make_training_environment`'s result."""
  if isinstance(env, vector_env.VectorEnvironment):
    return env.environment_spec()
  return environments.environment_spec(env)


def make_training_actor(config, parts, random_key,
                        replay_client, variable_source):
  """`(adder, actor)` of a training actor (the single-process run and every distributed
  actor node build theirs here): the builder's adder and actor when `num_envs` is 1; a
  batched adder (`builder.make_batched_adder`) and `actors.BatchedFeedForwardActor` over
  the builder's actor (same runtime, selector, variable client and generator) else."""
  builder, spec = config.builder, parts.environment_spec
  if config.num_envs == 1:
    adder = builder.make_adder(replay_client, spec, parts.policy)
    return adder, builder.make_actor(random_key, parts.policy, spec, variable_source, adder)
  # Staged in blocks (`adders.BlockNStepTransitionAdder`, issue 40): the same items per
  # env, written every few steps at a fraction of the per-step cost. A user's batched
  # adder without `in_blocks` (it is optional in `core.VectorBuilder`) is used as it is.
  adder = builder.make_batched_adder(replay_client, spec, parts.policy, config.num_envs)
  adder = getattr(adder, "in_blocks", lambda: adder)()
  actor = builder.make_actor(random_key, parts.policy, spec, variable_source)
  return adder, actors.batched(actor, adder, spec.actions.generate_value())


def make_actor_over_batched_adder(config, parts, random_key, replay_client,
                                  variable_source):
  """`(adder, actor)` for a builder whose actor acts for all `config.num_envs` rows itself
  (the multi-agent and population families): its batched adder and its actor writing
  through it."""
  builder, spec = parts.builder, parts.environment_spec
  adder = builder.make_batched_adder(replay_client, spec, parts.policy, config.num_envs)
  return adder, builder.make_actor(random_key, parts.policy, spec, variable_source, adder)


def make_training_loop(config, env, actor, hooks, should_stop=None):
  """`loop.ActorLoop` over one environment (`num_envs` 1), else `loop.VectorActorLoop` over
  the vector one (`env` as `make_training_environment` made it, or a wrapper of it)."""
  loop_cls = loop_lib.VectorActorLoop if config.num_envs > 1 else loop_lib.ActorLoop
  hooks = [make(actor) for make in config.training_hooks] + list(hooks)
  return loop_cls(env, actor, hooks=hooks, should_stop=should_stop,
                  max_episode_steps=config.max_episode_steps)


def environment_spec(config) -> specs.EnvironmentSpec:
  """The spec of `config.env_id` (an environment is made and closed)."""
  env = make_environment(config, config.seed)
  try:
    return environments.environment_spec(env)
  finally:
    env.close()


def evaluate(config, actor, *, should_stop=None) -> Optional[Dict[str, float]]:
  """`config.eval_episodes` greedy episodes (capped at `config.max_episode_steps`) on a
  fresh environment seeded `seed + EVAL_SEED_OFFSET`: every evaluation of a run (and of
  runs at other precisions with the same seed) plays the same start states, so returns
  are comparable across evaluations and paired across precisions. None when
  `should_stop` ended them first."""
  environment = make_environment(config, config.seed + EVAL_SEED_OFFSET)
  try:
    return loop_lib.evaluate(environment, actor, config.eval_episodes, should_stop=should_stop,
                             max_episode_steps=config.max_episode_steps)
  finally:
    environment.close()


class SingleAgent:
  """`dm_env` environments (`components.envs.environments`): one environment (or a vector
  of `num_envs`), `loop.ActorLoop` (`VectorActorLoop`), the builder as it is."""

  @staticmethod
  def matches(builder) -> bool:
    return True

  def make(self, config, seed: int):
    return make_training_environment(config, seed)

  def bind(self, builder, env):
    """`(builder, environment spec)` of the agent acting in `env`."""
    return builder, training_environment_spec(env)

  def make_actor(self, config, parts, random_key, replay_client, variable_source):
    return make_training_actor(config, parts, random_key, replay_client, variable_source)

  def make_loop(self, config, env, actor, hooks, should_stop=None):
    return make_training_loop(config, env, actor, hooks, should_stop)

  def episode_logger(self, logger, precision: Optional[str]) -> loop_lib.Hook:
    """One row per episode; with its `actor_precision` when given."""
    return loop_lib.EpisodeLogger(logger, **({} if precision is None else
                                             {"actor_precision": precision}))

  def evaluate(self, config, parts, actor, seed: int, should_stop=None, actor_steps=None):
    """`evaluate` (`seed` is `config.seed + EVAL_SEED_OFFSET`, as there; `actor_steps`, the
    run's when it evaluates, is not needed)."""
    del parts, seed, actor_steps
    return evaluate(config, actor, should_stop=should_stop)

  def close(self, env) -> None:
    env.close()

  def close_acting(self, adder, env) -> None:
    """An actor node's end: closes its adder's Reverb writer (errors ignored: the server
    may be gone). A writer left open until garbage collection keeps its stream open, and
    the Reverb node's `Server.stop` then waits ~5 s for it (issue 56). The environment is
    left to the process or thread, which ends with the program."""
    del env
    close = getattr(adder, "close", None)
    if close is not None:
      try:
        close()
      except Exception:  # pylint: disable=broad-except
        pass  # the program is stopping: Reverb may be gone
