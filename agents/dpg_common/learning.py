"""The deterministic-policy-gradient learner shared by DDPG, D4PG and TD3, and the twin
critic loss TD3 and SAC share.

One learner step on a batch of n-step transitions (s_tm1, a_tm1, R, d, s_t):

  critic: minimise `critic_loss(C(s_tm1, a_tm1), R, gamma * d, C'(s_t, u'_t))` where
          C' and pi' are the target networks and `u'_t = pi'(s_t)` (Lillicrap et al.
          2016, eq. 4-6; for D4PG the projected categorical loss, Barth-Maron et al.
          2018, eq. 7; for TD3 the twin-critic loss `twin_critic_loss` and the smoothed
          target action `u'_t = clip(pi'(s_t) + clip(sigma eps, -c, c), -1, 1)`,
          Fujimoto et al. 2018, eq. 10 and 14);
  policy: the deterministic policy gradient `E[dQ/da|a=pi(s) * dpi/dtheta]` (Silver et
          al. 2014, eq. 7; rlax.dpg_loss) with `Q = q_value(C(s_tm1, pi(s_tm1)))`, applied
          on the learner steps that are multiples of `policy_delay` (1 for DDPG/D4PG; TD3's
          delayed policy updates, Fujimoto et al. 2018, sec. 5.2);
  targets: `target <- tau * online + (1 - tau) * target` every K learner steps.

Actions are stored in environment units and mapped to the policy's `[-1, 1]` units
(`actorq.components.acting.continuous.to_unit`) before they reach the critic.
"""
from __future__ import annotations

import functools
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
from actorq.components.acting import continuous

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


def check_target_update(period: int, tau: float) -> None:
  """Raises ValueError: period < 1 or tau outside (0, 1] (see `target_update`)."""
  if period < 1:
    raise ValueError(f"target update period must be >= 1 learner step, got {period}")
  if not 0.0 < tau <= 1.0:
    raise ValueError(f"target update tau must be in (0, 1], got {tau}")


def target_update(online, target, steps: jnp.ndarray, period: int, tau: float):
  """`tau * online + (1 - tau) * target` when `steps % period == 0`, else `target`.

  `steps` is the learner step count *after* the current update. With `tau == 1` the
  copy is exact (no arithmetic), so target == online right after steps K, 2K, ...

  Raises:
    ValueError: period < 1 or tau outside (0, 1].
  """
  check_target_update(period, tau)
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
  message = "a_t and dqda_t must both be [B, A]"
  chex.assert_rank(a_t, 2, custom_message=message, exception_type=ValueError)
  chex.assert_equal_shape([a_t, dqda_t], custom_message=message, exception_type=ValueError)
  per_dim = jax.vmap(lambda a, g: rlax.dpg_loss(a, g, dqda_clipping))(a_t, dqda_t)
  return jnp.mean(jnp.sum(per_dim, axis=-1))


def preactivation_penalty_loss(z_t: jnp.ndarray, penalty: float) -> jnp.ndarray:
  """`penalty * mean_b sum_i z_bi^2`: the squared pre-tanh outputs of a deterministic
  policy added to its loss "to prevent tanh saturation and vanishing gradients"
  (Andrychowicz et al. 2017, "Hindsight Experience Replay", appendix A).

  Args:
    z_t: float32 [B, A], the policy's outputs before tanh (u = tanh(z)).
    penalty: lambda >= 0.

  Returns:
    float32 scalar; its gradient in z is `2 penalty z / B`, which does not vanish where
    tanh saturates.

  Raises:
    ValueError: z_t not [B, A].
  """
  chex.assert_rank(z_t, 2, custom_message="z_t must be [B, A]", exception_type=ValueError)
  return penalty * jnp.mean(jnp.sum(jnp.square(z_t), axis=-1))


def clipped_double_q_target(r_t: jnp.ndarray, discount_t: jnp.ndarray, q_t: jnp.ndarray,
                            alpha_log_pi_t: jnp.ndarray = 0.0) -> jnp.ndarray:
  """The twin-critic bootstrap target of one transition, under `stop_gradient`.

      y = r_t + discount_t * (min_k q_t[k] - alpha_log_pi_t)

  TD3: `alpha_log_pi_t = 0` (clipped double Q-learning, Fujimoto et al. 2018, eq. 10);
  SAC: `alpha * log pi(a_t|s_t)` of the next action sampled from the current policy (the
  soft value, Haarnoja et al. 2018 "SAC: Algorithms and Applications", eq. 3, with the
  minimum over the two target critics of their sec. 5).

  Args:
    r_t: float32 [] (n-step) return.
    discount_t: float32 [] bootstrap discount (`gamma * transition.discount`).
    q_t: float32 [K] the K target critics at (s_t, a_t).
    alpha_log_pi_t: float32 [] entropy term (0 for TD3).

  Returns:
    float32 [].
  """
  return jax.lax.stop_gradient(r_t + discount_t * (jnp.min(q_t, axis=-1) - alpha_log_pi_t))


