"""PPO learner: GAE advantages per rollout, then `num_epochs` passes of minibatch SGD on
the clipped surrogate objective (Schulman et al. 2017, eq. 7 and 9; GAE: Schulman et
al. 2016, eq. 16), with the behaviour log-probs the (possibly quantized) actors emitted.

Without the importance correction the ratio is `pi_theta / mu`, mu being the actors'
(possibly int8) policy. With it (`PPOConfig.importance_correction_on()`, the default for
non-fp32 actors) the ratio is `pi_theta / pi_old`, pi_old the learner's fp32 policy
before the update, and each transition's surrogate is weighted by the truncated
importance weight `min(rho_bar, pi_old / mu)` (`onpolicy.truncated_importance_weights`):
the clipping then acts on the learner's own policy change, and the weight corrects for
the actors' policy differing from the learner's. `behaviour_kl` (an estimate of
KL(mu || pi_old), `onpolicy.behaviour_kl`) is logged either way."""
from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

import chex
import jax
import jax.numpy as jnp
import optax
import rlax

from actorq.agents import onpolicy_common as onpolicy

MAX_LOG_RATIO = 20.0


def gae_advantages(values: jnp.ndarray, r_t: jnp.ndarray, discount_t: jnp.ndarray,
                   mask: jnp.ndarray, lambda_: float) -> jnp.ndarray:
  """Truncated GAE of one rollout in acme's step layout (rlax's estimator).

  Args:
    values: float32 `[T + 1]` V(o_0..o_T) (the last is the bootstrap).
    r_t: float32 `[T]` rewards after each action.
    discount_t: float32 `[T]` gamma * d_t (0 after a termination).
    mask: float32 `[T]` 1 for real transitions, 0 for acme's terminal steps
      (`onpolicy.transition_mask`); traces are cut before them.
    lambda_: GAE lambda in [0, 1].

  Returns:
    float32 `[T]` advantages A_t = sum_k (gamma lambda)^k delta_{t+k} (PPO paper eq. 11);
    entries at masked steps are meaningless and must be weighted out.
  """
  return rlax.truncated_generalized_advantage_estimation(
      r_t, discount_t, onpolicy.trace_lambda(lambda_, mask), values)


def rollout_targets(values: jnp.ndarray, traj, discount: float, gae_lambda: float
                    ) -> Tuple[jnp.ndarray, jnp.ndarray, jnp.ndarray]:
  """The GAE advantages and value targets of a batch of rollouts (what `make_update`
  trains on).

  Args:
    values: float32 `[B, T + 1]` V(o_t) of the rollouts' observations.
    traj: acme `Trajectory` `[B, T + 1]` (reward, discount, start_of_episode).
    discount: gamma; the transition discount is gamma * d_t.
    gae_lambda: GAE lambda.

  Returns:
    float32 `[B, T]` advantages (`gae_advantages` per rollout), float32 `[B, T]` returns
    A + V(o_t), float32 `[B, T]` transition mask (`onpolicy.transition_mask`: 0 at acme's
    terminal steps, whose entries are meaningless).
  """
  mask = onpolicy.transition_mask(traj.start_of_episode)             # [B, T]
  r_t = traj.reward[:, :-1]
  discount_t = discount * traj.discount[:, :-1]
  adv = jax.vmap(gae_advantages, in_axes=(0, 0, 0, 0, None))(
      values, r_t, discount_t, mask, gae_lambda)
  return adv, adv + values[:, :-1], mask


