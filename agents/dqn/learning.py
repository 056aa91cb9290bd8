"""Double-DQN learner: n-step TD with a Huber loss, Adam, periodic target copies;
optionally prioritized replay with importance-sampling weights (Schaul et al. 2016)."""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Iterator, NamedTuple, Optional

import chex
import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np
import optax
import rlax
from acme import types
from acme.utils import counting, loggers

from actorq.components import learners


class TrainingState(NamedTuple):
  params: hk.Params
  target_params: hk.Params
  opt_state: optax.OptState
  steps: jnp.ndarray  # int32 scalar: learner steps taken


def dqn_td_errors(q_tm1: jnp.ndarray, a_tm1: jnp.ndarray, r_t: jnp.ndarray,
                  discount_t: jnp.ndarray, q_t_value: jnp.ndarray, q_t_selector: jnp.ndarray,
                  double_q: bool = True) -> jnp.ndarray:
  """float32 [B] (double) Q-learning TD errors target - q_tm1[a_tm1]; args as `dqn_loss`."""
  if double_q:
    return jax.vmap(rlax.double_q_learning)(q_tm1, a_tm1, r_t, discount_t, q_t_value,
                                            q_t_selector)
  return jax.vmap(rlax.q_learning)(q_tm1, a_tm1, r_t, discount_t, q_t_value)


def dqn_loss(q_tm1: jnp.ndarray, a_tm1: jnp.ndarray, r_t: jnp.ndarray,
             discount_t: jnp.ndarray, q_t_value: jnp.ndarray, q_t_selector: jnp.ndarray,
             huber_delta: float = 1.0, double_q: bool = True) -> jnp.ndarray:
  """Mean Huber loss of the (double) Q-learning TD errors of a batch.

  With n-step transitions (Acme's `NStepTransitionAdder`), `r_t` is the n-step return
  R = sum_{k<n} gamma^k r_{t+k} (discounts of intermediate steps included) and
  `discount_t` = gamma * transition.discount = gamma^n * prod_k d_{t+k}: 0 after a
  termination, > 0 after a time-limit truncation, so the target is
  `r_t + discount_t * Q_target(s_{t+n}, argmax_a Q_online(s_{t+n}, a))`
  (van Hasselt et al. 2016, eq. 4; Huber loss as in Mnih et al. 2015).

  Args:
    q_tm1: float32 [B, A] online Q-values at s_tm1.
    a_tm1: int [B] actions taken.
    r_t: float32 [B] n-step returns.
    discount_t: float32 [B] bootstrap discounts.
    q_t_value: float32 [B, A] target-network Q-values at s_t.
    q_t_selector: float32 [B, A] online Q-values at s_t (used if double_q).
    huber_delta: Huber threshold.
    double_q: double Q-learning if True, else Q-learning with the target network.

  Returns:
    float32 scalar loss.
  """
  td = dqn_td_errors(q_tm1, a_tm1, r_t, discount_t, q_t_value, q_t_selector, double_q)
  return jnp.mean(rlax.huber_loss(td, huber_delta))


def transition_td_errors(network: hk.Transformed, online_params: hk.Params,
                         target_params: hk.Params, transitions: types.Transition, discount,
                         double_q: bool = True) -> jnp.ndarray:
  """float32 [B] TD errors (`dqn_td_errors`) of the Q-network `network` on a batch of
  n-step transitions: Q(s_tm1) and the double-Q selector Q(s_t) from `online_params`,
  the bootstrap value from `target_params`, bootstrapping with
  `discount * transitions.discount` (the agent's gamma times the n-step adder's
  gamma^(n-1) * prod d, see `dqn_loss`). `discount` is a float or a float32 scalar array
  (a traced one in the population learner, `agents.dqn.population`)."""
  q_tm1 = network.apply(online_params, transitions.observation)
  q_t_selector = network.apply(online_params, transitions.next_observation)
  q_t_value = network.apply(target_params, transitions.next_observation)
  return dqn_td_errors(q_tm1, transitions.action.astype(jnp.int32), transitions.reward,
                       discount * transitions.discount, q_t_value, q_t_selector, double_q)


