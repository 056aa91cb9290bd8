"""D4PG builder: the shared DPG builder with a categorical critic."""
from __future__ import annotations

import functools

import jax.numpy as jnp
from acme import specs

from actorq.agents.d4pg import config as config_lib
from actorq.agents.d4pg import learning
from actorq.agents.d4pg import networks as networks_lib
from actorq.agents.dpg_common.builder import DPGBuilder


class D4PGBuilder(DPGBuilder):
  """Builds D4PG's replay table, dataset, adder, actor, learner and policies."""
  config_class = config_lib.D4PGConfig

  def __init__(self, config: config_lib.D4PGConfig):
    super().__init__(config)

  def make_networks(self, environment_spec: specs.EnvironmentSpec) -> networks_lib.DPGNetworks:
    c = self.config
    return networks_lib.make_networks(environment_spec, c.policy_hidden_sizes,
                                      c.critic_hidden_sizes, c.num_atoms,
                                      critic_layer_norm=c.critic_layer_norm,
                                      policy_output_init_scale=c.policy_output_init_scale)

  def critic_functions(self, networks):
    del networks
    c = self.config
    atoms = jnp.asarray(networks_lib.atoms(c.num_atoms, c.vmin, c.vmax))
    return (functools.partial(learning.d4pg_critic_loss, atoms=atoms),
            functools.partial(learning.categorical_q_value, atoms=atoms))
