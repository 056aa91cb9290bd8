"""Double-DQN learner: n-step TD with a Huber loss, Adam, periodic target copies;
optionally prioritized replay with importance-sampling weights (Schaul et al. 2016)."""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Iterator, NamedTuple, Optional, Tuple

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
                             weights: Optional[jnp.ndarray], discount, huber_delta,
                             double_q: bool = True):
  """`(loss, td)`: the importance-weighted mean Huber loss mean_i w_i * Huber(td_i)
  (Schaul et al. 2016, Algorithm 1 line 11; Mnih et al. 2015's Huber loss) of the
  `transition_td_errors` td [B], with float32 `weights` [B]; `weights` None: the plain
  DQN loss mean_i Huber(td_i) (uniform replay). `discount` and `huber_delta` are floats
  or float32 scalar arrays."""
  td = transition_td_errors(network, online_params, target_params, transitions, discount,
                            double_q)
  huber = rlax.huber_loss(td, huber_delta)
  return jnp.mean(huber if weights is None else weights * huber), td


# `(grads, opt_state, params) -> (updates, opt_state)`: an optax `update` (the learner's
# optimizer), or the population's Adam with a per-member learning rate.
OptimizerUpdate = Callable[[Any, optax.OptState, hk.Params], Tuple[Any, optax.OptState]]


class UpdateOutputs(NamedTuple):
  """What a `DQNUpdate` step computed besides the new state (float32): the loss, the TD
  errors td [B] (new priorities are |td| + epsilon) and the gradients' global norm."""
  loss: jnp.ndarray
  td: jnp.ndarray
  gradient_norm: jnp.ndarray


@dataclasses.dataclass(frozen=True)
class DQNUpdate:
  """DQN's learner step, written once (pure, jit- and vmap-able): `DQNLearner` jits it,
  `agents.dqn.population.DQNPopulation` vmaps it over its members.

  One step: the (importance-weighted) Huber loss of the n-step double-Q TD errors
  (`weighted_transition_loss`) of the online parameters seen through `params_transform`,
  its gradient, the optimizer's update, and a target copy right after learner steps K,
  2K, ... (K = `target_update_period`).

  A change to the loss (e.g. an action-gap term) is a new `loss` on a subclass or a field
  here; the learner and the population both pick it up.

  Attributes:
    network: Haiku Q-network (`apply(params, obs[B, ...]) -> q[B, A]`).
    target_update_period: K, in learner steps (>= 1).
    double_q: double Q-learning if True, else Q-learning with the target network.
    params_transform: applied to the online params inside the loss (QAT fake quant);
      None: identity.
  """
  network: hk.Transformed
  target_update_period: int
  double_q: bool = True
  params_transform: Optional[Callable[[hk.Params], hk.Params]] = None

  def loss(self, params: hk.Params, target_params: hk.Params,
           transitions: types.Transition, weights: Optional[jnp.ndarray], discount,
           huber_delta):
    """`(loss, td)` of `weighted_transition_loss` at the transformed online `params`."""
    if self.params_transform is not None:
      params = self.params_transform(params)
    return weighted_transition_loss(self.network, params, target_params, transitions,
                                    weights, discount, huber_delta, self.double_q)

  def __call__(self, state: TrainingState, transitions: types.Transition,
               weights: Optional[jnp.ndarray], discount, huber_delta,
               optimizer_update: OptimizerUpdate) -> Tuple[TrainingState, UpdateOutputs]:
    """One learner step.

    Args:
      state: the learner's `TrainingState`.
      transitions: `acme.types.Transition` batch [B, ...] (n-step, see `dqn_loss`).
      weights: float32 [B] importance-sampling weights, or None (uniform replay).
      discount: gamma, float or float32 scalar (traced in the population).
      huber_delta: Huber threshold, float or float32 scalar.
      optimizer_update: see `OptimizerUpdate`.

    Returns:
      `(new_state, UpdateOutputs)`.
    """
    (loss, td), grads = jax.value_and_grad(self.loss, has_aux=True)(
        state.params, state.target_params, transitions, weights, discount, huber_delta)
    updates, opt_state = optimizer_update(grads, state.opt_state, state.params)
    params = optax.apply_updates(state.params, updates)
    steps = state.steps + 1
    target_params = jax.lax.cond(steps % int(self.target_update_period) == 0,
                                 lambda: params, lambda: state.target_params)
    return (TrainingState(params, target_params, opt_state, steps),
            UpdateOutputs(loss, td, optax.global_norm(grads)))


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
    update = DQNUpdate(network, int(target_update_period), double_q, params_transform)

    def sgd_step(state: TrainingState, transitions: types.Transition):
      state, out = update(state, transitions, None, discount, huber_delta, optimizer.update)
      return state, {"loss": out.loss, "gradient_norm": out.gradient_norm}

    def prioritized_sgd_step(state: TrainingState, transitions: types.Transition,
                             probabilities, table_size, beta):
      weights = importance_sampling_weights(probabilities, table_size, beta)
      state, out = update(state, transitions, weights, discount, huber_delta,
                          optimizer.update)
      return state, out.td, {
          "loss": out.loss, "gradient_norm": out.gradient_norm, "beta": beta,
          "mean_abs_td": jnp.mean(jnp.abs(out.td)), "min_is_weight": jnp.min(weights)}

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