def weighted_transition_loss(network: hk.Transformed, online_params: hk.Params,
                             target_params: hk.Params, transitions: types.Transition,
                             weights: jnp.ndarray, discount, huber_delta,
                             double_q: bool = True):
  """`(loss, td)`: the importance-weighted mean Huber loss mean_i w_i * Huber(td_i)
  (Schaul et al. 2016, Algorithm 1 line 11; Mnih et al. 2015's Huber loss) of the
  `transition_td_errors` td [B], with float32 `weights` [B] (ones: the plain DQN loss).
  `discount` and `huber_delta` are floats or float32 scalar arrays."""
  td = transition_td_errors(network, online_params, target_params, transitions, discount,
                            double_q)
  return jnp.mean(weights * rlax.huber_loss(td, huber_delta)), td


def importance_sampling_weights(probabilities: jnp.ndarray, table_size: jnp.ndarray,
                                beta) -> jnp.ndarray:
  """Normalised importance-sampling weights of prioritized replay.

  w_i = (N * P(i))^-beta / max_j w_j (Schaul et al. 2016, Algorithm 1 line 10), the max
  taken over the batch (as in the paper's implementation and Acme).

  Args:
    probabilities: float [B] P(i) each item was sampled with (Reverb's
      `info.probability`), in (0, 1].
    table_size: int or float [B] (or scalar) N, items in the table when sampled
      (`info.table_size`).
    beta: scalar exponent in [0, 1] (0: no correction, 1: full correction).

  Returns:
    float32 [B] weights in (0, 1]; the largest is 1.

  Raises:
    ValueError: `probabilities` is not one-dimensional.
  """
  p = jnp.asarray(probabilities, jnp.float32)
  n = jnp.asarray(table_size, jnp.float32)
  chex.assert_rank(p, 1, custom_message="probabilities must be a batch [B]",
                   exception_type=ValueError)
  log_w = -jnp.asarray(beta, jnp.float32) * (jnp.log(n) + jnp.log(p))
  return jnp.exp(log_w - jnp.max(log_w))


def annealed_exponent(beta_0: float, annealing_steps: int, step: int) -> float:
  """beta linearly from `beta_0` at learner step 0 to 1 at `annealing_steps`, then 1
  (Schaul et al. 2016, section 3.4)."""
  if annealing_steps <= 0:
    return 1.0
  frac = min(max(step, 0) / annealing_steps, 1.0)
  return float(beta_0 + frac * (1.0 - beta_0))


@dataclasses.dataclass(frozen=True)
class PrioritizedReplay:
  """Prioritized-replay settings of a `DQNLearner` (Schaul et al. 2016).

  Attributes:
    client: the Reverb client priorities are written through (`mutate_priorities`).
    table: the replay table's name.
    importance_sampling_exponent: beta at learner step 0, in [0, 1].
    annealing_steps: learner steps over which beta goes linearly to 1.
    priority_epsilon: p_i = |TD error_i| + priority_epsilon (>= 0).
  """
  client: Any
  table: str
  importance_sampling_exponent: float = 0.4
  annealing_steps: int = 25_000
  priority_epsilon: float = 1e-6


