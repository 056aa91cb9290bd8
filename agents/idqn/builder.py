"""Independent DQN builder: `multiagent_common.IndependentBuilder` over DQN's builder
(its networks, learner, transition table, batched n-step adder with one window per
(environment, agent) stream, and epsilon-greedy actors, unchanged)."""
from __future__ import annotations

from actorq.agents.dqn.builder import DQNBuilder
from actorq.agents.idqn import config as config_lib
from actorq.agents.multiagent_common.builder import IndependentBuilder


class IDQNBuilder(IndependentBuilder):
  """DQN for every parameter group (Tampuu et al. 2017, "Multiagent cooperation and
  competition with deep reinforcement learning"): with sharing one DQN over all agents'
  transitions (observations with one-hot agent ids), else one per agent."""
  config_class = config_lib.IDQNConfig
  agent_builder_class = DQNBuilder
