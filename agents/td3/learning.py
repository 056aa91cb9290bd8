"""TD3 losses (Fujimoto et al. 2018). The learner is the shared
`actorq.agents.dpg_common.learning.DPGLearner` with `policy_delay` (sec. 5.2, delayed
policy and target updates) and `target_policy_noise` (eq. 14, target policy smoothing);
its critic loss is the twin-critic `twin_critic_loss` (eq. 10, clipped double Q-learning)
and the policy follows the first critic (Algorithm 1: `grad_a Q_theta1(s, a)`)."""
from __future__ import annotations

import jax.numpy as jnp

from actorq.agents.dpg_common.learning import (  # noqa: F401
    DPGLearner, clipped_double_q_target, dpg_policy_loss, smoothed_target_action,
    twin_critic_loss)


def first_critic_q_value(q: jnp.ndarray) -> jnp.ndarray:
  """float32 [B, 2] twin critic outputs -> [B], Q_theta1 (the policy's critic)."""
  return q[..., 0]
