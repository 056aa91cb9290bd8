"""Configuration fields shared by the on-policy agents (A2C, PPO, IMPALA).

Units: actor steps are environment steps of one actor; a rollout is `rollout_length`
transitions; a learner step takes `batch_size` rollouts. Each agent's config subclasses
`OnPolicyConfig`, re-declares the fields whose defaults differ (a re-declared dataclass
field keeps its place and takes the new default) and adds its own loss settings.
"""
from __future__ import annotations

import dataclasses
from typing import Optional, Tuple

from actorq import core

ACTIVATIONS = ("tanh", "relu")


@dataclasses.dataclass
class OnPolicyConfig:
  """Networks, optimiser, rollouts, queue and actors of an on-policy agent."""
  policy_hidden: Tuple[int, ...] = (64, 64)
  value_hidden: Tuple[int, ...] = (64, 64)
  activation: str = "tanh"
  learning_rate: float = 1e-3
  # Linear decay of the learning rate to 0 over this many actor steps (None: constant).
  learning_rate_decay_steps: Optional[int] = None
  adam_eps: float = 1e-5
  max_gradient_norm: float = 40.0  # clipped separately for the policy and value nets
  discount: float = 0.99
  # Rollouts of T transitions (units: actor steps); a learner step takes `batch_size`.
  rollout_length: int = 20
  batch_size: int = 8
  max_queue_size: int = 64  # rollouts; a full queue blocks the actors
  variable_update_period: int = 4  # actor steps between parameter pulls
  actor_precision: str = "fp32"
  evaluation_precision: Optional[str] = None  # None: same as the actors
  replay_table_name: str = "rollouts"

  # Positive integer fields checked by __post_init__; subclasses extend it.
  COUNT_FIELDS = ("rollout_length", "batch_size", "max_queue_size", "variable_update_period")

  def __post_init__(self):
    """Raises ValueError naming the field, its value and what is allowed."""
    core.check_precision(self.actor_precision, "actor_precision")
    core.check_precision(self.evaluation_precision, "evaluation_precision", optional=True)
    if not 0.0 <= self.discount <= 1.0:
      raise ValueError(f"discount must be in [0, 1], got {self.discount}")
    for name in self.COUNT_FIELDS:
      if getattr(self, name) < 1:
        raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
    if self.learning_rate_decay_steps is not None and self.learning_rate_decay_steps < 1:
      raise ValueError(f"learning_rate_decay_steps must be >= 1 or None, got "
                       f"{self.learning_rate_decay_steps}")
    if self.activation not in ACTIVATIONS:
      raise ValueError(f"activation must be {' or '.join(map(repr, ACTIVATIONS))}, "
                       f"got {self.activation!r}")
