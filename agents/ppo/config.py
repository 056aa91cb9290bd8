"""PPO configuration. Units per field: actor steps are environment steps of one actor;
a learner step consumes one batch of rollouts and runs `num_epochs` passes of minibatch
SGD over it."""
from __future__ import annotations

import dataclasses

from actorq.agents.onpolicy_common.config import CorrectedOnPolicyConfig
from actorq.agents.onpolicy_common.networks import LOG_STD_MAX, LOG_STD_MIN
from actorq.components import config_checks as checks


@dataclasses.dataclass
class PPOConfig(CorrectedOnPolicyConfig):
  """PPO with the clipped surrogate objective and GAE (Schulman et al. 2017; 2016).

  The defaults solve gym:CartPole-v1 (greedy return >= 475); dmc:cartpole-balance
  (>= 800) uses agents/ppo/configs/dmc_cartpole_balance.json (2048-step rollouts, 10
  epochs of minibatch 64, linear learning-rate decay, state-independent log-std). See
  agents/ppo/README.md for the measured runs. With actors at another precision than fp32
  the importance correction is on by default (`importance_correction`, see
  `agents/ppo/learning.py`).

  Attributes:
    gae_lambda: lambda of the GAE advantages (Schulman et al. 2016), in [0, 1].
    clip_epsilon: epsilon of the clipped surrogate objective (eq. 7); > 0.
    value_cost: weight of the value loss (eq. 9's c1); >= 0.
    entropy_cost: weight of the entropy bonus (eq. 9's c2); >= 0.
    normalize_advantages: normalize the advantages of each minibatch to mean 0, std 1.
    state_independent_log_std: continuous actions: a state-independent log-std parameter
      (starting at initial_log_std) instead of a log-std head (see
      `onpolicy_common.ActorCriticNetworks`).
    initial_log_std: the state-independent log-std at the start, within the log-std
      bounds of `onpolicy_common.networks` (LOG_STD_MIN, LOG_STD_MAX).
    rollout_length: T, the transitions (actor steps) of one rollout; a learner step
      takes batch_size rollouts, i.e. batch_size * T transitions.
    num_epochs: passes of minibatch SGD over a learner step's transitions; >= 1.
    minibatch_size: transitions per SGD step (the last minibatch of a pass holds the
      remainder); >= 1 and <= batch_size * rollout_length.
  """
  learning_rate: float = 3e-4
  max_gradient_norm: float = 0.5
  gae_lambda: float = checks.field(0.95, ge=0.0, le=1.0)
  clip_epsilon: float = checks.field(0.2, gt=0.0)
  value_cost: float = checks.field(0.5, ge=0.0)
  entropy_cost: float = checks.field(0.0, ge=0.0)
  normalize_advantages: bool = True
  state_independent_log_std: bool = False
  initial_log_std: float = checks.field(0.0, ge=LOG_STD_MIN, le=LOG_STD_MAX)
  rollout_length: int = 128
  batch_size: int = 4
  num_epochs: int = checks.field(4, ge=1)
  minibatch_size: int = checks.field(128, ge=1)
  replay_table_name: str = "ppo_rollouts"

  RULES = CorrectedOnPolicyConfig.RULES + (
      checks.Rule("need minibatch_size <= batch_size * rollout_length (a minibatch is "
                  "drawn from the batch_size * rollout_length transitions of a learner step)",
                  lambda c: c.minibatch_size <= c.batch_size * c.rollout_length),
  )
