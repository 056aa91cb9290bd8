"""IPPO's networks: PPO's (`agents/ppo/networks.py`), one set per parameter group, made
for the group's per-agent spec (`components.acting.multi_agent.ParameterGroup
.environment_spec`: with parameter sharing the observation has the one-hot agent id
appended, float32 `[D + N]`)."""
from actorq.agents.ppo.networks import PPONetworks, make_networks

__all__ = ["PPONetworks", "make_networks"]
