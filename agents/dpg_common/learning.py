"""The deterministic-policy-gradient learner shared by DDPG and D4PG.

One learner step on a batch of n-step transitions (s_tm1, a_tm1, R, d, s_t):

  critic: minimise `critic_loss(C(s_tm1, a_tm1), R, gamma * d, C'(s_t, pi'(s_t)))` where
          C' and pi' are the target networks (Lillicrap et al. 2016, eq. 4-6; for D4PG
          the projected categorical loss, Barth-Maron et al. 2018, eq. 7);
  policy: the deterministic policy gradient `E[dQ/da|a=pi(s) * dpi/dtheta]` (Silver et
          al. 2014, eq. 7; rlax.dpg_loss) with `Q = q_value(C(s_tm1, pi(s_tm1)))`;
  targets: `target <- tau * online + (1 - tau) * target` every K learner steps.

Actions are stored in environment units and mapped to the policy's `[-1, 1]` units
(`actorq.components.continuous.to_unit`) before they reach the critic.
"""
from __future__ import annotations

from typing import Any, Callable, Iterator, NamedTuple, Optional

import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np
import optax
import rlax
from acme import types
from acme.utils import counting, loggers

from actorq.components import continuous, learners

# critic_loss(out_tm1[B, K], r_t[B], discount_t[B], out_t[B, K]) -> scalar
CriticLoss = Callable[[jnp.ndarray, jnp.ndarray, jnp.ndarray, jnp.ndarray], jnp.ndarray]
# q_value(out[B, K]) -> q[B]
QValue = Callable[[jnp.ndarray], jnp.ndarray]


class TrainingState(NamedTuple):
  policy_params: hk.Params
  critic_params: hk.Params
  target_policy_params: hk.Params
  target_critic_params: hk.Params
  policy_opt_state: optax.OptState
  critic_opt_state: optax.OptState
  steps: jnp.ndarray  # int32 scalar: learner steps taken


def target_update(online, target, steps: jnp.ndarray, period: int, tau: float):
  """`tau * online + (1 - tau) * target` when `steps % period == 0`, else `target`.

  `steps` is the learner step count *after* the current update. With `tau == 1` the
  copy is exact (no arithmetic), so target == online right after steps K, 2K, ...

  Raises:
    ValueError: period < 1 or tau outside (0, 1].
  """
  if period < 1:
    raise ValueError(f"target update period must be >= 1 learner step, got {period}")
  if not 0.0 < tau <= 1.0:
    raise ValueError(f"target update tau must be in (0, 1], got {tau}")
  if tau == 1.0:
    new = online
  else:
    new = jax.tree_util.tree_map(lambda o, t: tau * o + (1.0 - tau) * t, online, target)
  if period == 1:
    return new
  return jax.lax.cond(steps % period == 0, lambda: new, lambda: target)


def dpg_policy_loss(a_t: jnp.ndarray, dqda_t: jnp.ndarray,
                    dqda_clipping: Optional[float] = None) -> jnp.ndarray:
  """Batch-mean deterministic policy gradient loss (Silver et al. 2014; rlax.dpg_loss).

  The loss per sample is `sum_i 0.5 * (sg(a + dqda) - a)_i^2`, whose gradient in the
  policy parameters is `-dqda . da/dtheta`, the deterministic policy gradient.

  Args:
    a_t: float32 [B, A] actions of the policy being trained.
    dqda_t: float32 [B, A] dQ/da at those actions.
    dqda_clipping: clip each sample's dqda to this L2 norm (None: no clip).

  Returns:
    float32 scalar; its value is `mean_b 0.5 * |dqda_b|^2` (after clipping).
  """
  if a_t.ndim != 2 or dqda_t.shape != a_t.shape:
    raise ValueError(f"a_t and dqda_t must both be [B, A], got {a_t.shape} and {dqda_t.shape}")
  per_dim = jax.vmap(lambda a, g: rlax.dpg_loss(a, g, dqda_clipping))(a_t, dqda_t)
  return jnp.mean(jnp.sum(per_dim, axis=-1))


