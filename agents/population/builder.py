"""`PopulationBuilder`: N members of one agent composed into one agent (issue 52), as
`DecentralizedBuilder` composes one builder per parameter group: it holds the member's
builder and a `PopulationConfig`, and builds

  * networks and policy outputs: the member's (every member has the same shapes);
  * replay: one seeded in-process client per member, from the member builder's own
    `reverb.Table`s (`make_replay`), each written by that member's adder;
  * the learner (`learning.PopulationLearner`): the members' states stepped in ONE
    vmapped update of the agent's population learner, and PBT's exploit/explore;
  * the actor (`acting.PopulationActor`): acts for every member (one batched fp32
    inference, an int8 runtime per int8 member).

Which agents can form a population is a property of the agent's builder: a builder class
that declares `population_learner()` in its own body (a static method returning its
`components.population.PopulationLearner` subclass, e.g. `DQNBuilder` ->
`agents.dqn.population.DQNPopulation`). A subclass does not inherit it: it is another
agent whose update may differ (QDagger's builder extends DQN's), and forms a population
only when it declares its own. Adding an agent that can form a population is that class
plus that one method (`docs/guides/pbt.md`).

    builder = PopulationBuilder(DQNBuilder(DQNConfig()), PopulationConfig(size=4))
    networks = builder.make_networks(spec)
    clients = builder.make_replay(spec, replay_key)
    learner = builder.make_learner(networks, spec, init_key, clients, seed)
    actor = builder.make_actor(networks, spec, learner, builder.make_adders(clients, spec, B),
                               seed)
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional

import jax
import numpy as np

from actorq.agents.population import acting
from actorq.agents.population import config as config_lib
from actorq.agents import registry
from actorq.agents.population import learning
from actorq.components.replay import local_replay


def learner_class(builder_cls: type) -> Optional[type]:
  """The population learner class `builder_cls` declares in its own body
  (`population_learner()`), else None (see the module docstring)."""
  declared = vars(builder_cls).get("population_learner")
  return None if declared is None else declared.__func__()


def supported_agents() -> List[str]:
  """The registered agent names whose builder declares a population learner
  (`learner_class`), in registry order."""
  return [n for n in registry.names() if learner_class(registry.get(n)[1]) is not None]


def mutable_fields() -> Dict[str, List[str]]:
  """Agent name -> the config fields PBT's explore may change (its population learner's
  HYPERPARAMETERS), for every agent of `supported_agents`."""
  return {name: list(learner_class(registry.get(name)[1]).HYPERPARAMETERS)
          for name in supported_agents()}


class PopulationBuilder:
  """A population of `member`'s agent (see the module docstring).

  Args:
    member: the member agent's builder (its config is every member's at the start).
    config: the `PopulationConfig`.

  Raises:
    ValueError: `member`'s builder declares no population learner (naming it).
  """

  def __init__(self, member: Any, config: config_lib.PopulationConfig):
    if learner_class(type(member)) is None:
      raise ValueError(f"{type(member).__name__} declares no population learner")
    self.member = member
    self.config = config

  def learner_class(self) -> type:
    """The member agent's population learner class."""
    return learner_class(type(self.member))

  # -- the builder contract (`core.Builder`) ---------------------------------------------
  # What one member has is the member builder's: networks, policies, tables, dataset,
  # adder and learning schedule. The population's learner and actor (`make_learner`,
  # `make_actor`) hold all N members and take the population's own arguments.
  def make_networks(self, environment_spec):
    return self.member.make_networks(environment_spec)

  def policy_outputs(self, networks, environment_spec):
    return self.member.policy_outputs(networks, environment_spec)

  def make_policy(self, networks, environment_spec, evaluation: bool = False):
    """A member's policy (its precision and action selection at the shared config)."""
    return self.member.make_policy(networks, environment_spec, evaluation)

  def make_replay_tables(self, environment_spec, policy=None, rate_limited: bool = False):
    """One member's tables (each member has its own copy: `make_replay`)."""
    if policy is None and not rate_limited:
      return self.member.make_replay_tables(environment_spec)
    return self.member.make_replay_tables(environment_spec, policy, rate_limited)

  def make_dataset_iterator(self, replay_client):
    return self.member.make_dataset_iterator(replay_client)

  def make_adder(self, replay_client, environment_spec, policy):
    return self.member.make_adder(replay_client, environment_spec, policy)

  def replay_table_name(self) -> str:
    return self.member.replay_table_name()

  def min_replay_size(self) -> int:
    return self.member.min_replay_size()

  def learner_steps_owed(self, progress) -> int:
    """A member's learner steps owed at its own replay progress."""
    return self.member.learner_steps_owed(progress)

  def make_replay(self, environment_spec, random_key) -> List[local_replay.LocalReplayClient]:
    """One seeded in-process replay per member, from the member builder's tables (the
    seeds drawn from `random_key`)."""
    seeds = np.asarray(jax.random.randint(random_key, (self.config.size,), 0, 2**31 - 1))
    return [local_replay.LocalReplayClient(self.make_replay_tables(environment_spec),
                                           seed=int(seed)) for seed in seeds]

  def make_batched_adder(self, replay_client, environment_spec, num_envs: int):
    """A member's batched adder into its replay (B = `num_envs` environments)."""
    return self.member.make_batched_adder(replay_client, environment_spec, num_envs=num_envs)

  def make_adders(self, replay_clients, environment_spec, num_envs: int) -> list:
    """One batched adder per member (B = `num_envs` environments each)."""
    return [self.make_batched_adder(c, environment_spec, num_envs) for c in replay_clients]

  def make_learner(self, networks, environment_spec, random_key, replay_clients,
                   seed: int) -> learning.PopulationLearner:
    return learning.PopulationLearner(self, networks, environment_spec, random_key,
                                      replay_clients, seed)

  def make_actor(self, networks, environment_spec, learner, adders,
                 seed: int) -> acting.PopulationActor:
    return acting.PopulationActor(self, networks, environment_spec, learner, adders, seed)
