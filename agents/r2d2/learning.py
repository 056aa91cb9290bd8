"""R2D2 learner (Kapturowski et al. 2019): burn-in from the stored LSTM state, n-step
double-Q targets under value rescaling, the eta-mixed sequence priorities and
prioritized replay with importance-sampling weights.

The pure functions work on ONE sequence in rlax's time-indexed layout (vmap them over a
batch): for T transitions t = 0..T-1, `q_tm1[t]` = Q(s_t), `a_tm1[t]` = a_t,
`r_t[t]` = r_{t+1}, `discount_t[t]` = gamma * d_{t+1}, `q_t_value[t]` = Q_target(s_{t+1}),
`q_t_selector[t]` = Q_online(s_{t+1}), `mask_t[t]` = 1 where transition t is learned
from (real, and past the burn-in).
"""
from __future__ import annotations

from typing import Any, Iterator, NamedTuple, Optional, Tuple

import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np
import optax
import rlax
from acme.utils import counting, loggers

from actorq.agents.dqn.learning import importance_sampling_weights
from actorq.agents.r2d2 import networks as networks_lib
from actorq.components import learners


def value_rescale(x: jnp.ndarray, eps: float = 1e-3) -> jnp.ndarray:
  """h(x) = sign(x) (sqrt(|x| + 1) - 1) + eps x (Kapturowski et al. 2019, section 2;
  Pohlen et al. 2018, eq. 7): `rlax.signed_hyperbolic`. float -> float, same shape."""
  return rlax.signed_hyperbolic(x, eps)


def value_rescale_inverse(x: jnp.ndarray, eps: float = 1e-3) -> jnp.ndarray:
  """h^-1(x) = sign(x) (((sqrt(1 + 4 eps (|x| + 1 + eps)) - 1) / (2 eps))^2 - 1), the exact
  inverse of `value_rescale` for eps > 0 (Pohlen et al. 2018, Proposition A.2):
  `rlax.signed_parabolic`."""
  return rlax.signed_parabolic(x, eps)


def burn_in_mask(valid_t: jnp.ndarray, burn_in: int) -> jnp.ndarray:
  """float32 [T]: `valid_t` (1 for a real transition, 0 after the episode's end) times
  1[t >= burn_in]: the transitions a sequence's loss covers."""
  t = jnp.arange(valid_t.shape[-1])
  return valid_t.astype(jnp.float32) * (t >= int(burn_in)).astype(jnp.float32)


def transformed_n_step_double_q_targets(q_t_value: jnp.ndarray, q_t_selector: jnp.ndarray,
                                        r_t: jnp.ndarray, discount_t: jnp.ndarray,
                                        valid_t: jnp.ndarray, n: int,
                                        eps: float = 1e-3) -> jnp.ndarray:
  """R2D2's targets y_t = h(G_t) of one sequence, under `stop_gradient`.

  G_t = sum_{k<m} (prod_{j<k} discount_t[t+j]) r_t[t+k]
        + (prod_{j<m} discount_t[t+j]) h^-1(q_t_value[t+m-1, argmax q_t_selector[t+m-1]])
  with m = min(n, number of consecutive valid transitions from t), i.e. n steps, fewer
  where the sequence or the episode (its last real transition) ends first: a
  termination stops the bootstrap through its discount 0, a time limit (discount > 0)
  bootstraps from the episode's final observation. For every valid t and n steps with
  no episode end this equals `rlax.transformed_n_step_q_learning`'s target
  (with `a_t = argmax q_t_selector` and `rlax.SIGNED_HYPERBOLIC_PAIR`).

  Args:
    q_t_value: float32 [T, A] target-network Q at s_{t+1}.
    q_t_selector: float32 [T, A] online Q at s_{t+1} (picks the bootstrap action).
    r_t: float32 [T]; discount_t: float32 [T] (gamma * d).
    valid_t: float [T], 1 for a real transition; valid transitions form a prefix.
    n: steps before bootstrapping (>= 1, static).
    eps: h's epsilon (0: no -> h is not invertible; use eps > 0).

  Returns:
    float32 [T] targets (arbitrary where `valid_t` is 0: mask them).
  """
  size = r_t.shape[0]
  valid = valid_t.astype(jnp.float32)
  # run[t]: consecutive valid transitions from t on (0 where t is invalid).
  run = jax.lax.associative_scan(lambda a, b: a + b, valid, reverse=True)
  run = jnp.where(valid > 0, run, 0.0).astype(jnp.int32)
  steps = jnp.clip(jnp.minimum(run, int(n)), 1, None)
  idx = jnp.arange(size)
  a_star = jnp.argmax(q_t_selector, axis=-1)
  v_t = value_rescale_inverse(jnp.take_along_axis(q_t_value, a_star[:, None], -1)[:, 0], eps)
  ret = jnp.zeros((size,), jnp.float32)
  disc = jnp.ones((size,), jnp.float32)
  for k in range(int(n)):
    j = jnp.minimum(idx + k, size - 1)
    on = k < steps
    ret = jnp.where(on, ret + disc * r_t[j], ret)
    disc = jnp.where(on, disc * discount_t[j], disc)
  boot = v_t[jnp.minimum(idx + steps - 1, size - 1)]
  return jax.lax.stop_gradient(value_rescale(ret + disc * boot, eps))