def twin_critic_loss(q_tm1: jnp.ndarray, r_t: jnp.ndarray, discount_t: jnp.ndarray,
                     q_t: jnp.ndarray, alpha_log_pi_t: Optional[jnp.ndarray] = None
                     ) -> jnp.ndarray:
  """Batch mean of `sum_k 0.5 * (y - q_tm1[k])^2`, y = `clipped_double_q_target`.

  Each of the K online critics regresses on the same target (Fujimoto et al. 2018,
  Algorithm 1: the sum of the two critics' squared errors; Haarnoja et al. 2018, eq. 5
  per critic). No gradient flows into `q_t` or `alpha_log_pi_t`.

  Args:
    q_tm1: float32 [B, K] online critics at (s_tm1, a_tm1).
    r_t: float32 [B] (n-step) returns.
    discount_t: float32 [B] bootstrap discounts.
    q_t: float32 [B, K] target critics at (s_t, a_t).
    alpha_log_pi_t: float32 [B] SAC's `alpha * log pi(a_t|s_t)`, or None (TD3: 0).

  Returns:
    float32 scalar.

  Raises:
    ValueError: on shape mismatches.
  """
  message = "q_tm1 and q_t must both be [B, K]"
  chex.assert_rank(q_tm1, 2, custom_message=message, exception_type=ValueError)
  chex.assert_equal_shape([q_tm1, q_t], custom_message=message, exception_type=ValueError)
  b = q_tm1.shape[0]
  if alpha_log_pi_t is None:
    alpha_log_pi_t = jnp.zeros((b,), q_t.dtype)
  for name, x in (("r_t", r_t), ("discount_t", discount_t), ("alpha_log_pi_t", alpha_log_pi_t)):
    chex.assert_shape(x, (b,), custom_message=f"{name} must be [B]", exception_type=ValueError)
  y = jax.vmap(clipped_double_q_target)(r_t, discount_t, q_t, alpha_log_pi_t)
  return jnp.mean(jnp.sum(rlax.l2_loss(y[:, None] - q_tm1), axis=-1))


def smoothed_target_action(u_t: jnp.ndarray, noise_t: jnp.ndarray, sigma: float,
                           noise_clip: float) -> jnp.ndarray:
  """TD3's target policy smoothing (Fujimoto et al. 2018, eq. 14) in the policy's units:

      u'_t = clip(u_t + clip(sigma * noise_t, -noise_clip, noise_clip), -1, 1)

  (the noise clipped to +-c, then the action clipped to the bounds, which are [-1, 1] in
  these units; `sigma` and `noise_clip` are in units of half the action range).

  Args:
    u_t: float32 [A] (or [B, A]) target policy actions in [-1, 1].
    noise_t: float32, same shape, standard normal draws.
    sigma, noise_clip: >= 0.

  Returns:
    float32, the shape of `u_t`.
  """
  eps = jnp.clip(sigma * noise_t, -noise_clip, noise_clip)
  return jnp.clip(u_t + eps, -1.0, 1.0)


def init_policy_and_critic(policy: hk.Transformed, critic: hk.Transformed,
                           random_key: jax.Array, dummy_observation: np.ndarray,
                           action_size: int) -> Tuple[Any, Any]:
  """Initial (policy, critic) parameters of an actor-critic learner.

  `policy.init(k1, obs[1, ...])` and `critic.init(k2, obs[1, ...], zeros[1, action_size])`
  with `k1, k2 = split(random_key)`; `dummy_observation` is one unbatched observation.
  """
  k_policy, k_critic = jax.random.split(random_key)
  obs = jnp.asarray(np.asarray(dummy_observation, np.float32)[None])
  return (policy.init(k_policy, obs),
          critic.init(k_critic, obs, jnp.zeros((1, action_size), jnp.float32)))