def ppo_loss(head: onpolicy.PolicyHead, outputs: jnp.ndarray, values: jnp.ndarray,
             actions: jnp.ndarray, behaviour_log_prob: jnp.ndarray, advantages: jnp.ndarray,
             returns: jnp.ndarray, weights: jnp.ndarray, clip_epsilon: float = 0.2,
             value_cost: float = 0.5, entropy_cost: float = 0.0,
             normalize_advantages: bool = True,
             importance_weights: Optional[jnp.ndarray] = None
             ) -> Tuple[jnp.ndarray, Dict[str, jnp.ndarray]]:
  """Clipped-surrogate PPO loss of one minibatch of N transitions.

  loss = -E_w[rho min(r A, clip(r, 1-eps, 1+eps) A)] + value_cost * E_w[(V - R)^2 / 2]
         - entropy_cost * E_w[H(pi)],   r = pi(a|s) / mu(a|s) (eq. 7 and 9),
  where E_w is the mean weighted by `weights` (0 for padding and terminal steps) and rho
  the `importance_weights` (1 when None). The
  advantages are normalised over the weighted items when `normalize_advantages`; that
  stays finite for one item or all-equal advantages (case L1). The log-ratio is clipped
  to +-20 before `exp` so a far-off behaviour policy cannot make it overflow.

  Args:
    head: the policy head (discrete or Gaussian).
    outputs: float32 `[N, head.output_size]` the learner's policy outputs.
    values: float32 `[N]` V(s).
    actions: int `[N]` or float32 `[N, A]` (raw Gaussian samples).
    behaviour_log_prob: float32 `[N]` log mu(a|s), the ratio's denominator: the actors'
      log-probs, or with the importance correction the learner's fp32 policy before the
      update.
    advantages, returns: float32 `[N]` (GAE and A + V_old).
    weights: float32 `[N]` in {0, 1}.
    importance_weights: float32 `[N]` truncated importance weights (no gradient), or None.

  Returns:
    (float32 scalar loss, metrics dict of scalars).
  """
  n = outputs.shape[0]
  if importance_weights is None:
    importance_weights = jnp.ones((n,), jnp.float32)
  for name, x in (("values", values), ("behaviour_log_prob", behaviour_log_prob),
                  ("advantages", advantages), ("returns", returns), ("weights", weights),
                  ("importance_weights", importance_weights)):
    chex.assert_shape(x, (n,), custom_message=f"{name} must have shape [N] like outputs' batch",
                      exception_type=ValueError)
  log_pi = onpolicy.log_prob(head, outputs, actions)
  log_ratio = jnp.clip(log_pi - behaviour_log_prob, -MAX_LOG_RATIO, MAX_LOG_RATIO)
  ratio = jnp.exp(log_ratio)
  adv = (onpolicy.normalize_advantages(advantages, weights) if normalize_advantages
         else jax.lax.stop_gradient(advantages))
  per_item = jax.vmap(lambda r, a: rlax.clipped_surrogate_pg_loss(r[None], a[None], clip_epsilon))(
      ratio, adv)
  pg_loss = onpolicy.masked_mean(jax.lax.stop_gradient(importance_weights) * per_item, weights)
  value_loss = onpolicy.masked_mean(0.5 * jnp.square(values - jax.lax.stop_gradient(returns)),
                                    weights)
  ent = onpolicy.masked_mean(onpolicy.entropy(head, outputs), weights)
  loss = pg_loss + value_cost * value_loss - entropy_cost * ent
  clipped = onpolicy.masked_mean((jnp.abs(ratio - 1.0) > clip_epsilon).astype(jnp.float32), weights)
  approx_kl = onpolicy.masked_mean((ratio - 1.0) - log_ratio, weights)
  return loss, {"pg_loss": pg_loss, "value_loss": value_loss, "entropy": ent,
                "clip_fraction": clipped, "approx_kl": approx_kl}


