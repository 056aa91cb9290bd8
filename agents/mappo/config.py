"""MAPPO configuration: IPPO's (`agents/ippo/config.py`: PPO's fields and parameter
sharing) plus what the centralized value function sees."""
from __future__ import annotations

import dataclasses

from actorq.agents.ippo.config import IPPOConfig
from actorq.components import config_checks as checks

CRITIC_INPUTS = ("state", "joint_observation")


@dataclasses.dataclass
class MAPPOConfig(IPPOConfig):
  """PPO with a centralized value function (Yu et al. 2022, "The Surprising Effectiveness
  of PPO in Cooperative Multi-Agent Games", sec. 3 and appendix on the value inputs): the
  policy acts on the agent's own observation (with its one-hot id under sharing), the
  value function is trained on the global input below (with the id under sharing).

  Attributes:
    critic_input: what the value function sees: "state" (the environment's global state,
      PettingZoo's state(); MAPPO's "EP" input) or "joint_observation" (every agent's
      observation concatenated in agent order, zeros for agents that finished; the "CL"
      input).
    replay_table_name: the rollout queue of the shared group; without sharing each agent's
      is `<replay_table_name>_<agent>`.
  """
  critic_input: str = checks.field("state", choices=CRITIC_INPUTS)
  replay_table_name: str = "mappo_rollouts"
