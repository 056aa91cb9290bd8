"""DDPG (Lillicrap et al. 2016): the deterministic policy gradient with a scalar critic.

`from actorq.agents import ddpg` as in Acme: ddpg.DDPGConfig, ddpg.DDPGBuilder,
ddpg.make_networks, ddpg.DPGLearner (the family's) and its losses."""
from actorq.agents.ddpg.config import DDPGConfig
from actorq.agents.ddpg.networks import DPGNetworks, make_networks
from actorq.agents.ddpg.learning import (
    DPGLearner, ddpg_critic_loss, dpg_policy_loss, scalar_q_value)
from actorq.agents.ddpg.builder import DDPGBuilder
