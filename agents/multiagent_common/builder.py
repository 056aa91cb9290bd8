"""A multi-agent builder composed from a single-agent one (`IndependentBuilder`).

Independent learners (Tan 1993; IPPO: de Witt et al. 2020; independent DQN: Tampuu et
al. 2017): every parameter group (`components.acting.multi_agent.ParameterGroup`: all
agents with parameter sharing, else each agent) is one single-agent agent of
`agent_builder_class` on the group's per-agent spec. Its networks, policy, replay table,
dataset, learner, batched adder (one adder state per (environment, agent) stream) and
actor are that builder's own, unchanged; this class only decides the groups and names each
group's table. Bound to an environment's groups it is a `decentralized.DecentralizedBuilder`
(`core.Builder`), which the launchers run as any builder.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Tuple

from actorq.components.acting import multi_agent


class IndependentBuilder:
  """`core.MultiAgentBuilder`: parameter groups, and one single-agent builder per group.

  A subclass names its config dataclass (`config_class`, with the
  `MultiAgentSettings.share_parameters` field) and the single-agent builder class it is
  composed from (`agent_builder_class`, whose config class the config subclasses).
  """
  config_class: Any = None
  agent_builder_class: Any = None

  def __init__(self, config):
    self.config = config

  def make_groups(self, environment) -> Tuple[multi_agent.ParameterGroup, ...]:
    """`multi_agent.make_groups(environment, config.share_parameters)`.

    Raises:
      UnsupportedEnvironmentError: sharing across agents whose specs differ.
    """
    return multi_agent.make_groups(environment, self.config.share_parameters)

  def group_builder(self, group: multi_agent.ParameterGroup):
    """The single-agent builder of `group`: `agent_builder_class` on this config, its
    replay table `<replay_table_name>` (shared group) or `<replay_table_name>_<agent>`."""
    table = self.config.replay_table_name
    if group.name != multi_agent.SHARED:
      table = f"{table}_{group.name}"
    return self.agent_builder_class(dataclasses.replace(self.config, replay_table_name=table))
