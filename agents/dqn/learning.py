"""Double-DQN learner: n-step TD with a Huber loss, Adam, periodic target copies;
optionally prioritized replay with importance-sampling weights (Schaul et al. 2016), and
the action-gap increasing TD targets advantage learning (Bellemare et al. 2016) and
Munchausen Q-learning (Vieillard et al. 2020) in place of (double) Q-learning
(`TDOperator`, `TD_OPERATORS`)."""
from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable, Dict, Iterator, NamedTuple, Optional, Tuple

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


def advantage_learning(q_tm1: jnp.ndarray, a_tm1: jnp.ndarray, r_t: jnp.ndarray,
                       discount_t: jnp.ndarray, q_t_value: jnp.ndarray,
                       q_t_selector: jnp.ndarray, q_tm1_target: jnp.ndarray, alpha,
                       double_q: bool = True) -> jnp.ndarray:
  """The advantage-learning TD error of one transition (Bellemare, Ostrovski, Guez,
  Thomas and Munos 2016, "Increasing the Action Gap", eq. 9 with the target network of
  their section 5): the (double) Q-learning target minus `alpha` times the action gap of
  the taken action under the target network,

    target = r_t + discount_t * q_t_value[argmax_a q_t_selector]  (double_q; else max_a q_t_value)
             - alpha * (max_b q_tm1_target[b] - q_tm1_target[a_tm1])
    td     = target - q_tm1[a_tm1]

  The operator keeps the greedy action's value and lowers every other action's, so the
  fixed point has gaps 1 / (1 - alpha) times wider between the best and the other actions
  (their Theorem 2's gap-increasing property): a greedy policy whose argmax survives
  a larger error in its Q-values, e.g. int8 rounding. Gradients stop at the target.

  Args:
    q_tm1: float [A] online Q-values at s_tm1.
    a_tm1: int [] action taken at s_tm1.
    r_t: float [] (n-step) reward.
    discount_t: float [] bootstrap discount (0 at a termination).
    q_t_value: float [A] target-network Q-values at s_t.
    q_t_selector: float [A] online Q-values at s_t (used if double_q).
    q_tm1_target: float [A] target-network Q-values at s_tm1.
    alpha: float [] advantage-learning coefficient in [0, 1) (0: Q-learning).
    double_q: select the bootstrap action with q_t_selector (van Hasselt et al. 2016).
  Returns:
    float [] TD error.
  """
  chex.assert_rank([q_tm1, a_tm1, r_t, discount_t, q_t_value, q_t_selector, q_tm1_target],
                   [1, 0, 0, 0, 1, 1, 1])
  chex.assert_type([q_tm1, a_tm1, r_t, discount_t, q_t_value, q_t_selector, q_tm1_target],
                   [float, int, float, float, float, float, float])
  if double_q:
    bootstrap = q_t_value[jnp.argmax(q_t_selector)]
  else:
    bootstrap = jnp.max(q_t_value)
  gap = jnp.max(q_tm1_target) - q_tm1_target[a_tm1]
  target = r_t + discount_t * bootstrap - alpha * gap
  return jax.lax.stop_gradient(target) - q_tm1[a_tm1]