def sequence_priority(abs_td: jnp.ndarray, mask_t: jnp.ndarray, eta: float = 0.9) -> jnp.ndarray:
  """p = eta max_t |delta_t| + (1 - eta) mean_t |delta_t| over the masked-in transitions
  (Kapturowski et al. 2019, section 2); float32 scalar, 0 when the mask is all 0.

  Args:
    abs_td: float [T] |TD errors| (in the rescaled space).
    mask_t: float [T] 1 where the transition counts.
    eta: the max's weight, in [0, 1].
  """
  m = mask_t.astype(jnp.float32)
  x = jnp.abs(abs_td) * m
  mean = jnp.sum(x) / jnp.maximum(jnp.sum(m), 1.0)
  return eta * jnp.max(x) + (1.0 - eta) * mean


def r2d2_sequence_loss(q_tm1: jnp.ndarray, a_tm1: jnp.ndarray, r_t: jnp.ndarray,
                       discount_t: jnp.ndarray, q_t_value: jnp.ndarray,
                       q_t_selector: jnp.ndarray, valid_t: jnp.ndarray, burn_in: int,
                       n: int, eps: float = 1e-3, eta: float = 0.9
                       ) -> Tuple[jnp.ndarray, jnp.ndarray, jnp.ndarray]:
  """The loss of one sequence (layout in the module docstring).

  Args:
    q_tm1: float32 [T, A] online Q(s_t) (the burn-in rows' values are ignored).
    a_tm1: int [T]; r_t, discount_t: float32 [T]; q_t_value, q_t_selector: float32 [T, A].
    valid_t: float [T] 1 for real transitions (0 for acme's terminal step and padding).
    burn_in: transitions 0..burn_in-1 get no loss and no gradient.
    n, eps: see `transformed_n_step_double_q_targets`; eta: see `sequence_priority`.

  Returns:
    (loss: float32 scalar 0.5 * masked mean of delta_t^2, priority: float32 scalar,
     td: float32 [T] delta_t = y_t - Q(s_t, a_t), 0 where masked out).
  """
  mask = burn_in_mask(valid_t, burn_in)
  targets = transformed_n_step_double_q_targets(q_t_value, q_t_selector, r_t, discount_t,
                                                valid_t, n, eps)
  q_a = jnp.take_along_axis(q_tm1, a_tm1.astype(jnp.int32)[:, None], -1)[:, 0]
  td = (targets - q_a) * mask
  loss = 0.5 * jnp.sum(jnp.square(td)) / jnp.maximum(jnp.sum(mask), 1.0)
  return loss, sequence_priority(jax.lax.stop_gradient(td), mask, eta), td


class TrainingState(NamedTuple):
  params: hk.Params
  target_params: hk.Params
  opt_state: optax.OptState
  steps: jnp.ndarray  # int32 scalar: learner steps taken


def unroll_with_burn_in(networks: networks_lib.R2D2Networks, params: hk.Params,
                        observations: jnp.ndarray, state: hk.LSTMState,
                        burn_in: int) -> jnp.ndarray:
  """Outputs [L, B, O] of the network over `observations` [L, B, D] from `state`; the
  first `burn_in` steps are unrolled under `stop_gradient` (their outputs and the state
  they end in), so no gradient reaches the parameters or `state` through them."""
  if burn_in <= 0:
    return networks.unroll.apply(params, observations, state)[0]
  burn_out, state = networks.unroll.apply(params, observations[:burn_in], state)
  burn_out, state = jax.lax.stop_gradient((burn_out, state))
  rest, _ = networks.unroll.apply(params, observations[burn_in:], state)
  return jnp.concatenate([burn_out, rest], axis=0)


