"""IMPALA configuration. Units per field: actor steps are environment steps of one actor;
a learner step is one SGD step on a batch of `batch_size` rollouts."""
from __future__ import annotations

import dataclasses
from typing import Optional, Tuple


@dataclasses.dataclass
class IMPALAConfig:
  """IMPALA: V-trace targets and the importance-weighted policy gradient
  (Espeholt et al. 2018, eq. 1 and 4). The actors' behaviour log-probs (from their own,
  possibly int8, policy) are the `mu` of the importance ratios.

  gym:CartPole-v1 (greedy return >= 475, seed 0): `configs/cartpole.json` single-process
  (fp32 and int8 actors), `configs/cartpole_distributed.json` or the defaults with
  `--launch local_mp --num-actors 2` (fp32; int8 not reliably); see agents/impala/README.md.
  """
  policy_hidden: Tuple[int, ...] = (64, 64)
  value_hidden: Tuple[int, ...] = (64, 64)
  activation: str = "tanh"
  learning_rate: float = 1e-3
  # Linear decay of the learning rate to 0 over this many actor steps, summed over
  # actors (None: constant); see `learning.learning_rate_schedule`.
  learning_rate_decay_steps: Optional[int] = None
  adam_eps: float = 1e-5
  max_gradient_norm: float = 40.0  # clipped separately for the policy and value nets
  discount: float = 0.99
  vtrace_lambda: float = 1.0
  clip_rho_threshold: float = 1.0     # rho-bar
  clip_pg_rho_threshold: float = 1.0  # rho-bar of the policy-gradient ratio
  baseline_cost: float = 0.5
  entropy_cost: float = 0.01
  # Rollouts of T transitions (units: actor steps); a learner step takes `batch_size`.
  rollout_length: int = 20
  batch_size: int = 8
  max_queue_size: int = 64  # rollouts; a full queue blocks the actors
  variable_update_period: int = 4  # actor steps between parameter pulls
  actor_precision: str = "fp32"
  evaluation_precision: Optional[str] = None
  replay_table_name: str = "impala_rollouts"

  def __post_init__(self):
    if not 0.0 <= self.discount <= 1.0 or not 0.0 <= self.vtrace_lambda <= 1.0:
      raise ValueError(f"discount and vtrace_lambda must be in [0, 1], got {self.discount}, "
                       f"{self.vtrace_lambda}")
    if self.clip_rho_threshold <= 0 or self.clip_pg_rho_threshold <= 0:
      raise ValueError("clip_rho_threshold and clip_pg_rho_threshold must be > 0")
    for name in ("rollout_length", "batch_size", "max_queue_size", "variable_update_period"):
      if getattr(self, name) < 1:
        raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
    if self.learning_rate_decay_steps is not None and self.learning_rate_decay_steps < 1:
      raise ValueError(f"learning_rate_decay_steps must be >= 1 or None, got "
                       f"{self.learning_rate_decay_steps}")
    if self.activation not in ("tanh", "relu"):
      raise ValueError(f"activation must be 'tanh' or 'relu', got {self.activation!r}")
