"""Independent DQN configuration: DQN's (`agents/dqn/config.py`, every field and unit as
there, an actor step being one agent's transition) plus parameter sharing."""
from __future__ import annotations

import dataclasses

from actorq.agents.dqn.config import DQNConfig
from actorq.agents.multiagent_common.config import MultiAgentSettings
from actorq.components import config_checks as checks


@dataclasses.dataclass
class IDQNConfig(MultiAgentSettings, DQNConfig):
  """DQN per parameter group (see `MultiAgentSettings.share_parameters`), discrete
  actions only. `min_replay_size`, `samples_per_insert` and the epsilon schedule count a
  group's agent transitions (a shared group of N agents takes N per environment step).

  Attributes:
    replay_table_name: the transition table of the shared group; without sharing each
      agent's is `<replay_table_name>_<agent>`.
  """
  replay_table_name: str = checks.field("idqn_transitions", nonempty=True)
