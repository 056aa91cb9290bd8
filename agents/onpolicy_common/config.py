"""Configuration fields shared by the on-policy agents (A2C, PPO, IMPALA), and the
truncated importance correction PPO and A2C add for actors that act with another policy
than the learner's fp32 one (`CorrectedOnPolicyConfig`).

Units: actor steps are environment steps of one actor; a rollout is `rollout_length`
transitions; a learner step takes `batch_size` rollouts. Each agent's config subclasses
`OnPolicyConfig`, re-declares the fields whose defaults differ (a re-declared dataclass
field keeps its place and takes the new default; a plain default keeps the checks declared
here, see `actorq.components.config_checks`) and adds its own loss settings.
"""
from __future__ import annotations

import dataclasses
from typing import Optional, Tuple

from actorq import core
from actorq.components import agent_config
from actorq.components import config_checks as checks

ACTIVATIONS = ("tanh", "relu")


@dataclasses.dataclass
class OnPolicyConfig(agent_config.ActorSettings):
  """Networks, optimiser, rollouts, queue and actors of an on-policy agent.

  Attributes:
    policy_hidden: widths of the policy network's hidden layers, each >= 1.
    value_hidden: widths of the value network's hidden layers, each >= 1.
    activation: the hidden layers' activation: tanh or relu.
    learning_rate: Adam's learning rate (at step 0 when it decays); > 0.
    learning_rate_decay_steps: actor steps over which the learning rate decays linearly
      to 0 (set it to the run's --steps for the usual "anneal over training"), or null:
      constant; >= 1.
    adam_eps: Adam's epsilon (numerical stability of the update); > 0.
    max_gradient_norm: global-norm clip of the gradient, separately for the policy and
      the value network; > 0.
    discount: per-step discount gamma of the return, in [0, 1].
    rollout_length: T, the transitions (actor steps) of one rollout; >= 1.
    batch_size: rollouts per learner step (batch_size * T transitions); >= 1 and <=
      max_queue_size.
    max_queue_size: rollouts the queue holds; a full queue blocks the actors; >= 1.
    replay_table_name: name of the Reverb queue of rollouts (non-empty).
  """
  policy_hidden: Tuple[int, ...] = checks.field((64, 64), ge=1)
  value_hidden: Tuple[int, ...] = checks.field((64, 64), ge=1)
  activation: str = checks.field("tanh", choices=ACTIVATIONS)
  learning_rate: float = checks.field(1e-3, gt=0.0)
  learning_rate_decay_steps: Optional[int] = checks.field(None, ge=1)
  adam_eps: float = checks.field(1e-5, gt=0.0)
  max_gradient_norm: float = checks.field(40.0, gt=0.0)
  discount: float = checks.field(0.99, ge=0.0, le=1.0)
  rollout_length: int = checks.field(20, ge=1)
  batch_size: int = checks.field(8, ge=1)
  max_queue_size: int = checks.field(64, ge=1)
  variable_update_period: int = 4
  replay_table_name: str = "rollouts"

  RULES = (
      checks.Rule("need batch_size <= max_queue_size (a learner step takes batch_size "
                  "rollouts from a queue that holds at most max_queue_size)",
                  lambda c: c.batch_size <= c.max_queue_size),
  )


@dataclasses.dataclass
class CorrectedOnPolicyConfig(OnPolicyConfig):
  """`OnPolicyConfig` plus the correction for the gap between the actors' behaviour
  policy mu (e.g. int8: the log-prob each actor stored is of the policy it ran) and the
  learner's fp32 policy pi: the policy-gradient terms are weighted by the truncated
  importance ratio `rho = min(importance_rho_bar, pi(a|s) / mu(a|s))` (as in IMPALA's
  V-trace, Espeholt et al. 2018; for quantized rollouts, FlashRL's truncated importance
  sampling, Yao et al. 2025). See `onpolicy_common.learning.truncated_importance_weights`.

  Attributes:
    importance_correction: weight the policy-gradient terms by the truncated importance
      ratio (true) or not (false); null: on exactly when actor_precision is not fp32
      (see `importance_correction_on`).
    importance_rho_bar: rho-bar, the truncation of the importance ratios pi/mu (1:
      IMPALA's); > 0.
  """
  importance_correction: Optional[bool] = None
  importance_rho_bar: float = checks.field(1.0, gt=0.0)

  def importance_correction_on(self) -> bool:
    """`importance_correction`, or when it is None whether the actors act at another
    precision than fp32 (their policy then differs from the learner's)."""
    if self.importance_correction is not None:
      return bool(self.importance_correction)
    return self.actor_precision != core.FP32
