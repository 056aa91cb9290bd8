"""Pieces shared by the off-policy actor-critic agents (DDPG, D4PG, TD3, SAC): config bases,
policy/critic networks, the learner skeleton, its losses and the builders. Each agent
supplies only its critic head and critic loss. `from actorq.agents import dpg_common` gives
the public names of the four modules in one namespace."""
from actorq.agents.dpg_common.config import ActorCriticConfig, DPGConfig
from actorq.agents.dpg_common.networks import DPGNetworks, make_critic, make_networks
from actorq.agents.dpg_common.learning import (
    CriticLoss, DPGLearner, QValue, TrainingState, check_target_update, clipped_double_q_target,
    dpg_policy_loss, init_policy_and_critic, preactivation_penalty_loss, smoothed_target_action,
    target_update, twin_critic_loss)
from actorq.agents.dpg_common.builder import ActorCriticBuilder, DPGBuilder
