"""PPO configuration. Units per field: actor steps are environment steps of one actor;
a learner step consumes one batch of rollouts and runs `num_epochs` passes of minibatch
SGD over it."""
from __future__ import annotations

import dataclasses
from typing import Optional, Tuple


@dataclasses.dataclass
class PPOConfig:
  """PPO with the clipped surrogate objective and GAE (Schulman et al. 2017; 2016).

  The defaults solve gym:CartPole-v1 (greedy return >= 475); dmc:cartpole-balance
  (>= 800) uses agents/ppo/configs/dmc_cartpole_balance.json (2048-step rollouts, 10
  epochs of minibatch 64, linear learning-rate decay, state-independent log-std). See
  agents/ppo/README.md for the measured runs.
  """
  policy_hidden: Tuple[int, ...] = (64, 64)
  value_hidden: Tuple[int, ...] = (64, 64)
  activation: str = "tanh"
  learning_rate: float = 3e-4
  # Linear decay of the learning rate to 0 over this many actor steps (None: constant);
  # set it to the run's --steps for the usual "anneal over training" schedule.
  learning_rate_decay_steps: Optional[int] = None
  adam_eps: float = 1e-5
  max_gradient_norm: float = 0.5   # clipped separately for the policy and value nets
  discount: float = 0.99
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
  max_queue_size: int = 64   # rollouts
  variable_update_period: int = 4  # actor steps between parameter pulls
  actor_precision: str = "fp32"
  evaluation_precision: Optional[str] = None  # None: same as the actors
  replay_table_name: str = "ppo_rollouts"

  def __post_init__(self):
    if not 0.0 <= self.discount <= 1.0 or not 0.0 <= self.gae_lambda <= 1.0:
      raise ValueError(f"discount and gae_lambda must be in [0, 1], got {self.discount}, "
                       f"{self.gae_lambda}")
    if self.clip_epsilon <= 0:
      raise ValueError(f"clip_epsilon must be > 0, got {self.clip_epsilon}")
    for name in ("rollout_length", "batch_size", "num_epochs", "minibatch_size",
                 "max_queue_size", "variable_update_period"):
      if getattr(self, name) < 1:
        raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
    if self.learning_rate_decay_steps is not None and self.learning_rate_decay_steps < 1:
      raise ValueError(f"learning_rate_decay_steps must be >= 1 or None, got "
                       f"{self.learning_rate_decay_steps}")
    if self.activation not in ("tanh", "relu"):
      raise ValueError(f"activation must be 'tanh' or 'relu', got {self.activation!r}")
