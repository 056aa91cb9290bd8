"""DQN (Mnih et al. 2015) with double Q, n-step returns, prioritized replay and a dueling head.

`from actorq.agents import dqn` as in Acme: dqn.DQNConfig, dqn.DQNBuilder,
dqn.make_networks, dqn.DQNLearner, its update (dqn.DQNUpdate, which the population
vmaps) and its losses."""
from actorq.agents.dqn.config import DQNConfig
from actorq.agents.dqn.networks import DQNNetworks, dueling_network, dueling_q, make_networks
from actorq.agents.dqn.learning import (
    TD_OPERATORS, DQNLearner, DQNUpdate, PrioritizedReplay, TDOperator, TrainingState,
    UpdateOutputs, advantage_learning, annealed_exponent, dqn_loss, dqn_td_errors,
    importance_sampling_weights, munchausen_q_learning, transition_td_errors,
    weighted_transition_loss)
from actorq.agents.dqn.builder import DQNBuilder, q_policy, q_value_selector
