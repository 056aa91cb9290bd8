"""The learner side of the on-policy family: rollout masks, advantage normalisation,
minibatches, the forward pass over `[B, T + 1]` rollouts, the optimizer step and the
learner.

Acme step layout. Step `t` of a rollout holds `(observation o_t, action a_t, reward
r_t, discount d_t, start_of_episode, extras_t)`, where `r_t`, `d_t` follow `a_t`. When
an episode ends, acme appends one *terminal step* `(o_T, 0, 0, 0, extras 0)`; with
`EndBehavior.CONTINUE` the next step is the next episode's first. So transition `t`
(`o_t -> o_{t+1}`) is real iff step `t + 1` does not start an episode; the terminal
step's own transition (into the next episode) is masked out (`transition_mask`), and
traces (GAE, V-trace) are cut there. A time-limit end keeps `d = 1` on the last real
transition, so it bootstraps from `V(o_T)`.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Iterator, NamedTuple, Optional, Tuple

import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np
import optax
from acme.utils import counting, loggers

from actorq.agents.onpolicy_common import networks as networks_lib
from actorq.components import learners

def transition_mask(start_of_episode: jnp.ndarray) -> jnp.ndarray:
  """float32 `[..., T]`: 1 where transition t (`o_t -> o_{t+1}`) is real, 0 where step
  t is acme's terminal step (step t + 1 starts an episode). Input: bool `[..., T + 1]`."""
  return 1.0 - start_of_episode[..., 1:].astype(jnp.float32)


def trace_lambda(lambda_: float, mask: jnp.ndarray) -> jnp.ndarray:
  """Per-step lambda `[T]` that cuts traces before a masked (terminal) step: the
  advantage / V-trace error of step t must not absorb that of step t + 1 when t + 1
  is the terminal step of an episode (its own `d = 0` already stops the rest)."""
  next_mask = jnp.concatenate([mask[1:], jnp.ones_like(mask[:1])])
  return lambda_ * next_mask


def masked_mean(x: jnp.ndarray, weights: jnp.ndarray) -> jnp.ndarray:
  """sum(w x) / max(sum(w), 1): finite for all-zero weights."""
  return jnp.sum(x * weights) / jnp.maximum(jnp.sum(weights), 1.0)


def normalize_advantages(adv: jnp.ndarray, weights: jnp.ndarray, eps: float = 1e-8) -> jnp.ndarray:
  """(A - mean) / (std + eps) over the items with weight > 0 (case L1).

  With one item, or all-equal advantages, the result is 0 (not NaN, and not float32
  rounding noise blown up by 1 / eps): a spread std <= 1e-6 * max(1, |mean|) counts as
  none. The statistics are under `stop_gradient`, so no 0/0 reaches the gradients.
  """
  adv = jax.lax.stop_gradient(adv)
  mean = masked_mean(adv, weights)
  std = jnp.sqrt(masked_mean(jnp.square(adv - mean), weights))
  spread = std > 1e-6 * jnp.maximum(1.0, jnp.abs(mean))
  return jnp.where(spread, (adv - mean) / (std + eps), 0.0)


def truncated_importance_weights(log_pi: jnp.ndarray, log_mu: jnp.ndarray,
                                 rho_bar: float) -> jnp.ndarray:
  """`rho = min(rho_bar, pi(a|s) / mu(a|s))` per action, under `stop_gradient`.

  The truncated importance weight of an action the behaviour policy mu took (its
  log-prob as the actor stored it, e.g. under an int8 policy) against the learner's
  policy pi (Espeholt et al. 2018, eq. 1, the rho of V-trace; for quantized rollouts,
  FlashRL's truncated importance sampling, Yao et al. 2025). The log-ratio is truncated
  before `exp`, so no ratio overflows (log-ratios of +-89 give rho_bar and exp(-89)).

  Args:
    log_pi: float32 `[...]` log pi(a|s) (the learner's fp32 policy).
    log_mu: float32 `[...]` log mu(a|s) (the actors').
    rho_bar: > 0.

  Returns:
    float32 `[...]` in [0, rho_bar].
  """
  log_rho = jnp.minimum(log_pi - log_mu, float(np.log(rho_bar)))
  return jax.lax.stop_gradient(jnp.exp(log_rho))


