"""DQN configuration. Units are given per field: actor steps are environment steps (of a
distributed run: summed over its actors, as its step limit and exploration schedule count
them); learner steps are gradient updates."""
from __future__ import annotations

import dataclasses
from typing import Optional, Tuple

from actorq.components import agent_config
from actorq.components import config_checks as checks


@dataclasses.dataclass
class DQNConfig(agent_config.OffPolicySettings, agent_config.EpsilonGreedySettings):
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
  are `RULES`, the pairs of fields that could contradict each other. Units: actor steps
  and learner steps (module docstring); replay items are n-step transitions.

  Attributes:
    hidden_sizes: widths of the Q-network's hidden layers (ReLU), each >= 1.
    learning_rate: Adam's learning rate at learner step 0; > 0.
    learning_rate_decay_steps: learner steps over which the learning rate decays linearly
      to learning_rate * final_learning_rate_fraction (null: constant); 50k = the default
      100k actor steps at 0.5 learner steps per actor step.
    final_learning_rate_fraction: the decayed learning rate as a fraction of
      learning_rate, in [0, 1].
    adam_eps: Adam's epsilon (numerical stability of the update); > 0.
    max_gradient_norm: global-norm clip of the gradient; > 0.
    discount: per-step discount gamma of the return, in [0, 1].
    n_step: steps summed in each n-step return (Sutton and Barto 2018, 7.1); >= 1.
    huber_delta: threshold of the Huber TD loss (Mnih et al. 2015: 1); > 0.
    double_q: the target's action is the online network's argmax (double DQN, van
      Hasselt et al. 2016); false: the target network's max.
    batch_size: transitions per learner step; >= 1.
    max_replay_size: capacity of the replay table (transitions); the oldest are evicted.
    samples_per_insert: sampled transitions per inserted transition: with batch_size B
      the learner takes one step every B / samples_per_insert actor steps; > 0.
    target_update_period: learner steps between two copies online -> target parameters
      (Mnih et al. 2015's C); >= 1.
    qat_bits: quantization-aware training: fake-quantize the online network's weights to
      this many bits in the learner's forward pass (2 to 8), or null (off).
    prioritized_replay: prioritized replay (Schaul et al. 2016): P(i) = p_i^alpha /
      sum_k p_k^alpha through Reverb's Prioritized selector, p_i = |TD error| +
      priority_epsilon after each learner step, and the loss weighted by importance-
      sampling weights w_i = (N P(i))^-beta / max_j w_j; false: uniform replay.
    priority_exponent: alpha of prioritized replay (0: uniform); >= 0.
    importance_sampling_exponent: beta at learner step 0, annealed linearly to 1 over
      importance_sampling_annealing_steps, in [0, 1].
    importance_sampling_annealing_steps: learner steps over which beta reaches 1; >= 0.
    priority_epsilon: added to |TD error| so that no priority is 0; >= 0.
    dueling: dueling head (Wang et al. 2016): the network's last layer outputs
      [V, A_1..A_n] and Q = V + A - mean_a A (actors still run one plain sequential
      spec); false: a plain Q head.
    td_operator: the TD target the loss regresses on (`learning.TD_OPERATORS`):
      "q_learning" ((double) Q-learning, the default), "advantage_learning" (Bellemare et
      al. 2016: minus td_operator_alpha times the target network's action gap of the
      taken action) or "munchausen" (Munchausen DQN, Vieillard et al. 2020: plus
      td_operator_alpha times the clipped scaled log-policy of the taken action, soft
      bootstrap at munchausen_temperature; double_q does not apply). Both widen the
      action gap, which makes the greedy action robust to errors in the Q-values (such
      as int8 rounding).
    td_operator_alpha: advantage-learning coefficient / Munchausen scaling, in [0, 1)
      (both papers: 0.9); unused by q_learning.
    munchausen_temperature: Munchausen's entropy temperature tau (paper: 0.03), in
      return units; > 0.
  """
  hidden_sizes: Tuple[int, ...] = checks.field((256, 256), ge=1)
  learning_rate: float = checks.field(1e-3, gt=0.0)
  learning_rate_decay_steps: Optional[int] = checks.field(50_000, ge=1)
  final_learning_rate_fraction: float = checks.field(0.0, ge=0.0, le=1.0)
  adam_eps: float = checks.field(1e-8, gt=0.0)
  max_gradient_norm: float = checks.field(10.0, gt=0.0)
  discount: float = checks.field(0.99, ge=0.0, le=1.0)
  n_step: int = checks.field(3, ge=1)
  huber_delta: float = checks.field(1.0, gt=0.0)
  double_q: bool = True
  batch_size: int = checks.field(64, ge=1)
  max_replay_size: int = 100_000
  samples_per_insert: float = 32.0
  target_update_period: int = 500
  qat_bits: Optional[int] = checks.field(None, ge=2, le=8)
  prioritized_replay: bool = True
  priority_exponent: float = checks.field(0.6, ge=0.0)
  importance_sampling_exponent: float = checks.field(0.4, ge=0.0, le=1.0)
  importance_sampling_annealing_steps: int = checks.field(25_000, ge=0)
  priority_epsilon: float = checks.field(1e-6, ge=0.0)
  dueling: bool = True
  td_operator: str = checks.field("q_learning", choices=("q_learning", "advantage_learning",
                                                         "munchausen"))
  td_operator_alpha: float = checks.field(0.9, ge=0.0, lt=1.0)
  munchausen_temperature: float = checks.field(0.03, gt=0.0)

  RULES = agent_config.OffPolicySettings.RULES + (
      agent_config.EpsilonGreedySettings.EPSILON_RULE,)
