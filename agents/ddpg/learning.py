"""DDPG losses: the critic's TD loss; the learner itself is
`actorq.agents.dpg_common.learning.DPGLearner`."""
from __future__ import annotations

from typing import Optional

import chex
import jax
import jax.numpy as jnp
import rlax

from actorq.agents.dpg_common.learning import DPGLearner, dpg_policy_loss  # noqa: F401


def scalar_q_value(q: jnp.ndarray) -> jnp.ndarray:
  """float32 [B, 1] critic output -> [B]."""
  return q[..., 0]


def ddpg_critic_loss(q_tm1: jnp.ndarray, r_t: jnp.ndarray, discount_t: jnp.ndarray,
                     q_t: jnp.ndarray, huber_delta: Optional[float] = None) -> jnp.ndarray:
  """Batch-mean TD loss `0.5 * (r_t + discount_t * q_t - q_tm1)^2` (Huber if `huber_delta`).

  `q_t` is the target critic at (s_t, pi'(s_t)) and receives no gradient (Lillicrap et
  al. 2016, eq. 4-5 / Algorithm 1). With n-step transitions `r_t` is the n-step return
  and `discount_t = gamma * transition.discount`.

  Args:
    q_tm1: float32 [B] or [B, 1] online critic at (s_tm1, a_tm1).
    r_t: float32 [B] (n-step) returns.
    discount_t: float32 [B] bootstrap discounts.
    q_t: float32, same shape as q_tm1, target critic values.
    huber_delta: Huber threshold, or None for the squared loss.

  Returns:
    float32 scalar.

  Raises:
    ValueError: on shape mismatches.
  """
  if q_tm1.ndim == 2 and q_tm1.shape[-1] == 1:
    q_tm1 = q_tm1[:, 0]
  if q_t.ndim == 2 and q_t.shape[-1] == 1:
    q_t = q_t[:, 0]
  message = "q_tm1 and q_t must both be [B] or [B, 1]"
  chex.assert_rank(q_tm1, 1, custom_message=message, exception_type=ValueError)
  chex.assert_equal_shape([q_tm1, q_t], custom_message=message, exception_type=ValueError)
  chex.assert_equal_shape([q_tm1, r_t, discount_t], exception_type=ValueError,
                          custom_message="r_t and discount_t must be [B] like q_tm1")
  td = jax.vmap(rlax.td_learning)(q_tm1, r_t, discount_t, q_t)
  if huber_delta is None:
    return jnp.mean(rlax.l2_loss(td))
  return jnp.mean(rlax.huber_loss(td, huber_delta))
