"""DDPG builder: the shared DPG builder with a scalar TD critic."""
from __future__ import annotations

import functools

from acme import specs

from actorq.agents.ddpg import config as config_lib
from actorq.agents.ddpg import learning
from actorq.agents.ddpg import networks as networks_lib
from actorq.agents.dpg_common.builder import DPGBuilder


class DDPGBuilder(DPGBuilder):
  """Builds DDPG's replay table, dataset, adder, actor, learner and policies."""
  config_class = config_lib.DDPGConfig

  def __init__(self, config: config_lib.DDPGConfig):
    super().__init__(config)

  def make_networks(self, environment_spec: specs.EnvironmentSpec) -> networks_lib.DPGNetworks:
    c = self.config
    return networks_lib.make_networks(environment_spec, c.policy_hidden_sizes,
                                      c.critic_hidden_sizes,
                                      critic_layer_norm=c.critic_layer_norm,
                                      policy_output_init_scale=c.policy_output_init_scale)

  def critic_functions(self, networks):
    del networks
    return (functools.partial(learning.ddpg_critic_loss, huber_delta=self.config.huber_delta),
            learning.scalar_q_value)
