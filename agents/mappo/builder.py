"""MAPPO builder: IPPO's composition (`multiagent_common.IndependentBuilder` over PPO's
builder) with a centralized critic input stored after each agent's policy input and
`mappo.networks` per group."""
from __future__ import annotations

import dataclasses
from typing import Tuple

from actorq.agents.mappo import config as config_lib
from actorq.agents.mappo import networks as networks_lib
from actorq.agents.multiagent_common.builder import IndependentBuilder
from actorq.agents.ppo.builder import PPOBuilder
from actorq.components.acting import multi_agent


class CentralizedCriticPPOBuilder(PPOBuilder):
  """PPO's builder for one parameter group whose stored observations are laid out as
  `layout` says (`networks.InputLayout`): its networks are `mappo.networks`'."""

  def __init__(self, config, layout: networks_lib.InputLayout):
    super().__init__(config)
    self.layout = layout

  def make_networks(self, environment_spec):
    return networks_lib.make_networks(environment_spec, self.config, self.layout)


class MAPPOBuilder(IndependentBuilder):
  """PPO per parameter group with a centralized value function on
  `config.critic_input`."""
  config_class = config_lib.MAPPOConfig
  agent_builder_class = PPOBuilder

  def make_groups(self, environment) -> Tuple[multi_agent.ParameterGroup, ...]:
    """The groups of `IndependentBuilder.make_groups`, each storing the critic input.

    Raises:
      UnsupportedEnvironmentError: as `multi_agent.make_groups` (e.g. "state" for an
        environment without a global state).
    """
    return multi_agent.make_groups(environment, self.config.share_parameters,
                                   self.config.critic_input)

  def group_builder(self, group: multi_agent.ParameterGroup) -> CentralizedCriticPPOBuilder:
    plain = super().group_builder(group)
    local = int(group.agent_observations.shape[0])
    return CentralizedCriticPPOBuilder(
        plain.config, networks_lib.InputLayout(local, group.id_size, group.critic_size))
