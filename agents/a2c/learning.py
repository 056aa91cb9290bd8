"""A2C learner: n-step / GAE advantages (rlax), the advantage policy gradient
(`rlax.policy_gradient_loss`), a squared-error baseline and an entropy bonus
(Mnih et al. 2016, Algorithm S3, synchronous), one SGD step per batch of rollouts.

With the importance correction (`A2CConfig.importance_correction_on()`, the default for
non-fp32 actors) the policy gradient of each action is weighted by the truncated
importance weight `min(rho_bar, pi(a|s) / mu(a|s))` of the learner's fp32 policy pi
against the actors' (e.g. int8) mu (`onpolicy.truncated_importance_weights`; the
off-policy actor-critic gradient of Degris et al. 2012, truncated as in IMPALA);
the value targets stay the uncorrected n-step returns. `behaviour_kl` (an estimate of
KL(mu || pi), `onpolicy.behaviour_kl`) is logged either way."""
from __future__ import annotations

from typing import Dict, Optional, Tuple

import chex
import jax
import jax.numpy as jnp
import optax
import rlax

from actorq.agents import onpolicy_common as onpolicy


def a2c_loss(head: onpolicy.PolicyHead, outputs: jnp.ndarray, values: jnp.ndarray,
             actions: jnp.ndarray, r_t: jnp.ndarray, discount_t: jnp.ndarray, mask: jnp.ndarray,
             lambda_: float = 1.0, value_cost: float = 0.5, entropy_cost: float = 0.01,
             behaviour_log_prob: Optional[jnp.ndarray] = None,
             importance_rho_bar: Optional[float] = None
             ) -> Tuple[jnp.ndarray, Dict[str, jnp.ndarray]]:
  """A2C loss of one rollout: -rho_t log pi(a_t|s_t) A_t + value_cost (R_t - V(s_t))^2 / 2
  - entropy_cost H(pi(.|s_t)), averaged over the unmasked transitions.

  A_t is the truncated GAE (lambda 1: R_t - V(s_t) with the n-step return R_t =
  sum_k gamma^k r_{t+k} + gamma^(T-t) V(s_T)), cut before acme's terminal steps.
  rho_t = min(importance_rho_bar, pi(a_t|s_t) / mu(a_t|s_t)) (no gradient) with
  `importance_rho_bar`, else 1.

  Args:
    outputs: float32 `[T, head.output_size]` policy outputs at s_0..s_{T-1}.
    values: float32 `[T + 1]` V(s_0..s_T) (the last is the bootstrap).
    actions: int `[T]` or float32 `[T, A]` (raw Gaussian samples).
    r_t, discount_t, mask: float32 `[T]` (discount_t = gamma * d_t).
    behaviour_log_prob: float32 `[T]` log mu(a_t|s_t) from the actors, or None; with it
      the metrics include `behaviour_kl` (`onpolicy.behaviour_kl`).
    importance_rho_bar: rho-bar of the importance correction (needs
      `behaviour_log_prob`), or None: no correction.

  Returns:
    (float32 scalar, metrics).

  Raises:
    ValueError: for `values` not of shape [T + 1], a `behaviour_log_prob` not of shape
      [T], or `importance_rho_bar` without `behaviour_log_prob`.
  """
  t = outputs.shape[0]
  chex.assert_shape(values, (t + 1,), exception_type=ValueError,
                    custom_message="values must have shape [T + 1] (with the bootstrap)")
  if behaviour_log_prob is not None:
    chex.assert_shape(behaviour_log_prob, (t,), exception_type=ValueError,
                      custom_message="behaviour_log_prob must have shape [T]")
  if importance_rho_bar is not None and behaviour_log_prob is None:
    raise ValueError("the importance correction (importance_rho_bar) needs behaviour_log_prob")
  adv = rlax.truncated_generalized_advantage_estimation(
      r_t, discount_t, onpolicy.trace_lambda(lambda_, mask), values, stop_target_gradients=True)
  returns = jax.lax.stop_gradient(adv + values[:-1])
  metrics = {}
  log_pi = onpolicy.log_prob(head, outputs, actions)
  if behaviour_log_prob is not None:
    metrics["behaviour_kl"] = onpolicy.behaviour_kl(log_pi, behaviour_log_prob, mask)
  pg_adv = adv
  if importance_rho_bar is not None:
    rho = onpolicy.truncated_importance_weights(log_pi, behaviour_log_prob, importance_rho_bar)
    metrics["importance_weight"] = onpolicy.masked_mean(rho, mask)
    pg_adv = rho * adv
  norm = t / jnp.maximum(jnp.sum(mask), 1.0)  # rlax's losses average over T
  if head.discrete:
    pg_loss = rlax.policy_gradient_loss(outputs, actions, pg_adv, mask) * norm
    ent = -rlax.entropy_loss(outputs, mask) * norm
  else:
    pg_loss = -onpolicy.masked_mean(log_pi * jax.lax.stop_gradient(pg_adv), mask)
    ent = onpolicy.masked_mean(onpolicy.entropy(head, outputs), mask)
  value_loss = onpolicy.masked_mean(0.5 * jnp.square(returns - values[:-1]), mask)
  loss = pg_loss + value_cost * value_loss - entropy_cost * ent
  return loss, {"pg_loss": pg_loss, "value_loss": value_loss, "entropy": ent, **metrics}


def make_update(networks: onpolicy.ActorCriticNetworks, optimizer: optax.GradientTransformation,
                config):
  """A2C's pure learner step on a batch of rollouts `[B, T + 1]`."""
  head = networks.head
  rho_bar = config.importance_rho_bar if config.importance_correction_on() else None

  def per_rollout_loss(outputs, values, actions, r_t, discount_t, mask, extras):
    return a2c_loss(head, outputs, values, actions, r_t, discount_t, mask, config.gae_lambda,
                    config.value_cost, config.entropy_cost, extras["log_prob"], rho_bar)

  return onpolicy.rollout_loss_update(networks, optimizer, config.discount, per_rollout_loss)
