"""Independent DQN (Tampuu et al. 2017): DQN per parameter group of a multi-agent
environment with discrete actions, with or without parameter sharing.

`from actorq.agents import idqn`: idqn.IDQNConfig, idqn.IDQNBuilder, idqn.make_networks
(DQN's, per group), idqn.DQNLearner (DQN's, per group)."""
from actorq.agents.idqn.config import IDQNConfig
from actorq.agents.idqn.networks import DQNNetworks, make_networks
from actorq.agents.idqn.learning import DQNLearner, dqn_loss
from actorq.agents.idqn.builder import IDQNBuilder
