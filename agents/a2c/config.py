"""A2C configuration. Units per field: actor steps are environment steps of one actor;
a learner step is one SGD step on a batch of `batch_size` rollouts."""
from __future__ import annotations

import dataclasses
from typing import Optional, Tuple


@dataclasses.dataclass
class A2CConfig:
  """Synchronous advantage actor-critic (Mnih et al. 2016, the synchronous variant of
  Algorithm S3): n-step (GAE) advantages, no off-policy correction.

  The defaults solve gym:CartPole-v1 (greedy return >= 475); see agents/a2c/README.md.
  """
  policy_hidden: Tuple[int, ...] = (64, 64)
  value_hidden: Tuple[int, ...] = (64, 64)
  activation: str = "tanh"
  learning_rate: float = 1e-3
  # Linear decay of the learning rate to 0 over this many actor steps (None: constant).
  learning_rate_decay_steps: Optional[int] = None
  adam_eps: float = 1e-5
  max_gradient_norm: float = 40.0  # clipped separately for the policy and value nets
  discount: float = 0.99
  gae_lambda: float = 1.0  # 1: n-step returns bootstrapped at the rollout end
  value_cost: float = 0.5
  entropy_cost: float = 0.01
  # Rollouts of T transitions (units: actor steps); a learner step takes `batch_size`.
  rollout_length: int = 20
  batch_size: int = 8
  max_queue_size: int = 64  # rollouts; a full queue blocks the actors
  variable_update_period: int = 4  # actor steps between parameter pulls
  actor_precision: str = "fp32"
  evaluation_precision: Optional[str] = None
  replay_table_name: str = "a2c_rollouts"

  def __post_init__(self):
    if not 0.0 <= self.discount <= 1.0 or not 0.0 <= self.gae_lambda <= 1.0:
      raise ValueError(f"discount and gae_lambda must be in [0, 1], got {self.discount}, "
                       f"{self.gae_lambda}")
    for name in ("rollout_length", "batch_size", "max_queue_size", "variable_update_period"):
      if getattr(self, name) < 1:
        raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
    if self.learning_rate_decay_steps is not None and self.learning_rate_decay_steps < 1:
      raise ValueError(f"learning_rate_decay_steps must be >= 1 or None, got "
                       f"{self.learning_rate_decay_steps}")
    if self.activation not in ("tanh", "relu"):
      raise ValueError(f"activation must be 'tanh' or 'relu', got {self.activation!r}")
