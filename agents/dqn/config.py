"""DQN configuration. Units are given per field: actor steps are environment steps taken
by one actor; learner steps are gradient updates."""
from __future__ import annotations

import dataclasses
from typing import Optional, Tuple

from actorq import core


@dataclasses.dataclass
class DQNConfig:
  """Double DQN with n-step returns (Mnih et al. 2015; van Hasselt et al. 2016).

  The defaults solve CartPole-v1 (greedy return >= 475) within 100k actor steps.
  Rainbow-style options (Hessel et al. 2018), all off by default: prioritized replay
  with importance-sampling weights (`prioritized_replay`, Schaul et al. 2016) and a
  dueling head (`dueling`, Wang et al. 2016); n-step returns are `n_step`.
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
  # Prioritized replay (Schaul et al. 2016): P(i) = p_i^alpha / sum_k p_k^alpha through
  # Reverb's Prioritized selector, p_i = |TD error| + priority_epsilon after each learner
  # step, and the loss weighted by w_i = (N P(i))^-beta / max_j w_j, beta annealed
  # linearly from importance_sampling_exponent to 1 over this many *learner* steps.
  prioritized_replay: bool = False
  priority_exponent: float = 0.6  # alpha
  importance_sampling_exponent: float = 0.4  # beta at learner step 0
  importance_sampling_annealing_steps: int = 25_000
  priority_epsilon: float = 1e-6
  # Dueling head (Wang et al. 2016): the network's last layer outputs [V, A_1..A_n] and
  # Q = V + A - mean_a A (actors still run one plain sequential spec).
  dueling: bool = False

  def __post_init__(self):
    core.check_precision(self.actor_precision, "actor_precision")
    core.check_precision(self.evaluation_precision, "evaluation_precision", optional=True)
    if self.n_step < 1:
      raise ValueError(f"n_step must be >= 1, got {self.n_step}")
    if not 0.0 <= self.discount <= 1.0:
      raise ValueError(f"discount must be in [0, 1], got {self.discount}")
    if self.batch_size < 1 or self.target_update_period < 1:
      raise ValueError("batch_size and target_update_period must be >= 1")
    if self.samples_per_insert <= 0:
      raise ValueError(f"samples_per_insert must be > 0, got {self.samples_per_insert}")
    if self.priority_exponent < 0:
      raise ValueError(f"priority_exponent (alpha) must be >= 0, got {self.priority_exponent}")
    if not 0.0 <= self.importance_sampling_exponent <= 1.0:
      raise ValueError("importance_sampling_exponent (beta) must be in [0, 1], got "
                       f"{self.importance_sampling_exponent}")
    if self.importance_sampling_annealing_steps < 0:
      raise ValueError("importance_sampling_annealing_steps must be >= 0 learner steps, got "
                       f"{self.importance_sampling_annealing_steps}")
    if not self.priority_epsilon >= 0:
      raise ValueError(f"priority_epsilon must be >= 0, got {self.priority_epsilon}")
