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
    learner = builder.make_local_learner(networks, spec, init_key, clients, seed)
    actor = builder.make_local_actor(networks, spec, learner,
                                     builder.make_adders(clients, spec, B), seed)

In one process (`launch.pbt`) each member has a seeded in-process replay (`make_replay`)
and the learner and actor above. In a Launchpad program the nodes call the contract
methods (`make_replay_tables`: every member's Reverb table, ``<table>_member<m>``;
`make_dataset_iterator`, `make_batched_adder`, `make_learner`, `make_actor`) through the
population's environment family (`agents.population.program`).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Dict, Iterator, List, Optional

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

  def __init__(self, member: Any, config: config_lib.PopulationConfig, seed: int = 0):
    if learner_class(type(member)) is None:
      raise ValueError(f"{type(member).__name__} declares no population learner")
    self.member = member
    self.config = config
    self.seed = int(seed)  # PBT's and the actors' numpy draws (a program passes only keys)

  def learner_class(self) -> type:
    """The member agent's population learner class."""
    return learner_class(type(self.member))

  # -- the builder contract (`core.Builder`) ---------------------------------------------
  # Networks, policies and learning schedule are the member builder's; tables, dataset,
  # adders, learner and actor hold all N members (a program's; one process: `make_local_*`).
  def make_networks(self, environment_spec):
    return self.member.make_networks(environment_spec)

  def policy_outputs(self, networks, environment_spec):
    return self.member.policy_outputs(networks, environment_spec)

  def make_policy(self, networks, environment_spec, evaluation: bool = False):
    """A member's policy (its precision and action selection at the shared config)."""
    return self.member.make_policy(networks, environment_spec, evaluation)

  def member_builder(self, m: int) -> Any:
    """Member m's builder in a program: the member builder writing and sampling its own
    Reverb table, ``<replay_table_name>_member<m>``."""
    config = self.member.config
    return type(self.member)(dataclasses.replace(
        config, replay_table_name=f"{config.replay_table_name}_member{m}"))

  def make_replay_tables(self, environment_spec, policy=None, rate_limited: bool = False):
    """Every member's tables on one Reverb server (a program's), member m's named
    `member_builder(m)`'s."""
    return [t for m in range(self.config.size) for t in self.member_builder(m)
            .make_replay_tables(environment_spec, policy, rate_limited)]

  def make_dataset_iterator(self, replay_client) -> Iterator[tuple]:
    """One tuple of N samples per `next()`: each member's batch from its own table (a
    program's learner; the vmapped update takes them together)."""
    return zip(*[self.member_builder(m).make_dataset_iterator(replay_client)
                 for m in range(self.config.size)])

  def make_adder(self, replay_client, environment_spec, policy=None):
    return self.make_batched_adder(replay_client, environment_spec, policy, 1)

  def make_batched_adder(self, replay_client, environment_spec, policy=None,
                         num_envs: int = 1) -> list:
    """A program's actor's adders: member m's batched adder (B = `num_envs`) into its own
    table."""
    return [self.member_builder(m).make_batched_adder(replay_client, environment_spec,
                                                      policy, num_envs=num_envs)
            for m in range(self.config.size)]

  def replay_table_name(self) -> str:
    """Member 0's table in a program (a learner waits for it to fill)."""
    return self.member_builder(0).replay_table_name()

  def min_replay_size(self) -> int:
    return self.member.min_replay_size()

  def learner_steps_owed(self, progress) -> int:
    """A member's learner steps owed at its own replay progress."""
    return self.member.learner_steps_owed(progress)

  def make_replay(self, environment_spec, random_key) -> List[local_replay.LocalReplayClient]:
    """One seeded in-process replay per member (one process), from the member builder's
    tables (the seeds drawn from `random_key`)."""
    seeds = np.asarray(jax.random.randint(random_key, (self.config.size,), 0, 2**31 - 1))
    return [local_replay.LocalReplayClient(self.member.make_replay_tables(environment_spec),
                                           seed=int(seed)) for seed in seeds]

  def make_adders(self, replay_clients, environment_spec, num_envs: int) -> list:
    """One batched adder per member into its in-process replay (B = `num_envs` each)."""
    return [self.member.make_batched_adder(c, environment_spec, num_envs=num_envs)
            for c in replay_clients]

  def make_local_learner(self, networks, environment_spec, random_key, replay_clients,
                         seed: int) -> learning.PopulationLearner:
    """The learner of a population run in one process (`launch.pbt`)."""
    return learning.PopulationLearner(self, networks, environment_spec, random_key,
                                      replay_clients, seed)

  def make_local_actor(self, networks, environment_spec, learner, adders,
                       seed: int) -> acting.PopulationActor:
    """The actor of a population run in one process, its learner in the same process."""
    return acting.PopulationActor(self, networks, environment_spec, learner, adders, seed)

  def make_learner(self, random_key, networks, dataset, logger_fn, environment_spec,
                   replay_client=None, counter=None) -> learning.PopulationLearner:
    """A program's learner (`core.Builder`): the members' vmapped update on `dataset`
    (`make_dataset_iterator`), priorities written through `replay_client`, its steps
    counted by `counter`; PBT's draws seeded by the builder's `seed`."""
    del logger_fn
    return learning.PopulationLearner(self, networks, environment_spec, random_key, None,
                                      self.seed, dataset=dataset, counter=counter,
                                      replay_client=replay_client)

  def make_actor(self, random_key, policy, environment_spec, variable_source,
                 adder=None) -> acting.PopulationActor:
    """A program's actor (`core.Builder`) acting for every member: its learner is a
    `acting.LearnerView` pulling from `variable_source`; `adder`: `make_batched_adder`'s
    (None: an evaluation actor). Its draws are seeded by the builder's `seed` and
    `random_key`."""
    del policy
    networks = self.make_networks(environment_spec)
    view = acting.LearnerView(self, networks, environment_spec, variable_source)
    seed = int(jax.random.randint(random_key, (), 0, 2**31 - 1))
    return acting.PopulationActor(self, networks, environment_spec, view,
                                  adder or [None] * self.config.size, seed)
