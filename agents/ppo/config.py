"""PPO configuration. Units per field: actor steps are environment steps of one actor;
a learner step consumes one batch of rollouts and runs `num_epochs` passes of minibatch
SGD over it."""
from __future__ import annotations

import dataclasses

from actorq.agents.onpolicy_common.config import OnPolicyConfig


@dataclasses.dataclass
class PPOConfig(OnPolicyConfig):
  """PPO with the clipped surrogate objective and GAE (Schulman et al. 2017; 2016).

  The defaults solve gym:CartPole-v1 (greedy return >= 475); dmc:cartpole-balance
  (>= 800) uses agents/ppo/configs/dmc_cartpole_balance.json (2048-step rollouts, 10
  epochs of minibatch 64, linear learning-rate decay, state-independent log-std). See
  agents/ppo/README.md for the measured runs.
  """
  learning_rate: float = 3e-4
  # learning_rate_decay_steps: set it to the run's --steps for the usual "anneal over
  # training" schedule.
  max_gradient_norm: float = 0.5   # clipped separately for the policy and value nets
  gae_lambda: float = 0.95
  clip_epsilon: float = 0.2
  value_cost: float = 0.5
  entropy_cost: float = 0.0
  normalize_advantages: bool = True
  # Continuous actions: a state-independent log-std parameter (starting at
  # initial_log_std) instead of a log-std head (see onpolicy.ActorCriticNetworks).
  state_independent_log_std: bool = False
  initial_log_std: float = 0.0
  # Rollouts: T transitions each (units: actor steps); a learner step takes
  # `batch_size` rollouts, i.e. batch_size * T transitions.
  rollout_length: int = 128
  batch_size: int = 4
  num_epochs: int = 4
  minibatch_size: int = 128  # transitions; the last minibatch holds the remainder
  replay_table_name: str = "ppo_rollouts"

  COUNT_FIELDS = OnPolicyConfig.COUNT_FIELDS + ("num_epochs", "minibatch_size")

  def __post_init__(self):
    super().__post_init__()
    if not 0.0 <= self.gae_lambda <= 1.0:
      raise ValueError(f"gae_lambda must be in [0, 1], got {self.gae_lambda}")
    if self.clip_epsilon <= 0:
      raise ValueError(f"clip_epsilon must be > 0, got {self.clip_epsilon}")
