"""Double-DQN learner: n-step TD with a Huber loss, Adam, periodic target copies."""
from __future__ import annotations

import time
from typing import Any, Callable, Iterator, NamedTuple, Optional

import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np
import optax
import rlax
from acme import core, types
from acme.utils import counting, loggers


class TrainingState(NamedTuple):
  params: hk.Params
  target_params: hk.Params
  opt_state: optax.OptState
  steps: jnp.ndarray  # int32 scalar: learner steps taken


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
  if double_q:
    td = jax.vmap(rlax.double_q_learning)(q_tm1, a_tm1, r_t, discount_t, q_t_value, q_t_selector)
  else:
    td = jax.vmap(rlax.q_learning)(q_tm1, a_tm1, r_t, discount_t, q_t_value)
  return jnp.mean(rlax.huber_loss(td, huber_delta))


class DQNLearner(core.Learner):
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

  `get_variables(["policy", "version"])` returns `[params, learner steps]`.
  """

  def __init__(self, network: hk.Transformed, iterator: Iterator[Any], random_key: jax.Array,
               dummy_observation: np.ndarray, optimizer: optax.GradientTransformation,
               discount: float, target_update_period: int, huber_delta: float = 1.0,
               double_q: bool = True, params_transform: Optional[Callable] = None,
               logger: Optional[loggers.Logger] = None, counter: Optional[counting.Counter] = None):
    self._iterator = iterator
    self._logger = logger or loggers.NoOpLogger()
    self._counter = counter or counting.Counter()
    transform = params_transform or (lambda p: p)
    period = int(target_update_period)

    def loss_fn(params, target_params, transitions: types.Transition):
      online = transform(params)
      q_tm1 = network.apply(online, transitions.observation)
      q_t_selector = network.apply(online, transitions.next_observation)
      q_t_value = network.apply(target_params, transitions.next_observation)
      return dqn_loss(q_tm1, transitions.action.astype(jnp.int32), transitions.reward,
                      discount * transitions.discount, q_t_value, q_t_selector,
                      huber_delta, double_q)

    def sgd_step(state: TrainingState, transitions: types.Transition):
      loss, grads = jax.value_and_grad(loss_fn)(state.params, state.target_params, transitions)
      updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
      params = optax.apply_updates(state.params, updates)
      steps = state.steps + 1
      target_params = jax.lax.cond(steps % period == 0, lambda: params, lambda: state.target_params)
      return TrainingState(params, target_params, opt_state, steps), {
          "loss": loss, "gradient_norm": optax.global_norm(grads)}

    self._sgd_step = jax.jit(sgd_step)
    params = network.init(random_key, np.asarray(dummy_observation)[None])
    self._state = TrainingState(params, params, optimizer.init(params), jnp.zeros((), jnp.int32))
    self._timestamp = None

  @property
  def step_count(self) -> int:
    return int(self._state.steps)

  def step(self) -> None:
    sample = next(self._iterator)
    self._state, metrics = self._sgd_step(self._state, sample.data)
    now = time.time()
    elapsed = now - self._timestamp if self._timestamp else 0.0
    self._timestamp = now
    self._counter.increment(steps=1, walltime=elapsed)
    self._logger.write({"learner_steps": int(self._state.steps),
                        **{k: float(v) for k, v in metrics.items()}})

  def get_variables(self, names):
    state = self._state  # one consistent snapshot, also when read from another thread
    out = {"policy": state.params, "target": state.target_params, "version": int(state.steps)}
    return [out[name] for name in names]

  def save(self) -> TrainingState:
    return jax.device_get(self._state)

  def restore(self, state: TrainingState) -> None:
    self._state = jax.device_put(TrainingState(*state))
