"""Independent DQN's networks: DQN's (`agents/dqn/networks.py`), one per parameter group,
made for the group's per-agent spec (with parameter sharing the observation has the
one-hot agent id appended, float32 `[D + N]`)."""
from actorq.agents.dqn.networks import DQNNetworks, make_networks

__all__ = ["DQNNetworks", "make_networks"]
