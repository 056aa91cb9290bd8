"""A multi-agent agent on the single-agent builder contract: `DecentralizedBuilder`, one
sub-builder per parameter group behind `core.Builder` (as Acme's
`acme/agents/jax/multiagent/decentralized/builder.py` holds one builder per agent).

Its environment spec is the environment's parameter groups
(`components.acting.multi_agent.ParameterGroup`, `IndependentBuilder.make_groups`), and
every object it makes is the groups' objects side by side, keyed by group name, in group
order (`Groups`): the networks, the policies, the replay tables (every group's, in one
list), the datasets, the learners (`GroupLearners`: its `step()` steps every group; the
launchers schedule and checkpoint each group's learner on its own, `parts`), the batched
adders (one adder state per (environment, agent) stream) and the actors (`GroupActors`:
one batched actor per group acting for every agent of the group, in every environment).
The launchers run it like any builder (`launch.local`, `launch.distributed_nodes`) with
the multi-agent environment family (`MultiAgentEnvironments`, a row of
`launch.experiment.ENVIRONMENTS`), which binds it and steps the environments with
`MultiAgentLoop`.
"""
from __future__ import annotations

from typing import Any, Dict, Iterator, List, Sequence

import jax
import numpy as np
from acme.utils import counting

from actorq import core
from actorq.components.acting import actors as actors_lib
from actorq.components.acting import loop as loop_lib
from actorq.components.acting import multi_agent as ma_loop
from actorq.components.envs import multi_agent as ma_env
from actorq.components.envs import seeding, single_agent


class Composite:
  """An object made of one part per parameter group: `parts` maps group name -> part, in
  group order (`launch.experiment.split` reads it)."""
  parts: Dict[str, Any]


class Groups(dict, Composite):
  """Group name -> one group's object, in group order; `spec` maps each to its
  `.spec` (networks: the `NetworkSpec` the group's actors execute) and `precision` is the
  first group's (policies)."""

  @property
  def parts(self) -> Dict[str, Any]:
    return self

  @property
  def spec(self) -> Dict[str, Any]:
    return {name: value.spec for name, value in self.items()}

  @property
  def precision(self) -> str:
    return next(iter(self.values())).precision


class _GroupCounter:
  """A group learner's counter: its counts go to the learner counter both as they are
  (``learner_steps``: the groups' sum) and under the group's name
  (``learner_<group>_steps``)."""

  def __init__(self, parent: counting.Counter, name: str):
    self._parent, self._name = parent, name

  def increment(self, **counts):
    return self._parent.increment(**counts, **{f"{self._name}_{k}": v
                                              for k, v in counts.items()})

  def get_counts(self):
    return self._parent.get_counts()

  def save(self):
    return self._parent.save()

  def restore(self, state):
    self._parent.restore(state)


class GroupLearners(Composite):
  """Every group's learner (`parts`: group name -> learner). `step()` steps each once;
  `step_count` is their sum; `save()`/`restore()` take group name -> state;
  `get_variables(["policy"])` gives group name -> fp32 params, ``"version"`` the smallest
  group version."""

  def __init__(self, parts: Dict[str, core.Learner]):
    self.parts = parts

  def step(self) -> None:
    for learner in self.parts.values():
      learner.step()

  @property
  def step_count(self) -> int:
    return int(sum(l.step_count for l in self.parts.values()))

  def get_variables(self, names: Sequence[str]) -> List[Any]:
    out = []
    for name in names:
      values = {g: l.get_variables([name])[0] for g, l in self.parts.items()}
      out.append(min(int(v) for v in values.values()) if name == "version" else values)
    return out

  def save(self) -> Dict[str, Any]:
    return {g: l.save() for g, l in self.parts.items()}

  def restore(self, state: Dict[str, Any]) -> None:
    for g, l in self.parts.items():
      l.restore(state[g])


