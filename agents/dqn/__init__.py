"""DQN (Mnih et al. 2015) with double Q, n-step returns, prioritized replay and a dueling head.

As in Acme, the package is the agent's public face:

    from actorq.agents import dqn
    config = dqn.DQNConfig(...)
    builder = dqn.DQNBuilder(config)

Exports the config, networks, learner (with its losses) and builder; results: README.md."""
from actorq.agents.dqn.config import DQNConfig
from actorq.agents.dqn.networks import DQNNetworks, dueling_network, dueling_q, make_networks
from actorq.agents.dqn.learning import (
    DQNLearner, PrioritizedReplay, TrainingState, annealed_exponent, dqn_loss, dqn_td_errors,
    importance_sampling_weights)
from actorq.agents.dqn.builder import DQNBuilder, q_policy, q_value_selector

__all__ = [
    "DQNBuilder",
    "DQNConfig",
    "DQNLearner",
    "DQNNetworks",
    "PrioritizedReplay",
    "TrainingState",
    "annealed_exponent",
    "dqn_loss",
    "dqn_td_errors",
    "dueling_network",
    "dueling_q",
    "importance_sampling_weights",
    "make_networks",
    "q_policy",
    "q_value_selector",
]
