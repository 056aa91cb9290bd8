"""TD3 builder: the shared DPG builder with twin critics, delayed policy updates and target
policy smoothing."""
from __future__ import annotations

from typing import Any, Dict

from acme import specs

from actorq.agents.dpg_common.builder import DPGBuilder
from actorq.agents.td3 import config as config_lib
from actorq.agents.td3 import learning
from actorq.agents.td3 import networks as networks_lib
from actorq.agents.td3 import population


class TD3Builder(DPGBuilder):
  """Builds TD3's replay table, dataset, adder, actor, learner and policies."""
  config_class = config_lib.TD3Config

  @staticmethod
  def population_learner():
    """TD3 forms a population (`agents.population`): `population.TD3Population`."""
    return population.TD3Population

  def __init__(self, config: config_lib.TD3Config):
    super().__init__(config)

  def make_networks(self, environment_spec: specs.EnvironmentSpec) -> networks_lib.DPGNetworks:
    c = self.config
    return networks_lib.make_networks(environment_spec, c.policy_hidden_sizes,
                                      c.critic_hidden_sizes, c.critic_layer_norm,
                                      c.policy_output_init_scale)

  def critic_functions(self, networks):
    del networks
    return learning.twin_critic_loss, learning.first_critic_q_value

  def learner_options(self) -> Dict[str, Any]:
    c = self.config
    return {"policy_delay": c.policy_delay,
            "target_policy_noise": (c.target_noise_sigma, c.target_noise_clip)}