class GroupAdders(Groups):
  """Every group's batched adder; `items_written` sums them."""

  @property
  def items_written(self) -> int:
    return int(sum(a.items_written for a in self.values()))

  def close(self) -> None:
    for adder in self.values():
      adder.close()


class GroupActors(Composite):
  """One batched actor per group (`actors`, in group order; `parts`: group name -> actor),
  each acting for every agent of its group in every environment (`MultiAgentLoop`).
  `update(wait)` updates each; `policy_version` is the first group's; `num_steps` and
  `rng_state` are group name -> value; `groups` are the parameter groups acted for."""

  def __init__(self, parts: Dict[str, Any], groups: Sequence[Any]):
    self.parts, self.groups = parts, tuple(groups)
    self.actors = list(parts.values())

  def update(self, wait: bool = False) -> None:
    for actor in self.actors:
      actor.update(wait=wait)

  @property
  def policy_version(self) -> int:
    return self.actors[0].policy_version

  @property
  def num_steps(self) -> Dict[str, int]:
    return {g: int(a.num_steps) for g, a in self.parts.items()}

  @property
  def rng_state(self) -> Dict[str, Any]:
    return {g: a.rng_state for g, a in self.parts.items()}

  def runtimes(self) -> List[Any]:
    return [a.runtime for a in self.actors]


class GroupServers(Composite):
  """Every group's `PolicyServer` (`parts`) as one variable source: ``<group>/<name>``
  is the group's `<name>`; ``"policy"`` gives group name -> params, ``"version"`` the
  smallest group version. In the actors' process, as its servers (`in_process`)."""
  in_process = True

  def __init__(self, parts: Dict[str, Any]):
    self.parts = parts

  def get_variables(self, names: Sequence[str]) -> List[Any]:
    out = []
    for name in names:
      group, _, rest = name.partition("/")
      if group in self.parts:
        out.append(self.parts[group].get_variables([rest])[0])
        continue
      values = {g: s.get_variables([name])[0] for g, s in self.parts.items()}
      out.append(min(int(v) for v in values.values()) if name == "version" else values)
    return out

  def served(self) -> Dict[str, Any]:
    return {g: s.served() for g, s in self.parts.items()}


class GroupSource:
  """A group's variable source on a multi-group one: `get_variables(names)` asks for
  ``<group>/<name>`` (`GroupServers`). `in_process` is the source's (True only for a
  source in this process: actors then pull synchronously, so a run repeats under a seed;
  a Courier client's attribute is a remote call, never True)."""

  def __init__(self, source, group: str):
    self._source, self._group = source, group
    self.in_process = getattr(source, "in_process", False) is True

  def get_variables(self, names):
    return self._source.get_variables([f"{self._group}/{n}" for n in names])