def munchausen_q_learning(q_tm1: jnp.ndarray, a_tm1: jnp.ndarray, r_t: jnp.ndarray,
                          discount_t: jnp.ndarray, q_t_value: jnp.ndarray,
                          q_tm1_target: jnp.ndarray, alpha, temperature,
                          log_policy_clip: float = -1.0) -> jnp.ndarray:
  """The Munchausen-DQN TD error of one transition (Vieillard, Pietquin and Geist 2020,
  "Munchausen Reinforcement Learning", the M-DQN regression target of their eq. 2 /
  section 3): the reward gets the scaled, clipped log-probability of the taken action under
  the target network's softmax policy, and the bootstrap is the soft value of that policy,

    pi(.|s)  = softmax(q_target(s, .) / temperature)
    target   = r_t + alpha * clip(temperature * log pi(a_tm1|s_tm1), log_policy_clip, 0)
               + discount_t * sum_a pi(a|s_t) (q_t_value[a] - temperature * log pi(a|s_t))
    td       = target - q_tm1[a_tm1]

  The soft value equals temperature * logsumexp(q_t_value / temperature), computed so.
  The bonus penalises actions the current policy would not take (an implicit KL
  regularisation towards the previous policy that also widens the action gap, their
  section 4). With n-step transitions the bonus is added once, at s_tm1. Gradients stop
  at the target.

  Args:
    q_tm1: float [A] online Q-values at s_tm1.
    a_tm1: int [] action taken at s_tm1.
    r_t: float [] (n-step) reward.
    discount_t: float [] bootstrap discount (0 at a termination).
    q_t_value: float [A] target-network Q-values at s_t.
    q_tm1_target: float [A] target-network Q-values at s_tm1.
    alpha: float [] Munchausen scaling in [0, 1] (0: soft Q-learning; paper: 0.9).
    temperature: float [] entropy temperature tau > 0 (paper: 0.03).
    log_policy_clip: l_0 < 0, the lower clip of temperature * log pi (paper: -1).
  Returns:
    float [] TD error.
  """
  chex.assert_rank([q_tm1, a_tm1, r_t, discount_t, q_t_value, q_tm1_target],
                   [1, 0, 0, 0, 1, 1])
  chex.assert_type([q_tm1, a_tm1, r_t, discount_t, q_t_value, q_tm1_target],
                   [float, int, float, float, float, float])
  log_pi_tm1 = jax.nn.log_softmax(q_tm1_target / temperature)[a_tm1]
  bonus = jnp.clip(temperature * log_pi_tm1, log_policy_clip, 0.0)
  soft_value = temperature * jax.nn.logsumexp(q_t_value / temperature)
  target = r_t + alpha * bonus + discount_t * soft_value
  return jax.lax.stop_gradient(target) - q_tm1[a_tm1]


@dataclasses.dataclass(frozen=True)
class TDOperator:
  """Which TD target the DQN loss regresses on, and its coefficients (`TD_OPERATORS`).

  Attributes:
    name: a key of `TD_OPERATORS`: ``q_learning`` ((double) Q-learning, `dqn_td_errors`),
      ``advantage_learning`` (`advantage_learning`) or ``munchausen``
      (`munchausen_q_learning`; its bootstrap is the soft value, double_q does not apply).
    alpha: advantage-learning coefficient / Munchausen scaling (unused by q_learning).
    temperature: Munchausen entropy temperature (used by munchausen only).
  """
  name: str = "q_learning"
  alpha: float = 0.9
  temperature: float = 0.03

  def td_errors(self, q_tm1, a_tm1, r_t, discount_t, q_t_value, q_t_selector,
                q_tm1_target, double_q: bool = True) -> jnp.ndarray:
    """float32 [B] TD errors of a batch ([B, A] Q-values, [B] actions, rewards and
    discounts; q_tm1_target None when `uses_target_at_tm1` is False)."""
    return TD_OPERATORS[self.name][0](self, q_tm1, a_tm1, r_t, discount_t, q_t_value,
                                      q_t_selector, q_tm1_target, double_q)

  @classmethod
  def of_config(cls, config) -> "TDOperator":
    """The operator a `DQNConfig` (or a config with its `td_operator`,
    `td_operator_alpha` and `munchausen_temperature` fields) sets: what every learner built
    on DQN's config trains with (`DQNBuilder.make_td_operator`, `DQNPopulation`)."""
    return cls(config.td_operator, config.td_operator_alpha, config.munchausen_temperature)

  @property
  def uses_target_at_tm1(self) -> bool:
    """Whether the target needs the target network's Q-values at s_tm1."""
    return TD_OPERATORS[self.name][1]


def _q_learning_td(op, q_tm1, a_tm1, r_t, discount_t, q_t_value, q_t_selector,
                   q_tm1_target, double_q):
  del op, q_tm1_target
  return dqn_td_errors(q_tm1, a_tm1, r_t, discount_t, q_t_value, q_t_selector, double_q)


def _advantage_learning_td(op, q_tm1, a_tm1, r_t, discount_t, q_t_value, q_t_selector,
                           q_tm1_target, double_q):
  fn = functools.partial(advantage_learning, alpha=op.alpha, double_q=double_q)
  return jax.vmap(fn)(q_tm1, a_tm1, r_t, discount_t, q_t_value, q_t_selector, q_tm1_target)


