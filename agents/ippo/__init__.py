"""Independent PPO (IPPO; de Witt et al. 2020, "Is Independent Learning All You Need in
the StarCraft Multi-Agent Challenge?"): PPO per parameter group of a multi-agent
environment, with or without parameter sharing (shared parameters take a one-hot agent id
with the observation).

`from actorq.agents import ippo` as in Acme: ippo.IPPOConfig, ippo.IPPOBuilder,
ippo.make_networks (PPO's, per group), ippo.OnPolicyLearner (PPO's update per group)."""
from actorq.agents.ippo.config import IPPOConfig
from actorq.agents.ippo.networks import PPONetworks, make_networks
from actorq.agents.ippo.learning import OnPolicyLearner, make_update, rollout_targets
from actorq.agents.ippo.builder import IPPOBuilder