class DecentralizedBuilder:
  """`core.Builder` (and `core.VectorBuilder`) of a multi-agent agent: `builders` maps
  each parameter group's name to its single-agent builder, `groups` are the groups (the
  environment spec every method takes). See the module docstring.

  Attributes:
    config: the multi-agent config (what run.json records).
  """

  def __init__(self, config: Any, groups: Sequence[Any], builders: Dict[str, Any]):
    self.config = config
    self.groups = tuple(groups)
    self.builders = dict(builders)

  def _each(self, make, *per_group) -> Groups:
    return Groups((g.name, make(self.builders[g.name], g, *(x[g.name] for x in per_group)))
                  for g in self.groups)

  def make_networks(self, environment_spec) -> Groups:
    del environment_spec
    return self._each(lambda b, g: b.make_networks(g.environment_spec))

  def make_policy(self, networks, environment_spec, evaluation: bool = False) -> Groups:
    del environment_spec
    return self._each(lambda b, g, n: b.make_policy(n, g.environment_spec, evaluation),
                      networks)

  def make_replay_tables(self, environment_spec, policy, rate_limited: bool = False) -> list:
    del environment_spec
    return [t for g in self.groups for t in self.builders[g.name].make_replay_tables(
        g.environment_spec, policy[g.name], rate_limited=rate_limited)]

  def make_dataset_iterator(self, replay_client) -> Dict[str, Iterator[Any]]:
    return self._each(lambda b, g: b.make_dataset_iterator(replay_client))

  def make_learner(self, random_key, networks, dataset, logger_fn, environment_spec,
                   replay_client=None, counter=None) -> GroupLearners:
    """One learner per group (keys split from `random_key` in group order). Its logger is
    ``learner`` with one group, else ``learner_<group>``; so are its counts."""
    del environment_spec
    one = len(self.groups) == 1
    keys = jax.random.split(random_key, len(self.groups))
    parts = {}
    for g, key in zip(self.groups, keys):
      label = "learner" if one else f"learner_{g.name}"
      parts[g.name] = self.builders[g.name].make_learner(
          key, networks[g.name], dataset[g.name], lambda _, label=label: logger_fn(label),
          g.environment_spec, replay_client,
          counter if one or counter is None else _GroupCounter(counter, g.name))
    return GroupLearners(parts)

  def logger_labels(self) -> List[str]:
    """The learners' logger labels (`make_learner`)."""
    if len(self.groups) == 1:
      return ["learner"]
    return [f"learner_{g.name}" for g in self.groups]

  def make_batched_adder(self, replay_client, environment_spec, policy,
                         num_envs: int) -> GroupAdders:
    """Each group's batched adder with a state per (environment, agent) stream."""
    del environment_spec
    return GroupAdders((g.name, self.builders[g.name].make_batched_adder(
        replay_client, g.environment_spec, policy[g.name], num_envs * len(g.agents)))
                       for g in self.groups)

  def make_adder(self, replay_client, environment_spec, policy) -> GroupAdders:
    return self.make_batched_adder(replay_client, environment_spec, policy, 1)

  def make_actor(self, random_key, policy, environment_spec, variable_source,
                 adder=None) -> GroupActors:
    """One batched actor per group (keys split from `random_key` in group order), pulling
    the group's variables from `variable_source` (``<group>/<name>``, `GroupSource`) and
    writing through the group's adder of `adder` (None: an evaluation actor)."""
    del environment_spec
    keys = jax.random.split(random_key, len(self.groups))
    parts = {}
    for g, key in zip(self.groups, keys):
      spec = g.environment_spec
      actor = self.builders[g.name].make_actor(key, policy[g.name], spec,
                                               GroupSource(variable_source, g.name))
      parts[g.name] = actors_lib.batched(actor, None if adder is None else adder[g.name],
                                         spec.actions.generate_value())
    return GroupActors(parts, self.groups)

  def min_replay_size(self) -> int:
    """0: each group waits for its own table (`learning_parts`)."""
    return 0

  def replay_table_name(self) -> str:
    return self.builders[self.groups[0].name].replay_table_name()

  def learner_steps_owed(self, progress: core.ReplayProgress) -> int:
    del progress
    raise TypeError("a multi-agent learner is scheduled per group (its parts)")

  def policy_outputs(self, networks, environment_spec):
    del environment_spec
    return self._each(lambda b, g, n: b.policy_outputs(n, g.environment_spec), networks)


def bind(builder, groups) -> DecentralizedBuilder:
  """The `DecentralizedBuilder` of a `core.MultiAgentBuilder` on an environment's
  parameter groups (`builder.group_builder(group)` per group)."""
  return DecentralizedBuilder(builder.config, groups,
                              {g.name: builder.group_builder(g) for g in groups})


