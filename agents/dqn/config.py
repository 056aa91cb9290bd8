"""DQN configuration. Units are given per field: actor steps are environment steps taken
by one actor; learner steps are gradient updates."""
from __future__ import annotations

import dataclasses
from typing import Optional, Tuple


@dataclasses.dataclass
class DQNConfig:
  """Double DQN with n-step returns (Mnih et al. 2015; van Hasselt et al. 2016).

  The defaults solve CartPole-v1 (greedy return >= 475) within 100k actor steps.
  """
  hidden_sizes: Tuple[int, ...] = (256, 256)
  learning_rate: float = 1e-3
  # Linear decay of the learning rate to learning_rate * final_learning_rate_fraction
  # over this many *learner* steps (None: constant).
  learning_rate_decay_steps: Optional[int] = 25_000
  final_learning_rate_fraction: float = 0.1
  adam_eps: float = 1e-8
  max_gradient_norm: float = 10.0
  discount: float = 0.99
  n_step: int = 3
  huber_delta: float = 1.0
  double_q: bool = True
  batch_size: int = 64
  # Replay (units: transitions).
  min_replay_size: int = 1_000
  max_replay_size: int = 100_000
  # Sampled transitions per inserted transition; with batch_size B the learner takes
  # one step every B / samples_per_insert actor steps.
  samples_per_insert: float = 32.0
  # Copy online -> target parameters every this many *learner* steps (case E5).
  target_update_period: int = 500
  # Epsilon-greedy exploration, decayed linearly over *actor* steps.
  epsilon_start: float = 1.0
  epsilon_end: float = 0.01
  epsilon_decay_steps: int = 20_000
  # Actor steps between parameter pulls.
  variable_update_period: int = 10
  # Precision the actors act with: fp32, fp16, bf16, int8 (see quantization.runtimes).
  actor_precision: str = "fp32"
  evaluation_precision: Optional[str] = None  # None: same as the actors
  # Quantization-aware training: fake-quant the online network's weights (bits) or None.
  qat_bits: Optional[int] = None
  replay_table_name: str = "priority_table"

  def __post_init__(self):
    if self.n_step < 1:
      raise ValueError(f"n_step must be >= 1, got {self.n_step}")
    if not 0.0 <= self.discount <= 1.0:
      raise ValueError(f"discount must be in [0, 1], got {self.discount}")
    if self.batch_size < 1 or self.target_update_period < 1:
      raise ValueError("batch_size and target_update_period must be >= 1")
    if self.samples_per_insert <= 0:
      raise ValueError(f"samples_per_insert must be > 0, got {self.samples_per_insert}")