class DPGLearner(learners.JaxLearner):
  """Full-precision learner for a deterministic policy and a critic.

  Args:
    networks: `actorq.agents.dpg_common.networks.DPGNetworks`.
    iterator: yields `reverb.ReplaySample`s whose `data` is an `acme.types.Transition` batch.
    random_key: initialisation key.
    dummy_observation: one observation `[D]` for initialisation.
    policy_optimizer, critic_optimizer: optax transformations.
    discount: gamma (the bootstrap is `gamma * transition.discount`, see components.adders).
    critic_loss: the agent's pure critic loss (see `CriticLoss`).
    q_value: maps critic outputs to Q-values for the policy gradient.
    target_update_period: learner steps between target updates (see `target_update`).
    target_update_tau: in (0, 1]; 1 = hard copy.
    dqda_clipping: see `dpg_policy_loss`.
    params_transform: applied to the policy params inside the loss (e.g. QAT fake quant).

  `get_variables(["policy", "version"])` returns `[policy params, learner steps]`.
  """

  def __init__(self, networks, iterator: Iterator[Any], random_key: jax.Array,
               dummy_observation: np.ndarray, policy_optimizer: optax.GradientTransformation,
               critic_optimizer: optax.GradientTransformation, discount: float,
               critic_loss: CriticLoss, q_value: QValue, target_update_period: int,
               target_update_tau: float = 1.0, dqda_clipping: Optional[float] = None,
               params_transform: Optional[Callable] = None,
               logger: Optional[loggers.Logger] = None,
               counter: Optional[counting.Counter] = None):
    self._iterator = iterator
    self._init_bookkeeping(counter, logger)
    transform = params_transform or (lambda p: p)
    period, tau = int(target_update_period), float(target_update_tau)
    target_update(0, 0, jnp.zeros((), jnp.int32), period, tau)  # validates early
    policy, critic = networks.policy, networks.critic
    lo = jnp.asarray(networks.action_minimum)
    hi = jnp.asarray(networks.action_maximum)

    def critic_loss_fn(critic_params, target_policy_params, target_critic_params,
                       transitions: types.Transition):
      a_tm1 = jnp.clip(continuous.to_unit(transitions.action.astype(jnp.float32), lo, hi),
                       -1.0, 1.0)
      out_tm1 = critic.apply(critic_params, transitions.observation, a_tm1)
      u_t = policy.apply(target_policy_params, transitions.next_observation)
      out_t = critic.apply(target_critic_params, transitions.next_observation, u_t)
      return critic_loss(out_tm1, transitions.reward, discount * transitions.discount, out_t)

    def policy_loss_fn(policy_params, critic_params, observation):
      u = policy.apply(transform(policy_params), observation)
      # Q of each sample depends only on its own action, so the gradient of the batch
      # sum is the per-sample dQ/da.
      dqda = jax.grad(lambda a: jnp.sum(q_value(critic.apply(critic_params, observation, a))))(u)
      return dpg_policy_loss(u, dqda, dqda_clipping)

    def sgd_step(state: TrainingState, transitions: types.Transition):
      critic_loss_value, critic_grads = jax.value_and_grad(critic_loss_fn)(
          state.critic_params, state.target_policy_params, state.target_critic_params,
          transitions)
      policy_loss_value, policy_grads = jax.value_and_grad(policy_loss_fn)(
          state.policy_params, state.critic_params, transitions.observation)
      c_updates, critic_opt_state = critic_optimizer.update(
          critic_grads, state.critic_opt_state, state.critic_params)
      p_updates, policy_opt_state = policy_optimizer.update(
          policy_grads, state.policy_opt_state, state.policy_params)
      critic_params = optax.apply_updates(state.critic_params, c_updates)
      policy_params = optax.apply_updates(state.policy_params, p_updates)
      steps = state.steps + 1
      new_state = TrainingState(
          policy_params, critic_params,
          target_update(policy_params, state.target_policy_params, steps, period, tau),
          target_update(critic_params, state.target_critic_params, steps, period, tau),
          policy_opt_state, critic_opt_state, steps)
      return new_state, {"critic_loss": critic_loss_value, "policy_loss": policy_loss_value,
                         "critic_gradient_norm": optax.global_norm(critic_grads),
                         "policy_gradient_norm": optax.global_norm(policy_grads)}

    self._sgd_step = jax.jit(sgd_step)
    k_policy, k_critic = jax.random.split(random_key)
    obs = jnp.asarray(np.asarray(dummy_observation, np.float32)[None])
    policy_params = policy.init(k_policy, obs)
    critic_params = critic.init(k_critic, obs, jnp.zeros((1, lo.shape[0]), jnp.float32))
    self._state = TrainingState(policy_params, critic_params, policy_params, critic_params,
                                policy_optimizer.init(policy_params),
                                critic_optimizer.init(critic_params), jnp.zeros((), jnp.int32))

  def step(self) -> None:
    sample = next(self._iterator)
    state, metrics = self._sgd_step(self._state, sample.data)
    self._commit(state, metrics)

  def get_variables(self, names):
    state = self._state  # one consistent snapshot, also when read from another thread
    out = {"policy": state.policy_params, "critic": state.critic_params,
           "target_policy": state.target_policy_params,
           "target_critic": state.target_critic_params, "version": int(state.steps)}
    return [out[name] for name in names]

