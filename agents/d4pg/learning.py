"""D4PG losses: the projected categorical TD loss of the critic; the learner itself is
`actorq.agents.dpg_common.learning.DPGLearner`."""
from __future__ import annotations

import chex
import jax
import jax.numpy as jnp
import rlax

from actorq.agents.dpg_common.learning import DPGLearner, dpg_policy_loss  # noqa: F401


def categorical_q_value(logits: jnp.ndarray, atoms: jnp.ndarray) -> jnp.ndarray:
  """Mean of the categorical distribution: float32 [B, N] logits, [N] atoms -> [B]."""
  return jnp.sum(jax.nn.softmax(logits, axis=-1) * atoms, axis=-1)


def d4pg_critic_loss(logits_tm1: jnp.ndarray, r_t: jnp.ndarray, discount_t: jnp.ndarray,
                     logits_t: jnp.ndarray, atoms: jnp.ndarray) -> jnp.ndarray:
  """Batch-mean cross-entropy to the projected distributional Bellman target.

  The target distribution puts the probabilities `softmax(logits_t)` (target critic at
  (s_t, pi'(s_t))) on the shifted atoms `r_t + discount_t * z`, projected back onto the
  fixed support `z` by the categorical (L2/Cramer) projection (Bellemare et al. 2017,
  Algorithm 1; Barth-Maron et al. 2018, eq. 7). With n-step transitions `r_t` is the
  n-step return and `discount_t = gamma * transition.discount`.

  Args:
    logits_tm1: float32 [B, N] online critic logits at (s_tm1, a_tm1).
    r_t: float32 [B] (n-step) returns.
    discount_t: float32 [B] bootstrap discounts.
    logits_t: float32 [B, N] target critic logits at (s_t, pi'(s_t)).
    atoms: float32 [N] increasing support.

  Returns:
    float32 scalar loss (no gradient flows into the target).

  Raises:
    ValueError: on shape mismatches.
  """
  message = "logits_tm1 and logits_t must both be [B, N]"
  chex.assert_rank(logits_tm1, 2, custom_message=message, exception_type=ValueError)
  chex.assert_equal_shape([logits_tm1, logits_t], custom_message=message,
                          exception_type=ValueError)
  b, n = logits_tm1.shape
  chex.assert_shape(atoms, (n,), custom_message="atoms must be [N]", exception_type=ValueError)
  chex.assert_shape([r_t, discount_t], (b,), custom_message="r_t and discount_t must be [B]",
                    exception_type=ValueError)
  losses = jax.vmap(rlax.categorical_td_learning, in_axes=(None, 0, 0, 0, None, 0))(
      atoms, logits_tm1, r_t, discount_t, atoms, logits_t)
  return jnp.mean(losses)