def critic_loss_value(networks, critic_loss: CriticLoss, critic_params, target_policy_params,
                      target_critic_params, transitions: types.Transition, discount,
                      target_policy_noise=None, noise_key=None) -> jnp.ndarray:
  """The critic's loss on one batch (pure; `DPGLearner`'s and a population member's).

  Stored actions [B, A] (environment units) are mapped to the policy's [-1, 1] units;
  the bootstrap discount is `discount * transitions.discount`; the target action is the
  target policy's, smoothed by `smoothed_target_action(u_t, noise, *target_policy_noise)`
  when `target_policy_noise` (sigma, noise_clip) is given (TD3, eq. 14).

  Args:
    networks: `DPGNetworks` (policy, critic, action bounds).
    critic_loss: see `CriticLoss`.
    critic_params, target_policy_params, target_critic_params: the networks' parameters.
    transitions: `acme.types.Transition` batch [B, ...].
    discount: gamma, a float or float32 scalar (a population member's is traced).
    target_policy_noise: `(sigma, noise_clip)` (floats or float32 scalars), or None.
    noise_key: the key of the smoothing noise's standard normal draws [B, A] (read only
      with `target_policy_noise`).

  Returns:
    float32 scalar.
  """
  lo = jnp.asarray(networks.action_minimum)
  hi = jnp.asarray(networks.action_maximum)
  a_tm1 = jnp.clip(continuous.to_unit(transitions.action.astype(jnp.float32), lo, hi),
                   -1.0, 1.0)
  out_tm1 = networks.critic.apply(critic_params, transitions.observation, a_tm1)
  u_t = networks.policy.apply(target_policy_params, transitions.next_observation)
  if target_policy_noise is not None:
    noise = jax.random.normal(noise_key, u_t.shape, u_t.dtype)
    u_t = smoothed_target_action(u_t, noise, *target_policy_noise)
  out_t = networks.critic.apply(target_critic_params, transitions.next_observation, u_t)
  return critic_loss(out_tm1, transitions.reward, discount * transitions.discount, out_t)


def policy_loss_value(networks, q_value: QValue, policy_params, critic_params,
                      observation: jnp.ndarray, params_transform: Callable = lambda p: p,
                      dqda_clipping: Optional[float] = None,
                      preactivation_penalty: float = 0.0) -> jnp.ndarray:
  """The deterministic policy gradient loss on observations [B, D] (pure): `dpg_policy_loss`
  of the policy's actions (its params through `params_transform`, e.g. QAT) and dQ/da of
  `q_value(critic(...))`, plus `preactivation_penalty_loss` when the penalty is > 0 (a
  Python float: it decides the graph). Returns a float32 scalar."""
  penalty = float(preactivation_penalty)
  if penalty > 0.0:
    z = networks.policy_preactivation.apply(params_transform(policy_params), observation)
    u = jnp.tanh(z)
  else:
    u = networks.policy.apply(params_transform(policy_params), observation)
  # Q of each sample depends only on its own action, so the gradient of the batch
  # sum is the per-sample dQ/da.
  dqda = jax.grad(lambda a: jnp.sum(q_value(networks.critic.apply(critic_params, observation,
                                                                   a))))(u)
  loss = dpg_policy_loss(u, dqda, dqda_clipping)
  if penalty > 0.0:
    loss = loss + preactivation_penalty_loss(z, penalty)
  return loss


