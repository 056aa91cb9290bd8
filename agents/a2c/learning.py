"""A2C learner: n-step / GAE advantages (rlax), the advantage policy gradient
(`rlax.policy_gradient_loss`), a squared-error baseline and an entropy bonus
(Mnih et al. 2016, Algorithm S3, synchronous), one SGD step per batch of rollouts."""
from __future__ import annotations

from typing import Dict, Tuple

import jax
import jax.numpy as jnp
import optax
import rlax

from actorq.agents import onpolicy_common as onpolicy


def a2c_loss(head: onpolicy.PolicyHead, outputs: jnp.ndarray, values: jnp.ndarray,
             actions: jnp.ndarray, r_t: jnp.ndarray, discount_t: jnp.ndarray, mask: jnp.ndarray,
             lambda_: float = 1.0, value_cost: float = 0.5, entropy_cost: float = 0.01
             ) -> Tuple[jnp.ndarray, Dict[str, jnp.ndarray]]:
  """A2C loss of one rollout: -log pi(a_t|s_t) A_t + value_cost (R_t - V(s_t))^2 / 2
  - entropy_cost H(pi(.|s_t)), averaged over the unmasked transitions.

  A_t is the truncated GAE (lambda 1: R_t - V(s_t) with the n-step return R_t =
  sum_k gamma^k r_{t+k} + gamma^(T-t) V(s_T)), cut before acme's terminal steps.

  Args:
    outputs: float32 `[T, head.output_size]` policy outputs at s_0..s_{T-1}.
    values: float32 `[T + 1]` V(s_0..s_T) (the last is the bootstrap).
    actions: int `[T]` or float32 `[T, A]` (raw Gaussian samples).
    r_t, discount_t, mask: float32 `[T]` (discount_t = gamma * d_t).

  Returns:
    (float32 scalar, metrics).

  Raises:
    ValueError: for `values` not of shape [T + 1].
  """
  t = outputs.shape[0]
  if values.shape != (t + 1,):
    raise ValueError(f"values must have shape [{t + 1}] (T + 1 with the bootstrap), got {values.shape}")
  adv = rlax.truncated_generalized_advantage_estimation(
      r_t, discount_t, onpolicy.trace_lambda(lambda_, mask), values, stop_target_gradients=True)
  returns = jax.lax.stop_gradient(adv + values[:-1])
  norm = t / jnp.maximum(jnp.sum(mask), 1.0)  # rlax's losses average over T
  if head.discrete:
    pg_loss = rlax.policy_gradient_loss(outputs, actions, adv, mask) * norm
    ent = -rlax.entropy_loss(outputs, mask) * norm
  else:
    log_pi = onpolicy.log_prob(head, outputs, actions)
    pg_loss = -onpolicy.masked_mean(log_pi * jax.lax.stop_gradient(adv), mask)
    ent = onpolicy.masked_mean(onpolicy.entropy(head, outputs), mask)
  value_loss = onpolicy.masked_mean(0.5 * jnp.square(returns - values[:-1]), mask)
  loss = pg_loss + value_cost * value_loss - entropy_cost * ent
  return loss, {"pg_loss": pg_loss, "value_loss": value_loss, "entropy": ent}


def make_update(networks: onpolicy.ActorCriticNetworks, optimizer: optax.GradientTransformation,
                config):
  """A2C's pure learner step on a batch of rollouts `[B, T + 1]`."""
  head = networks.head

  def per_rollout_loss(outputs, values, actions, r_t, discount_t, mask, extras):
    del extras
    return a2c_loss(head, outputs, values, actions, r_t, discount_t, mask, config.gae_lambda,
                    config.value_cost, config.entropy_cost)

  return onpolicy.rollout_loss_update(networks, optimizer, config.discount, per_rollout_loss)
