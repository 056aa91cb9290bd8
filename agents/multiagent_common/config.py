"""The config field every multi-agent agent adds to its single-agent agent's config."""
from __future__ import annotations

import dataclasses


@dataclasses.dataclass
class MultiAgentSettings:
  """Mixed into a multi-agent agent's config (e.g. `ippo.IPPOConfig`).

  Attributes:
    share_parameters: one network for every agent, fed the agent's observation with a
      one-hot agent id appended (all agents need the same observation and action specs),
      and one replay table; false: a network, learner and table per agent.
  """
  share_parameters: bool = True