def sgd_step(state: TrainingState, transitions: types.Transition, *, networks,
             policy_optimizer: optax.GradientTransformation,
             critic_optimizer: optax.GradientTransformation, discount,
             critic_loss: CriticLoss, q_value: QValue, target_update_period: int,
             target_update_tau: float, dqda_clipping: Optional[float] = None,
             params_transform: Callable = lambda p: p, policy_delay: int = 1,
             target_policy_noise=None, preactivation_penalty: float = 0.0,
             noise_key: Optional[jax.Array] = None):
  """One learner step of `DPGLearner` (pure; see the module docstring and its Args).

  `discount` and the entries of `target_policy_noise` may be traced float32 scalars (a
  population member's hyperparameters), and so may the optimizers' learning rates; the
  other arguments decide the graph. The smoothing noise of learner step k (counted from
  1) is `normal(fold_in(noise_key, k), [B, A])`.

  Returns:
    `(new TrainingState, metrics)`: float32 scalars critic_loss, policy_loss,
    critic_gradient_norm, policy_gradient_norm.
  """
  steps = state.steps + 1
  period, tau = target_update_period, target_update_tau

  step_key = (jax.random.fold_in(noise_key, steps) if target_policy_noise is not None
              else None)
  critic_loss_v, critic_grads = jax.value_and_grad(
      lambda p: critic_loss_value(networks, critic_loss, p, state.target_policy_params,
                                  state.target_critic_params, transitions, discount,
                                  target_policy_noise, step_key))(state.critic_params)
  policy_loss_v, policy_grads = jax.value_and_grad(
      lambda p: policy_loss_value(networks, q_value, p, state.critic_params,
                                  transitions.observation, params_transform, dqda_clipping,
                                  preactivation_penalty))(state.policy_params)
  c_updates, critic_opt_state = critic_optimizer.update(
      critic_grads, state.critic_opt_state, state.critic_params)
  critic_params = optax.apply_updates(state.critic_params, c_updates)

  def policy_update():
    p_updates, opt_state = policy_optimizer.update(
        policy_grads, state.policy_opt_state, state.policy_params)
    return optax.apply_updates(state.policy_params, p_updates), opt_state

  if policy_delay == 1:
    policy_params, policy_opt_state = policy_update()
  else:
    policy_params, policy_opt_state = jax.lax.cond(
        steps % policy_delay == 0, policy_update,
        lambda: (state.policy_params, state.policy_opt_state))
  new_state = TrainingState(
      policy_params, critic_params,
      target_update(policy_params, state.target_policy_params, steps, period, tau),
      target_update(critic_params, state.target_critic_params, steps, period, tau),
      policy_opt_state, critic_opt_state, steps)
  return new_state, {"critic_loss": critic_loss_v, "policy_loss": policy_loss_v,
                     "critic_gradient_norm": optax.global_norm(critic_grads),
                     "policy_gradient_norm": optax.global_norm(policy_grads)}


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
    preactivation_penalty: lambda >= 0; adds `lambda * mean_b sum_i z_bi^2` over the
      policy's pre-tanh outputs z to the policy loss (Andrychowicz et al. 2017, appendix
      A), computed with `networks.policy_preactivation`; 0: the plain DPG loss.
    params_transform: applied to the policy params inside the loss (e.g. QAT fake quant).
    policy_delay: the policy (and its optimizer state) changes only on the learner steps
      that are multiples of it: steps d, 2d, ... counting from 1 (TD3: 2; 1: every step).
    target_policy_noise: `(sigma, noise_clip)` of TD3's target policy smoothing
      (`smoothed_target_action`), or None. The noise of learner step k is drawn from
      `fold_in(key, k)`, so it is a function of the seed and the step count (resumable).

  `get_variables(["policy", "version"])` returns `[policy params, learner steps]`.
  """

  def __init__(self, networks, iterator: Iterator[Any], random_key: jax.Array,
               dummy_observation: np.ndarray, policy_optimizer: optax.GradientTransformation,
               critic_optimizer: optax.GradientTransformation, discount: float,
               critic_loss: CriticLoss, q_value: QValue, target_update_period: int,
               target_update_tau: float = 1.0, dqda_clipping: Optional[float] = None,
               params_transform: Optional[Callable] = None,
               policy_delay: int = 1,
               target_policy_noise: Optional[Tuple[float, float]] = None,
               preactivation_penalty: float = 0.0,
               logger: Optional[loggers.Logger] = None,
               counter: Optional[counting.Counter] = None):
    if policy_delay < 1:
      raise ValueError(f"policy_delay must be >= 1 learner step, got {policy_delay}")
    penalty = float(preactivation_penalty)
    if not penalty >= 0.0:
      raise ValueError(f"preactivation_penalty must be >= 0, got {preactivation_penalty}")
    if penalty > 0.0 and getattr(networks, "policy_preactivation", None) is None:
      raise ValueError("preactivation_penalty > 0 needs a deterministic tanh policy "
                       "(networks.policy_preactivation); this policy has none")
    self._iterator = iterator
    self._init_bookkeeping(counter, logger)
    transform = params_transform or (lambda p: p)
    period, tau = int(target_update_period), float(target_update_tau)
    check_target_update(period, tau)
    noise_key = jax.random.fold_in(random_key, 1)
    self._sgd_step = jax.jit(functools.partial(
        sgd_step, networks=networks, policy_optimizer=policy_optimizer,
        critic_optimizer=critic_optimizer, discount=discount, critic_loss=critic_loss,
        q_value=q_value, target_update_period=period, target_update_tau=tau,
        dqda_clipping=dqda_clipping, params_transform=transform, policy_delay=policy_delay,
        target_policy_noise=target_policy_noise, preactivation_penalty=penalty,
        noise_key=noise_key))
    policy_params, critic_params = init_policy_and_critic(
        networks.policy, networks.critic, random_key, dummy_observation,
        np.shape(networks.action_minimum)[0])
    self._state = TrainingState(policy_params, critic_params, policy_params, critic_params,
                                policy_optimizer.init(policy_params),
                                critic_optimizer.init(critic_params), jnp.zeros((), jnp.int32))

  def get_variables(self, names):
    state = self._state  # one consistent snapshot, also when read from another thread
    out = {"policy": state.policy_params, "critic": state.critic_params,
           "target_policy": state.target_policy_params,
           "target_critic": state.target_critic_params, "version": int(state.steps)}
    return [out[name] for name in names]

