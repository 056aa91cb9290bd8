"""TD3 (Fujimoto et al. 2018): twin critics, delayed policy updates, target policy smoothing.

`from actorq.agents import td3` as in Acme: td3.TD3Config, td3.TD3Builder,
td3.make_networks, td3.DPGLearner (the family's) and its losses."""
from actorq.agents.td3.config import TD3Config
from actorq.agents.td3.networks import DPGNetworks, make_networks
from actorq.agents.td3.learning import (
    DPGLearner, clipped_double_q_target, dpg_policy_loss, first_critic_q_value,
    smoothed_target_action, twin_critic_loss)
from actorq.agents.td3.builder import TD3Builder