def sgd_updates_per_learner_step(config) -> int:
  """Optimizer updates in one learner step: epochs x ceil(B T / minibatch)."""
  items = config.batch_size * config.rollout_length
  return config.num_epochs * -(-items // min(config.minibatch_size, items))


def learning_rate_schedule(config):
  """The shared on-policy schedule, per optimizer update: PPO takes
  `sgd_updates_per_learner_step(config)` updates per learner step."""
  return onpolicy.learning_rate_schedule(config, sgd_updates_per_learner_step(config))


def make_optimizer(config) -> optax.GradientTransformation:
  return onpolicy.make_optimizer(config, sgd_updates_per_learner_step(config))


def make_update(networks: onpolicy.ActorCriticNetworks, optimizer: optax.GradientTransformation,
                config):
  """The pure learner step `update(state, trajectory) -> (state, metrics)` on a batch of
  rollouts `[B, T + 1]` (acme `Trajectory` with extras log_prob [/ raw_action]).

  Metrics: the losses' (averaged over the minibatch updates), `behaviour_kl` and, with
  the importance correction, `importance_weight` (the mean truncated weight)."""
  head = networks.head
  correct = config.importance_correction_on()

  def loss_fn(params, batch, weights):
    outputs = networks.policy.apply(params["policy"], batch["observation"])
    values = networks.value.apply(params["value"], batch["observation"])
    return ppo_loss(head, outputs, values, batch["action"], batch["log_prob"],
                    batch["advantage"], batch["return"], weights, config.clip_epsilon,
                    config.value_cost, config.entropy_cost, config.normalize_advantages,
                    batch["importance_weight"] if correct else None)

  def update(state: onpolicy.TrainingState, traj) -> Tuple[onpolicy.TrainingState, Dict[str, Any]]:
    obs = traj.observation
    values = networks.value.apply(state.params["value"], obs)          # [B, T + 1]
    adv, returns, mask = rollout_targets(values, traj, config.discount, config.gae_lambda)
    b, t = mask.shape
    flat = lambda x: x[:, :-1].reshape((b * t,) + x.shape[2:])
    data = {"observation": flat(obs), "action": flat(onpolicy.behaviour_actions(head, traj)),
            "log_prob": flat(traj.extras["log_prob"]), "advantage": adv.reshape(-1),
            "return": returns.reshape(-1)}
    item_mask = mask.reshape(-1)
    # The learner's fp32 policy before this update, at the actions the actors took.
    log_pi_old = jax.lax.stop_gradient(onpolicy.log_prob(
        head, networks.policy.apply(state.params["policy"], data["observation"]),
        data["action"]))
    behaviour_kl = onpolicy.behaviour_kl(log_pi_old, data["log_prob"], item_mask)
    if correct:
      data["importance_weight"] = onpolicy.truncated_importance_weights(
          log_pi_old, data["log_prob"], config.importance_rho_bar)
      data["log_prob"] = log_pi_old
    key, *epoch_keys = jax.random.split(state.key, config.num_epochs + 1)

    def minibatch_step(carry, xs):
      params, opt_state = carry
      idx, w = xs
      batch = jax.tree_util.tree_map(lambda x: x[idx], data)
      (loss, metrics), grads = jax.value_and_grad(loss_fn, has_aux=True)(
          params, batch, w * item_mask[idx])
      grads = networks.mask_gradients(grads)
      updates, opt_state = optimizer.update(grads, opt_state, params)
      params = optax.apply_updates(params, updates)
      return (params, opt_state), {"loss": loss, **metrics}

    def epoch(carry, k):
      idx, w = onpolicy.minibatch_indices(k, b * t, config.minibatch_size)
      return jax.lax.scan(minibatch_step, carry, (idx, w))

    (params, opt_state), metrics = jax.lax.scan(
        epoch, (state.params, state.opt_state), jnp.stack(epoch_keys))
    metrics = jax.tree_util.tree_map(jnp.mean, metrics)
    metrics["advantage_mean"] = onpolicy.masked_mean(adv.reshape(-1), item_mask)
    metrics["valid_fraction"] = jnp.mean(item_mask)
    metrics["behaviour_kl"] = behaviour_kl
    if correct:
      metrics["importance_weight"] = onpolicy.masked_mean(data["importance_weight"], item_mask)
    return onpolicy.TrainingState(params, opt_state, key, state.steps + 1), metrics

  return update
