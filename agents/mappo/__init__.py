"""MAPPO (Yu et al. 2022, "The Surprising Effectiveness of PPO in Cooperative Multi-Agent
Games"): PPO per parameter group with a centralized value function on the global state or
the joint observation; the policy (what the int8 actors run) sees the agent's own input.

`from actorq.agents import mappo`: mappo.MAPPOConfig, mappo.MAPPOBuilder,
mappo.make_networks, mappo.OnPolicyLearner (PPO's update per group)."""
from actorq.agents.mappo.config import MAPPOConfig
from actorq.agents.mappo.networks import InputLayout, make_networks
from actorq.agents.mappo.learning import OnPolicyLearner, make_update, rollout_targets
from actorq.agents.mappo.builder import CentralizedCriticPPOBuilder, MAPPOBuilder