def _munchausen_td(op, q_tm1, a_tm1, r_t, discount_t, q_t_value, q_t_selector,
                   q_tm1_target, double_q):
  del q_t_selector, double_q
  fn = functools.partial(munchausen_q_learning, alpha=op.alpha, temperature=op.temperature)
  return jax.vmap(fn)(q_tm1, a_tm1, r_t, discount_t, q_t_value, q_tm1_target)


# name -> (batched TD errors, whether it reads the target network at s_tm1).
TD_OPERATORS: Dict[str, Tuple[Callable[..., jnp.ndarray], bool]] = {
    "q_learning": (_q_learning_td, False),
    "advantage_learning": (_advantage_learning_td, True),
    "munchausen": (_munchausen_td, True),
}
Q_LEARNING = TDOperator()


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
                         double_q: bool = True,
                         operator: TDOperator = Q_LEARNING) -> jnp.ndarray:
  """float32 [B] TD errors (`dqn_td_errors`) of the Q-network `network` on a batch of
  n-step transitions: Q(s_tm1) and the double-Q selector Q(s_t) from `online_params`,
  the bootstrap value from `target_params`, bootstrapping with
  `discount * transitions.discount` (the agent's gamma times the n-step adder's
  gamma^(n-1) * prod d, see `dqn_loss`). `discount` is a float or a float32 scalar array
  (a traced one in the population learner, `agents.dqn.population`). `operator` chooses
  the target (`TDOperator`; default (double) Q-learning)."""
  q_tm1 = network.apply(online_params, transitions.observation)
  q_t_selector = network.apply(online_params, transitions.next_observation)
  q_t_value = network.apply(target_params, transitions.next_observation)
  q_tm1_target = (network.apply(target_params, transitions.observation)
                  if operator.uses_target_at_tm1 else None)
  return operator.td_errors(q_tm1, transitions.action.astype(jnp.int32), transitions.reward,
                            discount * transitions.discount, q_t_value, q_t_selector,
                            q_tm1_target, double_q)


def weighted_transition_loss(network: hk.Transformed, online_params: hk.Params,
                             target_params: hk.Params, transitions: types.Transition,
                             weights: Optional[jnp.ndarray], discount, huber_delta,
                             double_q: bool = True, operator: TDOperator = Q_LEARNING):
  """`(loss, td)`: the importance-weighted mean Huber loss mean_i w_i * Huber(td_i)
  (Schaul et al. 2016, Algorithm 1 line 11; Mnih et al. 2015's Huber loss) of the
  `transition_td_errors` td [B], with float32 `weights` [B]; `weights` None: the plain
  DQN loss mean_i Huber(td_i) (uniform replay). `discount` and `huber_delta` are floats
  or float32 scalar arrays; `operator` the TD target (`TDOperator`)."""
  td = transition_td_errors(network, online_params, target_params, transitions, discount,
                            double_q, operator)
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
    operator: the TD target (`TDOperator`: (double) Q-learning by default, advantage
      learning or Munchausen Q-learning).
  """
  network: hk.Transformed
  target_update_period: int
  double_q: bool = True
  params_transform: Optional[Callable[[hk.Params], hk.Params]] = None
  operator: TDOperator = Q_LEARNING

  def loss(self, params: hk.Params, target_params: hk.Params,
           transitions: types.Transition, weights: Optional[jnp.ndarray], discount,
           huber_delta):
    """`(loss, td)` of `weighted_transition_loss` at the transformed online `params`."""
    if self.params_transform is not None:
      params = self.params_transform(params)
    return weighted_transition_loss(self.network, params, target_params, transitions,
                                    weights, discount, huber_delta, self.double_q,
                                    self.operator)

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
    td_operator: the TD target (`TDOperator`: (double) Q-learning by default, advantage
      learning or Munchausen Q-learning).
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
               prioritized: Optional[PrioritizedReplay] = None,
               td_operator: TDOperator = Q_LEARNING):
    self._iterator = iterator
    self._prioritized = prioritized
    self._init_bookkeeping(counter, logger)
    update = DQNUpdate(network, int(target_update_period), double_q, params_transform,
                       td_operator)

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

