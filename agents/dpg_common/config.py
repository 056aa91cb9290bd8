"""Configuration shared by DDPG and D4PG. Units per field: *actor steps* are environment
steps taken by one actor; *learner steps* are gradient updates (one critic and one
policy update each)."""
from __future__ import annotations

import dataclasses
from typing import Optional, Tuple

from actorq import core


@dataclasses.dataclass
class DPGConfig:
  """Deterministic policy gradient agent settings (Lillicrap et al. 2016)."""
  policy_hidden_sizes: Tuple[int, ...] = (256, 256)
  critic_hidden_sizes: Tuple[int, ...] = (256, 256)
  # Acme's LayerNormMLP critic torso (linear -> LayerNorm -> tanh, then ELU layers)
  # instead of a ReLU MLP; see agents/dpg_common/networks.make_critic.
  critic_layer_norm: bool = False
  # Std of the policy's output-layer init as VarianceScaling(scale) (1e-4: Acme's
  # near-zero policy head, tanh starts unsaturated); None: Haiku's default.
  policy_output_init_scale: Optional[float] = None
  policy_learning_rate: float = 3e-4
  critic_learning_rate: float = 3e-4
  max_gradient_norm: float = 40.0  # global-norm clip of each network's gradient
  discount: float = 0.99
  n_step: int = 5
  batch_size: int = 256
  # Replay (units: transitions).
  min_replay_size: int = 1_000
  max_replay_size: int = 1_000_000
  # Sampled transitions per inserted transition: one learner step every
  # batch_size / samples_per_insert actor steps.
  samples_per_insert: float = 64.0
  # Target networks: every `target_update_period` learner steps,
  # target <- tau * online + (1 - tau) * target. tau = 1 is a periodic hard copy
  # (exact: target == online right after learner steps K, 2K, ...); period 1 with a
  # small tau is Polyak averaging.
  target_update_period: int = 100
  target_update_tau: float = 1.0
  # Gaussian exploration noise, std in units of half the action range (= units of the
  # policy's tanh output; see actorq.components.continuous).
  sigma: float = 0.3
  # Clip dQ/da per sample to this L2 norm in the policy loss (None: no clip).
  dqda_clipping: Optional[float] = None
  # Actor steps between parameter pulls.
  variable_update_period: int = 10
  # Precision the actors act with: fp32, fp16, bf16, int8 (see quantization.runtimes).
  actor_precision: str = "fp32"
  evaluation_precision: Optional[str] = None  # None: same as the actors
  # Quantization-aware training: fake-quant the policy's weights (bits) or None.
  qat_bits: Optional[int] = None
  replay_table_name: str = "priority_table"

  def __post_init__(self):
    core.check_precision(self.actor_precision, "actor_precision")
    core.check_precision(self.evaluation_precision, "evaluation_precision", optional=True)
    if self.n_step < 1:
      raise ValueError(f"n_step must be >= 1, got {self.n_step}")
    if not 0.0 <= self.discount <= 1.0:
      raise ValueError(f"discount must be in [0, 1], got {self.discount}")
    if self.batch_size < 1 or self.target_update_period < 1:
      raise ValueError("batch_size and target_update_period must be >= 1")
    if not 0.0 < self.target_update_tau <= 1.0:
      raise ValueError(f"target_update_tau must be in (0, 1], got {self.target_update_tau}")
    if self.samples_per_insert <= 0:
      raise ValueError(f"samples_per_insert must be > 0, got {self.samples_per_insert}")
    if self.policy_output_init_scale is not None and not self.policy_output_init_scale > 0:
      raise ValueError("policy_output_init_scale must be > 0 or None, got "
                       f"{self.policy_output_init_scale}")
    if self.critic_layer_norm and not len(self.critic_hidden_sizes):
      raise ValueError("critic_layer_norm needs at least one critic hidden layer")
    if self.sigma < 0:
      raise ValueError(f"sigma must be >= 0, got {self.sigma}")
    if self.min_replay_size < 1 or self.max_replay_size < self.min_replay_size:
      raise ValueError("need 1 <= min_replay_size <= max_replay_size, got "
                       f"{self.min_replay_size} and {self.max_replay_size}")
