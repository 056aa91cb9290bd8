"""A2C configuration. Units per field: actor steps are environment steps of one actor;
a learner step is one SGD step on a batch of `batch_size` rollouts."""
from __future__ import annotations

import dataclasses

from actorq.agents.onpolicy_common.config import OnPolicyConfig


@dataclasses.dataclass
class A2CConfig(OnPolicyConfig):
  """Synchronous advantage actor-critic (Mnih et al. 2016, the synchronous variant of
  Algorithm S3): n-step (GAE) advantages, no off-policy correction.

  The defaults solve gym:CartPole-v1 (greedy return >= 475); see agents/a2c/README.md.
  """
  gae_lambda: float = 1.0  # 1: n-step returns bootstrapped at the rollout end
  value_cost: float = 0.5
  entropy_cost: float = 0.01
  replay_table_name: str = "a2c_rollouts"

  def __post_init__(self):
    super().__post_init__()
    if not 0.0 <= self.gae_lambda <= 1.0:
      raise ValueError(f"gae_lambda must be in [0, 1], got {self.gae_lambda}")
