"""IMPALA learner: V-trace targets and policy-gradient advantages (Espeholt et al. 2018,
eq. 1 and 4, via `rlax.vtrace_td_error_and_advantage`), one SGD step per batch."""
from __future__ import annotations

from typing import Dict, NamedTuple, Tuple

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax
import rlax

from actorq.agents import onpolicy_common as onpolicy


class VTraceOutput(NamedTuple):
  vs: jnp.ndarray             # [T] V-trace targets v_s
  pg_advantage: jnp.ndarray   # [T] min(pg_rho_bar, rho_t) (r_t + gamma_t v_{s+1} - V(x_t))
  clipped_rho: jnp.ndarray    # [T] min(rho_bar, rho_t) (0 at masked steps)


def vtrace_targets(v_tm1: jnp.ndarray, v_t: jnp.ndarray, r_t: jnp.ndarray,
                   discount_t: jnp.ndarray, log_rho_tm1: jnp.ndarray, mask: jnp.ndarray,
                   lambda_: float = 1.0, clip_rho_threshold: float = 1.0,
                   clip_pg_rho_threshold: float = 1.0) -> VTraceOutput:
  """V-trace of one rollout in acme's step layout, stable for extreme log-ratios (L2).

  v_s = V(x_s) + sum_t gamma^(t-s) (prod_{i<t} c_i) rho_t delta_t  (eq. 1), with
  rho_t = min(rho_bar, pi/mu), c_i = lambda min(1, pi/mu) (rlax fixes c_bar = 1).

  The importance ratios are exponentiated *after* clipping the log-ratio at
  log(max(rho_bar, pg_rho_bar, 1)), so log-ratios like +-89 give ratios 1 and
  exp(-89) (float32 denormal; flushed to 0 where the CPU flushes denormals), never inf.
  At masked steps (acme's terminal step of an episode) rho = c = 0: the trace stops
  there, so an episode end inside a rollout gives the same targets as separate rollouts.

  Args:
    v_tm1: float32 `[T]` V(x_t);  v_t: float32 `[T]` V(x_{t+1}).
    r_t: float32 `[T]`;  discount_t: float32 `[T]` gamma * d_t.
    log_rho_tm1: float32 `[T]` log pi(a_t|x_t) - log mu(a_t|x_t).
    mask: float32 `[T]` 1 for real transitions, 0 for terminal steps.

  Returns:
    `VTraceOutput`, all float32 `[T]`, targets under stop_gradient.

  Raises:
    ValueError: for inputs that are not all of shape [T].
  """
  chex.assert_rank(v_tm1, 1, custom_message="v_tm1 must have shape [T]",
                   exception_type=ValueError)
  for name, x in (("v_t", v_t), ("r_t", r_t), ("discount_t", discount_t),
                  ("log_rho_tm1", log_rho_tm1), ("mask", mask)):
    chex.assert_equal_shape([v_tm1, x], custom_message=f"{name} must have shape [T] like v_tm1",
                            exception_type=ValueError)
  log_cap = float(np.log(max(clip_rho_threshold, clip_pg_rho_threshold, 1.0)))
  rho = jnp.exp(jnp.minimum(log_rho_tm1, log_cap)) * mask
  out = rlax.vtrace_td_error_and_advantage(
      v_tm1, v_t, r_t, discount_t, rho, lambda_, clip_rho_threshold, clip_pg_rho_threshold)
  vs = jax.lax.stop_gradient(out.errors + v_tm1)
  return VTraceOutput(vs, jax.lax.stop_gradient(out.pg_advantage),
                      jnp.minimum(clip_rho_threshold, rho))


def impala_loss(head: onpolicy.PolicyHead, outputs: jnp.ndarray, values: jnp.ndarray,
                actions: jnp.ndarray, behaviour_log_prob: jnp.ndarray, r_t: jnp.ndarray,
                discount_t: jnp.ndarray, mask: jnp.ndarray, lambda_: float = 1.0,
                clip_rho_threshold: float = 1.0, clip_pg_rho_threshold: float = 1.0,
                baseline_cost: float = 0.5, entropy_cost: float = 0.01
                ) -> Tuple[jnp.ndarray, Dict[str, jnp.ndarray]]:
  """IMPALA loss of one rollout (eq. 1 and 4): -rho_pg A log pi + baseline_cost *
  (v_s - V)^2 / 2 - entropy_cost H, averaged over the unmasked transitions.

  Args:
    outputs: float32 `[T, head.output_size]` the learner's policy outputs at x_0..x_{T-1}.
    values: float32 `[T + 1]` V(x_0..x_T) (the last is the bootstrap).
    actions: int `[T]` or float32 `[T, A]` (raw Gaussian samples).
    behaviour_log_prob: float32 `[T]` log mu(a_t|x_t) from the actor.
    r_t, discount_t, mask: float32 `[T]` (discount_t = gamma * d_t).

  Returns:
    (float32 scalar, metrics; `behaviour_kl` estimates KL(mu || pi), `onpolicy.behaviour_kl`).
  """
  t = outputs.shape[0]
  chex.assert_shape(values, (t + 1,), exception_type=ValueError,
                    custom_message="values must have shape [T + 1] (with the bootstrap)")
  log_pi = onpolicy.log_prob(head, outputs, actions)
  vt = vtrace_targets(values[:-1], values[1:], r_t, discount_t,
                      jax.lax.stop_gradient(log_pi) - behaviour_log_prob, mask, lambda_,
                      clip_rho_threshold, clip_pg_rho_threshold)
  norm = t / jnp.maximum(jnp.sum(mask), 1.0)  # rlax's losses average over T
  if head.discrete:
    pg_loss = rlax.policy_gradient_loss(outputs, actions, vt.pg_advantage, mask) * norm
    ent = -rlax.entropy_loss(outputs, mask) * norm
  else:
    pg_loss = -onpolicy.masked_mean(log_pi * vt.pg_advantage, mask)
    ent = onpolicy.masked_mean(onpolicy.entropy(head, outputs), mask)
  baseline_loss = onpolicy.masked_mean(0.5 * jnp.square(vt.vs - values[:-1]), mask)
  loss = pg_loss + baseline_cost * baseline_loss - entropy_cost * ent
  return loss, {"pg_loss": pg_loss, "baseline_loss": baseline_loss, "entropy": ent,
                "mean_clipped_rho": onpolicy.masked_mean(vt.clipped_rho, mask),
                "behaviour_kl": onpolicy.behaviour_kl(log_pi, behaviour_log_prob, mask)}


def make_update(networks: onpolicy.ActorCriticNetworks, optimizer: optax.GradientTransformation,
                config):
  """IMPALA's pure learner step on a batch of rollouts `[B, T + 1]`."""
  head = networks.head

  def per_rollout_loss(outputs, values, actions, r_t, discount_t, mask, extras):
    return impala_loss(head, outputs, values, actions, extras["log_prob"], r_t, discount_t,
                       mask, config.vtrace_lambda, config.clip_rho_threshold,
                       config.clip_pg_rho_threshold, config.baseline_cost, config.entropy_cost)

  return onpolicy.rollout_loss_update(networks, optimizer, config.discount, per_rollout_loss)
