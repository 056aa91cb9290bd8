"""DDPG (Lillicrap et al. 2016): the deterministic policy gradient with a scalar critic.

As in Acme, the package is the agent's public face:

    from actorq.agents import ddpg
    config = ddpg.DDPGConfig(...)
    builder = ddpg.DDPGBuilder(config)

Exports the config, networks, learner (with its losses) and builder; results: README.md."""
from actorq.agents.ddpg.config import DDPGConfig
from actorq.agents.ddpg.networks import DPGNetworks, make_networks
from actorq.agents.ddpg.learning import (
    DPGLearner, ddpg_critic_loss, dpg_policy_loss, scalar_q_value)
from actorq.agents.ddpg.builder import DDPGBuilder

__all__ = [
    "DDPGBuilder",
    "DDPGConfig",
    "DPGLearner",
    "DPGNetworks",
    "ddpg_critic_loss",
    "dpg_policy_loss",
    "make_networks",
    "scalar_q_value",
]