def behaviour_kl(log_pi: jnp.ndarray, log_mu: jnp.ndarray, weights: jnp.ndarray) -> jnp.ndarray:
  """Estimated KL(mu || pi) (nats) from the actions mu took, the weighted mean of
  `(r - 1) - log r`, `r = pi(a|s) / mu(a|s)`: an unbiased estimator of the KL (E_mu[r] = 1)
  that is >= 0 per action (Schulman 2020, "Approximating KL divergence", k3). The
  log-ratio is clipped to +-20 (r = exp(20) ~ 5e8 at most). No gradient.

  Args:
    log_pi, log_mu: float32 `[...]` (learner fp32 policy, actors' behaviour policy).
    weights: float32 `[...]` (0 for padding and acme's terminal steps).

  Returns:
    float32 scalar.
  """
  log_r = jax.lax.stop_gradient(jnp.clip(log_pi - log_mu, -20.0, 20.0))
  return masked_mean(jnp.expm1(log_r) - log_r, weights)


def minibatch_indices(key: jax.Array, num_items: int, minibatch_size: int
                      ) -> Tuple[jnp.ndarray, jnp.ndarray]:
  """A random split of `num_items` into minibatches of `minibatch_size`; the last one
  holds the remainder and is padded (weight 0).

  Returns:
    int32 `[K, M]` indices and float32 `[K, M]` weights (1 real, 0 padding), with
    `K = ceil(num_items / M)` (static).

  Raises:
    ValueError: for a non-positive size.
  """
  if num_items < 1 or minibatch_size < 1:
    raise ValueError(f"num_items and minibatch_size must be >= 1, got {num_items}, {minibatch_size}")
  m = min(minibatch_size, num_items)
  k = -(-num_items // m)
  perm = jax.random.permutation(key, num_items)
  pad = k * m - num_items
  idx = jnp.concatenate([perm, jnp.zeros((pad,), perm.dtype)]).reshape(k, m)
  w = jnp.concatenate([jnp.ones((num_items,), jnp.float32), jnp.zeros((pad,), jnp.float32)])
  return idx.astype(jnp.int32), w.reshape(k, m)


def rollout_forward(networks: networks_lib.ActorCriticNetworks, params, traj):
  """The learner-side forward pass over a batch of rollouts `[B, T + 1]`.

  Returns:
    (policy outputs `[B, T, out]`, values `[B, T + 1]`, behaviour actions `[B, T, ...]`,
    transition mask `[B, T]`).
  """
  outputs = networks.policy.apply(params["policy"], traj.observation[:, :-1])
  values = networks.value.apply(params["value"], traj.observation)
  actions = networks_lib.behaviour_actions(networks.head, traj)[:, :-1]
  return outputs, values, actions, transition_mask(traj.start_of_episode)


def rollout_loss_update(networks: networks_lib.ActorCriticNetworks, optimizer: optax.GradientTransformation,
                        discount: float, per_rollout_loss):
  """`update(state, traj) -> (state, metrics)` for a loss defined per rollout.

  `per_rollout_loss(outputs [T, out], values [T + 1], actions [T, ...], r_t [T],
  discount_t [T], mask [T], extras {name: [T, ...]}) -> (loss, metrics)` is vmapped over
  the batch of rollouts `[B, T + 1]` (r_t and discount_t follow a_t; discount_t is
  `discount` times the environment's; extras are the actors' per-step extras, e.g. the
  behaviour log-prob); loss and metrics are averaged over the batch, then one optimizer
  step is taken (`gradient_update`).
  """

  def loss_fn(params, traj):
    outputs, values, actions, mask = rollout_forward(networks, params, traj)
    extras = jax.tree_util.tree_map(lambda x: x[:, :-1], traj.extras)
    losses, metrics = jax.vmap(per_rollout_loss)(
        outputs, values, actions, traj.reward[:, :-1], discount * traj.discount[:, :-1],
        mask, extras)
    return jnp.mean(losses), jax.tree_util.tree_map(jnp.mean, metrics)

  return gradient_update(loss_fn, optimizer)


def gradient_update(loss_fn, optimizer: optax.GradientTransformation):
  """`update(state, traj) -> (state, metrics)`: one optimizer step on
  `loss_fn(params, traj) -> (loss, metrics)`."""

  def update(state: "TrainingState", traj):
    (loss, metrics), grads = jax.value_and_grad(loss_fn, has_aux=True)(state.params, traj)
    updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
    params = optax.apply_updates(state.params, updates)
    return TrainingState(params, opt_state, state.key, state.steps + 1), {"loss": loss, **metrics}

  return update


def learning_rate_schedule(config, updates_per_learner_step: int = 1):
  """The learning rate per optimizer update of an on-policy learner.

  Constant `config.learning_rate`, or, with `config.learning_rate_decay_steps` = N actor
  steps, linear from `learning_rate` to 0 over the updates of the first N actor steps:
  N / (batch_size * rollout_length) learner steps of `updates_per_learner_step` updates
  each (episode ends add terminal steps, so the decay ends slightly before N actor
  steps). PPO anneals it so over training (Schulman et al. 2017, sec. 6.1).
  """
  if config.learning_rate_decay_steps is None:
    return config.learning_rate
  learner_steps = max(1, config.learning_rate_decay_steps
                      // (config.batch_size * config.rollout_length))
  return optax.linear_schedule(config.learning_rate, 0.0,
                               learner_steps * int(updates_per_learner_step))


def make_optimizer(config, updates_per_learner_step: int = 1) -> optax.GradientTransformation:
  """Adam with gradient-norm clipping applied to the policy and value nets separately
  (the value gradients, in return units, would otherwise swamp the policy's); the
  learning rate follows `learning_rate_schedule`."""
  def one():
    return optax.chain(optax.clip_by_global_norm(config.max_gradient_norm),
                       optax.adam(learning_rate_schedule(config, updates_per_learner_step),
                                  eps=config.adam_eps))
  return optax.multi_transform({"policy": one(), "value": one()},
                               {"policy": "policy", "value": "value"})


class TrainingState(NamedTuple):
  params: Dict[str, hk.Params]  # {"policy": {layer: {w, b}}, "value": ...}
  opt_state: Any
  key: jax.Array
  steps: jnp.ndarray  # int32 scalar: learner steps (= policy version)


class OnPolicyLearner(learners.JaxLearner):
  """Runs a pure, jitted `update(state, trajectory) -> (state, metrics)` on each batch
  of rollouts (`[B, T + 1]` acme `Trajectory`).

  `get_variables(["policy", "version"])` returns `[policy params, learner steps]`.
  """

  def __init__(self, update: Callable, params: Dict[str, hk.Params],
               optimizer, iterator: Iterator[Any], random_key: jax.Array,
               logger: Optional[loggers.Logger] = None,
               counter: Optional[counting.Counter] = None):
    self._iterator = iterator
    self._update = jax.jit(update)
    self._init_bookkeeping(counter, logger)
    self._state = TrainingState(params, optimizer.init(params), random_key,
                                jnp.zeros((), jnp.int32))

  def step(self) -> None:
    sample = next(self._iterator)
    state, metrics = self._update(self._state, sample.data)
    self._commit(state, metrics)

  def get_variables(self, names):
    state = self._state
    out = {"policy": state.params["policy"], "value": state.params["value"],
           "version": int(state.steps)}
    return [out[name] for name in names]