class DQNLearner(learners.JaxLearner):
  """Full-precision DQN learner.

  Args:
    network: Haiku Q-network (`apply(params, obs[B, ...]) -> q[B, A]`).
    iterator: yields `reverb.ReplaySample`s whose `data` is an `acme.types.Transition` batch.
    random_key: initialisation key.
    dummy_observation: one observation, `[*obs_shape]`, for initialisation.
    optimizer: an optax transformation.
    discount: gamma.
    target_update_period: in learner steps: the target network equals the online one
      right after learner steps K, 2K, 3K, ... (case E5).
    params_transform: applied to the online params inside the loss (e.g. QAT fake quant).
    prioritized: None (uniform replay, unweighted loss), or `PrioritizedReplay`: the loss
      is the mean of w_i * Huber(td_i) with `importance_sampling_weights` from the
      sample's `info.probability` and `info.table_size`, and after each step the sampled
      items' priorities become |td_i| + epsilon, validated by
      `priorities_lib.update_priorities` (ValueError, nothing written, on NaN/inf/negative).

  `get_variables(["policy", "version"])` returns `[params, learner steps]`.
  """

  def __init__(self, network: hk.Transformed, iterator: Iterator[Any], random_key: jax.Array,
               dummy_observation: np.ndarray, optimizer: optax.GradientTransformation,
               discount: float, target_update_period: int, huber_delta: float = 1.0,
               double_q: bool = True, params_transform: Optional[Callable] = None,
               logger: Optional[loggers.Logger] = None, counter: Optional[counting.Counter] = None,
               prioritized: Optional[PrioritizedReplay] = None):
    self._iterator = iterator
    self._prioritized = prioritized
    self._init_bookkeeping(counter, logger)
    transform = params_transform or (lambda p: p)
    period = int(target_update_period)

    def loss_fn(params, target_params, transitions: types.Transition):
      td = transition_td_errors(network, transform(params), target_params, transitions,
                                discount, double_q)
      return jnp.mean(rlax.huber_loss(td, huber_delta))

    def sgd_step(state: TrainingState, transitions: types.Transition):
      loss, grads = jax.value_and_grad(loss_fn)(state.params, state.target_params, transitions)
      updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
      params = optax.apply_updates(state.params, updates)
      steps = state.steps + 1
      target_params = jax.lax.cond(steps % period == 0, lambda: params, lambda: state.target_params)
      return TrainingState(params, target_params, opt_state, steps), {
          "loss": loss, "gradient_norm": optax.global_norm(grads)}

    def prioritized_loss_fn(params, target_params, transitions: types.Transition, weights):
      return weighted_transition_loss(network, transform(params), target_params, transitions,
                                      weights, discount, huber_delta, double_q)

    def prioritized_sgd_step(state: TrainingState, transitions: types.Transition,
                             probabilities, table_size, beta):
      weights = importance_sampling_weights(probabilities, table_size, beta)
      (loss, td), grads = jax.value_and_grad(prioritized_loss_fn, has_aux=True)(
          state.params, state.target_params, transitions, weights)
      updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
      params = optax.apply_updates(state.params, updates)
      steps = state.steps + 1
      target_params = jax.lax.cond(steps % period == 0, lambda: params, lambda: state.target_params)
      return TrainingState(params, target_params, opt_state, steps), td, {
          "loss": loss, "gradient_norm": optax.global_norm(grads), "beta": beta,
          "mean_abs_td": jnp.mean(jnp.abs(td)), "min_is_weight": jnp.min(weights)}

    self._sgd_step = learners.jit_with_packed_metrics(sgd_step)
    self._prioritized_sgd_step = learners.jit_with_packed_metrics(prioritized_sgd_step)
    params = network.init(random_key, np.asarray(dummy_observation)[None])
    self._state = TrainingState(params, params, optimizer.init(params), jnp.zeros((), jnp.int32))

  def step(self) -> None:
    if self._prioritized is None:
      super().step()
      return
    sample = next(self._iterator)
    pr = self._prioritized
    beta = annealed_exponent(pr.importance_sampling_exponent, pr.annealing_steps,
                             self.step_count)
    state, td, metrics = self._prioritized_sgd_step(
        self._state, sample.data, np.asarray(sample.info.probability, np.float32),
        np.asarray(sample.info.table_size, np.float32), np.float32(beta))
    priorities = np.abs(np.asarray(td, np.float64)) + pr.priority_epsilon
    self._commit_with_priorities(state, metrics, pr.client, pr.table, sample.info.key,
                                 priorities)

