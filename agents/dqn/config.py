"""DQN configuration. Units are given per field: actor steps are environment steps (of a
distributed run: summed over its actors, as its step limit and exploration schedule count
them); learner steps are gradient updates."""
from __future__ import annotations

import dataclasses
from typing import Optional, Tuple

from actorq.components import config_checks as checks


@dataclasses.dataclass
class DQNConfig:
  """Double DQN with n-step returns (Mnih et al. 2015; van Hasselt et al. 2016) and two
  Rainbow components (Hessel et al. 2018), on by default: prioritized replay with
  importance-sampling weights (`prioritized_replay`, Schaul et al. 2016) and a dueling
  head (`dueling`, Wang et al. 2016); n-step returns are `n_step`.

  The defaults are tuned to solve CartPole-v1 on every seed within the default 100k
  actor steps (50k learner steps): the learning rate decays linearly to 0 over those
  50k learner steps, so the greedy policy of the last evaluations stops drifting.
  Measured over 5 seeds, 100k steps (`actorq sweep --agent dqn --seeds 0-4 --precisions
  fp32`): the earlier defaults (uniform replay, no dueling, decay to 0.1x over 25k learner
  steps) ended at >= 475 on 3/5 seeds; the decay to 0 alone on 4/5; with prioritized
  replay and the dueling head, 5/5 (each first >= 475 by 45k steps). See
  agents/dqn/README.md for the 10-seed figures. For another budget, set
  `learning_rate_decay_steps` to the run's learner steps.

  Every field is checked at construction (type, finite, range, allowed values) and so
  are `RULES`, the pairs of fields that could contradict each other.
  """
  hidden_sizes: Tuple[int, ...] = checks.field((256, 256), ge=1)
  learning_rate: float = checks.field(1e-3, gt=0.0)
  # Linear decay of the learning rate to learning_rate * final_learning_rate_fraction
  # over this many *learner* steps (None: constant); 50k = the default 100k actor steps
  # at 0.5 learner steps per actor step.
  learning_rate_decay_steps: Optional[int] = checks.field(50_000, ge=1)
  final_learning_rate_fraction: float = checks.field(0.0, ge=0.0, le=1.0)
  adam_eps: float = checks.field(1e-8, gt=0.0)
  max_gradient_norm: float = checks.field(10.0, gt=0.0)
  discount: float = checks.field(0.99, ge=0.0, le=1.0)
  n_step: int = checks.field(3, ge=1)
  huber_delta: float = checks.field(1.0, gt=0.0)
  double_q: bool = True
  batch_size: int = checks.field(64, ge=1)
  # Replay (units: transitions).
  min_replay_size: int = checks.field(1_000, ge=1)
  max_replay_size: int = checks.field(100_000, ge=1)
  # Sampled transitions per inserted transition; with batch_size B the learner takes
  # one step every B / samples_per_insert actor steps.
  samples_per_insert: float = checks.field(32.0, gt=0.0)
  # Copy online -> target parameters every this many *learner* steps (case E5).
  target_update_period: int = checks.field(500, ge=1)
  # Epsilon-greedy exploration, decayed linearly over *actor* steps (summed over the
  # actors of a distributed run: each of N actors counts its own steps times N).
  epsilon_start: float = checks.field(1.0, ge=0.0, le=1.0)
  epsilon_end: float = checks.field(0.01, ge=0.0, le=1.0)
  epsilon_decay_steps: int = checks.field(20_000, ge=0)
  # Actor steps between parameter pulls.
  variable_update_period: int = checks.field(10, ge=1)
  # Precision the actors act with: fp32, fp16, bf16, int8 (see quantization.runtimes).
  actor_precision: str = checks.precision_field("fp32")
  # None: same as the actors.
  evaluation_precision: Optional[str] = checks.precision_field(None)
  # Quantization-aware training: fake-quant the online network's weights (bits) or None.
  qat_bits: Optional[int] = checks.field(None, ge=2, le=8)
  replay_table_name: str = checks.field("priority_table", nonempty=True)
  # Prioritized replay (Schaul et al. 2016): P(i) = p_i^alpha / sum_k p_k^alpha through
  # Reverb's Prioritized selector, p_i = |TD error| + priority_epsilon after each learner
  # step, and the loss weighted by w_i = (N P(i))^-beta / max_j w_j, beta annealed
  # linearly from importance_sampling_exponent to 1 over this many *learner* steps.
  prioritized_replay: bool = True
  priority_exponent: float = checks.field(0.6, ge=0.0)  # alpha
  importance_sampling_exponent: float = checks.field(0.4, ge=0.0, le=1.0)  # beta at step 0
  importance_sampling_annealing_steps: int = checks.field(25_000, ge=0)
  priority_epsilon: float = checks.field(1e-6, ge=0.0)
  # Dueling head (Wang et al. 2016): the network's last layer outputs [V, A_1..A_n] and
  # Q = V + A - mean_a A (actors still run one plain sequential spec).
  dueling: bool = True

  RULES = (
      checks.Rule("need min_replay_size <= max_replay_size (learning starts once the "
                  "table holds min_replay_size transitions)",
                  lambda c: c.min_replay_size <= c.max_replay_size),
      checks.Rule("need epsilon_end <= epsilon_start (epsilon decays)",
                  lambda c: c.epsilon_end <= c.epsilon_start),
  )

  def __post_init__(self):
    """Raises ValueError naming the field(s), the value(s) and what is allowed
    (`actorq.components.config_checks`)."""
    checks.validate(self)
