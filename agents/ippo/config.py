"""IPPO configuration: PPO's (`agents/ppo/config.py`, every field and unit as there; actor
steps are environment steps, one per joint step of all agents) plus parameter sharing.
A rollout is one agent's `rollout_length` transitions; a learner step of a group takes
`batch_size` rollouts of its agents."""
from __future__ import annotations

import dataclasses

from actorq.agents.multiagent_common.config import MultiAgentSettings
from actorq.agents.ppo.config import PPOConfig


@dataclasses.dataclass
class IPPOConfig(MultiAgentSettings, PPOConfig):
  """PPO per parameter group (see `MultiAgentSettings.share_parameters`).

  Attributes:
    replay_table_name: the rollout queue of the shared group; without sharing each agent's
      is `<replay_table_name>_<agent>`.
  """
  replay_table_name: str = "ippo_rollouts"