class MultiAgentEnvironments:
  """The multi-agent environment family of `launch.experiment.ENVIRONMENTS`: PettingZoo
  parallel environments (`components.envs.multi_agent`), `num_envs` of them stepped
  together by `MultiAgentLoop`; the builder (a `core.MultiAgentBuilder`) is bound to their
  parameter groups (`bind`), which are its environment spec."""

  @staticmethod
  def matches(builder) -> bool:
    return isinstance(builder, core.MultiAgentBuilder)

  def make(self, config: Any, seed: int):
    """`num_envs` environments (`config`: the run's `launch.experiment.ExperimentConfig`),
    environment e seeded `seed + e`.

    `seed` is `config.seed` plus an offset into the training seeds, taken through
    `seeding.training_seed` (never an evaluation seed, case B14); a seed below
    `config.seed` is used as given.

    Raises: core.UsageError: not a multi-agent environment id (naming what is allowed)."""
    if seed >= config.seed:
      seed = seeding.training_seed(config.seed, seed - config.seed, config.num_envs)
    made = []
    try:
      for e in range(config.num_envs):
        made.append(ma_env.make_multi_agent_environment(config.env_id, seed=seed + e))
    except (core.UnknownEnvironmentError, core.UnsupportedEnvironmentError) as e:
      self.close(made)
      raise core.UsageError(str(e)) from None
    return made

  def bind(self, builder, env):
    """Raises: core.UsageError: agents the builder cannot group (e.g. parameter sharing
    across agents with different specs)."""
    try:
      groups = builder.make_groups(env[0])
    except (core.UnknownEnvironmentError, core.UnsupportedEnvironmentError) as e:
      raise core.UsageError(str(e)) from None
    return bind(builder, groups), groups

  def make_actor(self, config, parts, random_key, replay_client, variable_source):
    return single_agent.make_actor_over_batched_adder(config, parts, random_key,
                                                      replay_client, variable_source)

  def make_loop(self, config, env, actor, hooks, should_stop=None):
    return ma_loop.MultiAgentLoop(env, actor.groups, actor.actors, hooks=hooks,
                                  should_stop=should_stop,
                                  max_episode_steps=config.max_episode_steps)

  def episode_logger(self, logger, precision: str) -> loop_lib.Hook:
    del precision
    return TeamEpisodeLogger(logger)

  def evaluate(self, config, parts, actor, seed: int, should_stop=None, actor_steps=None):
    """`config.eval_episodes` greedy episodes on a fresh environment seeded `seed` (the
    run's evaluation seed, the same every evaluation); the team return (mean, std), mean
    length and each agent's mean return (`return_<agent>`); None when `should_stop` ended
    them first. (`actor_steps`, the run's when it evaluates, is not needed.)"""
    del actor_steps
    env = ma_env.make_multi_agent_environment(config.env_id, seed=seed)
    try:
      evaluator = ma_loop.MultiAgentLoop([env], parts.environment_spec, actor.actors,
                                         learn=False, should_stop=should_stop,
                                         max_episode_steps=config.max_episode_steps)
      episodes = evaluator.run(num_episodes=config.eval_episodes)
      if len(episodes) < config.eval_episodes:
        return None
      return {**loop_lib.summarize(episodes), **{
          f"return_{a}": float(np.mean([e.agent_returns[a] for e in episodes]))
          for a in env.agents}}
    finally:
      env.close()

  def close(self, env) -> None:
    for environment in env:
      environment.close()

  def close_acting(self, adder, env) -> None:
    """An actor node's end: its adders (Reverb may be gone: errors ignored) and its
    environments."""
    try:
      adder.close()
    except Exception:  # pylint: disable=broad-except
      pass  # the program is stopping: Reverb may be gone
    self.close(env)


class TeamEpisodeLogger(loop_lib.Hook):
  """One row per training episode with the team return and each agent's return."""

  def __init__(self, logger):
    self._logger = logger

  def on_episode_end(self, loop, stats):
    self._logger.write({"actor_steps": loop.steps, "episodes": loop.episodes,
                        "episode_return": stats.episode_return,
                        "episode_length": stats.episode_length,
                        **{f"return_{a}": r for a, r in stats.agent_returns.items()},
                        "policy_version": loop.actor.policy_version})
