"""IPPO builder: `multiagent_common.IndependentBuilder` over PPO's builder (its networks,
clipped-surrogate learner, rollout queue and actors, unchanged)."""
from __future__ import annotations

from actorq.agents.ippo import config as config_lib
from actorq.agents.multiagent_common.builder import IndependentBuilder
from actorq.agents.ppo.builder import PPOBuilder


class IPPOBuilder(IndependentBuilder):
  """PPO for every parameter group: with sharing one PPO agent over all agents' rollouts
  (observations with one-hot agent ids), else one per agent."""
  config_class = config_lib.IPPOConfig
  agent_builder_class = PPOBuilder
