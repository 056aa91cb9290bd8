"""TD3 (Fujimoto et al. 2018): twin critics, delayed policy updates, target policy smoothing.

As in Acme, the package is the agent's public face:

    from actorq.agents import td3
    config = td3.TD3Config(...)
    builder = td3.TD3Builder(config)

Exports the config, networks, learner (with its losses) and builder; results: README.md."""
from actorq.agents.td3.config import TD3Config
from actorq.agents.td3.networks import DPGNetworks, make_networks
from actorq.agents.td3.learning import (
    DPGLearner, clipped_double_q_target, dpg_policy_loss, first_critic_q_value,
    smoothed_target_action, twin_critic_loss)
from actorq.agents.td3.builder import TD3Builder

__all__ = [
    "DPGLearner",
    "DPGNetworks",
    "TD3Builder",
    "TD3Config",
    "clipped_double_q_target",
    "dpg_policy_loss",
    "first_critic_q_value",
    "make_networks",
    "smoothed_target_action",
    "twin_critic_loss",
]