def batch_loss(networks: networks_lib.R2D2Networks, params, target_params, data,
               weights: jnp.ndarray, config) -> Tuple[jnp.ndarray, Tuple[Any, ...]]:
  """IS-weighted mean over a batch of `r2d2_sequence_loss`.

  Args:
    data: acme `Trajectory` batch [B, L, ...] from the sequence table: observation,
      action, reward, discount, extras {"core_state": {"hidden", "cell"} [B, L, H],
      "real": [B, L]}.
    weights: float32 [B] importance-sampling weights.

  Returns:
    (loss, (priorities [B], td [B, L - 1], mean |td|)).
  """
  obs = jnp.swapaxes(data.observation, 0, 1)  # [L, B, D]
  core = data.extras["core_state"]
  state = hk.LSTMState(hidden=core["hidden"][:, 0], cell=core["cell"][:, 0])
  burn = int(config.burn_in_length)
  q_online = networks.q_values(unroll_with_burn_in(networks, params, obs, state, burn))
  q_target = networks.q_values(networks.unroll.apply(target_params, obs, state)[0])
  q_online, q_target = jnp.swapaxes(q_online, 0, 1), jnp.swapaxes(q_target, 0, 1)
  real = data.extras["real"].astype(jnp.float32)

  def one(q_on, q_tg, a, r, d, valid):
    return r2d2_sequence_loss(q_on[:-1], a[:-1], r[:-1], config.discount * d[:-1],
                              jax.lax.stop_gradient(q_tg[1:]),
                              jax.lax.stop_gradient(q_on[1:]), valid[:-1], burn,
                              config.n_step, config.value_rescaling_epsilon,
                              config.max_priority_weight)

  losses, priorities, td = jax.vmap(one)(q_online, q_target, data.action, data.reward,
                                         data.discount, real)
  return jnp.mean(weights * losses), (priorities, td, jnp.mean(jnp.abs(td)))


class R2D2Learner(learners.JaxLearner):
  """Full-precision R2D2 learner.

  Args:
    networks: `R2D2Networks`.
    iterator: yields `reverb.ReplaySample`s of sequences (`batch_loss`'s `data`) with
      `info.key`, `info.probability`, `info.table_size`.
    random_key: initialisation key.
    optimizer: an optax transformation.
    config: an `R2D2Config`.
    replay_client: priorities are written through it (`priorities.update_priorities`:
      ValueError, nothing written, on NaN/inf/negative) after every step.
    table: the sequence table's name.

  `get_variables(["policy", "version"])` returns `[params, learner steps]`; the params
  tree is the actors' `RecurrentSpec` layout (`torso_<i>`, `lstm/linear`, `head`).
  """

  def __init__(self, networks: networks_lib.R2D2Networks, iterator: Iterator[Any],
               random_key: jax.Array, optimizer: optax.GradientTransformation, config,
               replay_client: Any, table: str, logger: Optional[loggers.Logger] = None,
               counter: Optional[counting.Counter] = None):
    self._iterator = iterator
    self._client, self._table = replay_client, table
    self._beta = float(config.importance_sampling_exponent)
    self._init_bookkeeping(counter, logger)
    period = int(config.target_update_period)

    def sgd_step(state: TrainingState, data, probabilities, table_size, beta):
      weights = importance_sampling_weights(probabilities, table_size, beta)
      (loss, (priorities, _, mean_abs_td)), grads = jax.value_and_grad(
          lambda p: batch_loss(networks, p, state.target_params, data, weights, config),
          has_aux=True)(state.params)
      updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
      params = optax.apply_updates(state.params, updates)
      steps = state.steps + 1
      target_params = jax.lax.cond(steps % period == 0, lambda: params,
                                   lambda: state.target_params)
      return TrainingState(params, target_params, opt_state, steps), priorities, {
          "loss": loss, "gradient_norm": optax.global_norm(grads),
          "mean_abs_td": mean_abs_td, "mean_priority": jnp.mean(priorities),
          "min_is_weight": jnp.min(weights)}

    self._sgd_step = jax.jit(sgd_step)
    params = networks.init(random_key)
    self._state = TrainingState(params, params, optimizer.init(params), jnp.zeros((), jnp.int32))

  def step(self) -> None:
    sample = next(self._iterator)
    state, priorities, metrics = self._sgd_step(
        self._state, sample.data, np.asarray(sample.info.probability, np.float32),
        np.asarray(sample.info.table_size, np.float32), np.float32(self._beta))
    self._commit_with_priorities(state, metrics, self._client, self._table, sample.info.key,
                                 np.asarray(priorities, np.float64))
