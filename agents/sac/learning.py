"""SAC losses and learner (Haarnoja et al. 2018, "Soft Actor-Critic Algorithms and
Applications", arXiv:1812.05905; equation numbers are that paper's).

One learner step on a batch of n-step transitions (s_tm1, a_tm1, R, d, s_t), all three
losses from the parameters before the step, with a fresh reparameterised sample of the
current policy at s_t (critic target) and at s_tm1 (policy and temperature):

  critic:      sum_k 0.5 (Q_k(s_tm1, a_tm1) - y)^2,
               y = R + gamma d (min_k Q'_k(s_t, a_t) - alpha log pi(a_t|s_t))   (eq. 5, 3)
  policy:      alpha log pi(a|s_tm1) - min_k Q_k(s_tm1, a),  a = tanh(mu + sigma eps)  (eq. 7, 11)
  temperature: alpha (-log pi(a|s_tm1) - H_target),  alpha = exp(log_alpha)   (eq. 18)
  targets:     Q' <- tau Q + (1 - tau) Q' every `target_update_period` learner steps.

The policy's `[mean, log_std]` outputs parameterise a Gaussian over the pre-squash `u`;
the action in the policy's `[-1, 1]` units is `tanh(u)` and its density carries the
change of variables `log pi(a) = log N(u; mean, std) - sum_i log(1 - tanh(u_i)^2)`
(Appendix C, eq. 26). Actions are stored in environment units and mapped to `[-1, 1]`
(`continuous.to_unit`) before they reach the critics; the entropy is measured in these
units (the rescale to the bounds adds a constant, the paper's convention).
"""
from __future__ import annotations

import functools
from typing import Any, Callable, Iterator, NamedTuple, Optional, Tuple

import distrax
import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np
import optax
from acme import types
from acme.utils import counting, loggers

from actorq.agents.dpg_common.learning import (check_target_update, init_policy_and_critic,
                                                target_update, twin_critic_loss)
from actorq.components import learners
from actorq.components.acting import continuous


def tanh_gaussian_log_prob(u: jnp.ndarray, mean: jnp.ndarray,
                           log_std: jnp.ndarray) -> jnp.ndarray:
  """log-density of `a = tanh(u)`, `u ~ N(mean, diag(exp(log_std)^2))`, at `a`.

      log pi(a) = log N(u; mean, std) - sum_i log(1 - tanh(u_i)^2)      (eq. 26)

  The Jacobian term is distrax's numerically stable `Tanh` bijector
  (`2 (log 2 - u - softplus(-2u))`), finite for any `u` (no `atanh` of a saturated `a`).

  Args:
    u: float32 [A] pre-squash sample.
    mean, log_std: float32 [A] the Gaussian (log_std already clipped).

  Returns:
    float32 [] (nats, in the units of `a in (-1, 1)^A`).
  """
  base = distrax.MultivariateNormalDiag(mean, jnp.exp(log_std)).log_prob(u)
  return base - jnp.sum(distrax.Tanh().forward_log_det_jacobian(u), axis=-1)


def sample_tanh_gaussian(outputs: jnp.ndarray, key: jax.Array
                         ) -> Tuple[jnp.ndarray, jnp.ndarray]:
  """Reparameterised sample of the squashed policy (gradients flow into `outputs`).

  Args:
    outputs: float32 [B, 2A] policy outputs (mean, log-std; `continuous.split_gaussian`).
    key: PRNG key.

  Returns:
    (a float32 [B, A] in [-1, 1], log pi(a) float32 [B]).
  """
  mean, log_std = continuous.split_gaussian(outputs, jnp)
  u = mean + jnp.exp(log_std) * jax.random.normal(key, mean.shape, mean.dtype)
  return jnp.tanh(u), jax.vmap(tanh_gaussian_log_prob)(u, mean, log_std)


def sac_policy_loss(alpha: jnp.ndarray, log_pi: jnp.ndarray, q: jnp.ndarray) -> jnp.ndarray:
  """SAC's policy loss of one state (eq. 7 with the reparameterisation of eq. 11):

      alpha * log pi(a|s) - min_k Q_k(s, a),   a ~ pi(.|s) reparameterised

  Args:
    alpha: float32 [] temperature (no gradient flows into it).
    log_pi: float32 [] log pi(a|s) of the sampled action.
    q: float32 [K] the online critics at (s, a).

  Returns:
    float32 [].
  """
  return jax.lax.stop_gradient(alpha) * log_pi - jnp.min(q, axis=-1)


def sac_temperature_loss(log_alpha: jnp.ndarray, log_pi: jnp.ndarray,
                         target_entropy: float) -> jnp.ndarray:
  """The temperature loss of one state (eq. 18), alpha = exp(log_alpha):

      J(alpha) = alpha * (-log pi(a|s) - target_entropy)

  with no gradient into `log_pi`. Its gradient in log_alpha is `alpha * (H - H_target)`
  for the sample's entropy estimate `H = -log pi`: gradient descent lowers alpha while the
  policy's entropy exceeds the target and raises it below.

  Args:
    log_alpha: float32 [] the trained log-temperature.
    log_pi: float32 [] log pi(a|s) of a sampled action.
    target_entropy: nats (e.g. -|A|).

  Returns:
    float32 [].
  """
  return jnp.exp(log_alpha) * jax.lax.stop_gradient(-log_pi - target_entropy)


class TrainingState(NamedTuple):
  policy_params: hk.Params
  critic_params: hk.Params
  target_critic_params: hk.Params
  log_alpha: jnp.ndarray  # float32 scalar: log of the temperature
  policy_opt_state: optax.OptState
  critic_opt_state: optax.OptState
  alpha_opt_state: optax.OptState
  steps: jnp.ndarray  # int32 scalar: learner steps taken


def critic_loss(critic_params, state: TrainingState, transitions: types.Transition, alpha,
                key: jax.Array, *, networks, discount) -> jnp.ndarray:
  """The twin critics' soft TD loss (eq. 5 with the clipped double-Q target, eq. 3):
  `dpg_common.learning.twin_critic_loss` of Q_k(s_tm1, a_tm1) against
  `R + discount * d * (min_k Q'_k(s_t, a_t) - alpha log pi(a_t|s_t))`, a_t a reparameterised
  sample of the current policy (`state.policy_params`) at s_t drawn with `key`.

  Args:
    critic_params: the online critics' params (the differentiated argument).
    state: supplies the policy and target-critic params.
    transitions: a batch [B, ...], actions in environment units (mapped to [-1, 1] with
      `networks.action_minimum/maximum`, clipped).
    alpha: float32 [] temperature (reward units per nat).
    key: the sample's PRNG key.
    discount: gamma (a float or a traced float32 scalar).

  Returns:
    float32 [].
  """
  lo, hi = jnp.asarray(networks.action_minimum), jnp.asarray(networks.action_maximum)
  a_tm1 = jnp.clip(continuous.to_unit(transitions.action.astype(jnp.float32), lo, hi),
                   -1.0, 1.0)
  q_tm1 = networks.critic.apply(critic_params, transitions.observation, a_tm1)
  a_t, log_pi_t = sample_tanh_gaussian(
      networks.policy.apply(state.policy_params, transitions.next_observation), key)
  q_t = networks.critic.apply(state.target_critic_params, transitions.next_observation, a_t)
  return twin_critic_loss(q_tm1, transitions.reward, discount * transitions.discount,
                          q_t, alpha * log_pi_t)


def policy_loss(policy_params, critic_params, observation, alpha, key: jax.Array, *,
                networks, params_transform: Callable = lambda p: p
                ) -> Tuple[jnp.ndarray, jnp.ndarray]:
  """The batch mean of `sac_policy_loss` (eq. 7, 11) at a reparameterised sample drawn
  with `key` from the policy `params_transform(policy_params)` at `observation` [B, D].

  Returns:
    `(loss float32 [], log pi float32 [B])` (log pi feeds `temperature_loss`).
  """
  a, log_pi = sample_tanh_gaussian(
      networks.policy.apply(params_transform(policy_params), observation), key)
  q = networks.critic.apply(critic_params, observation, a)
  return jnp.mean(jax.vmap(sac_policy_loss, (None, 0, 0))(alpha, log_pi, q)), log_pi


def temperature_loss(log_alpha, log_pi, target_entropy) -> jnp.ndarray:
  """The batch mean of `sac_temperature_loss` (eq. 18): log_alpha float32 [], log_pi
  float32 [B], target_entropy nats (a float or a traced float32 scalar). float32 []."""
  return jnp.mean(jax.vmap(sac_temperature_loss, (None, 0, None))(
      log_alpha, log_pi, target_entropy))


def sgd_step(state: TrainingState, transitions: types.Transition, *, networks,
             sample_key: jax.Array, policy_optimizer: optax.GradientTransformation,
             critic_optimizer: optax.GradientTransformation,
             alpha_optimizer: optax.GradientTransformation, discount, target_entropy,
             target_update_period: int, target_update_tau: float,
             params_transform: Callable = lambda p: p):
  """One SAC learner step (pure; `SACLearner` jits it, `SACPopulation` vmaps it): all three
  losses from the parameters before the step, the samples of step k = `state.steps + 1`
  from `split(fold_in(sample_key, k))` (critic target, then policy/temperature), then the
  three optimizer updates and the Polyak target update (`target_update`).

  Args:
    state: the `TrainingState` before the step.
    transitions: a batch [B, ...] (see `critic_loss`).
    networks: `SACNetworks`.
    sample_key: the learner's sampling key.
    policy_optimizer, critic_optimizer, alpha_optimizer: optax transformations (their
      learning rates may be traced scalars: a population member's).
    discount: gamma; target_entropy: nats (floats or traced float32 scalars).
    target_update_period, target_update_tau: see `target_update` (static).
    params_transform: applied to the policy params inside the policy loss (QAT).

  Returns:
    `(new state, metrics)`: float32 scalars critic_loss, policy_loss, alpha_loss, alpha (the
    temperature used in the step), entropy (-mean log pi), critic_gradient_norm,
    policy_gradient_norm.
  """
  steps = state.steps + 1
  key_t, key_tm1 = jax.random.split(jax.random.fold_in(sample_key, steps))
  alpha = jnp.exp(state.log_alpha)
  c_loss, critic_grads = jax.value_and_grad(critic_loss)(
      state.critic_params, state, transitions, alpha, key_t, networks=networks,
      discount=discount)
  (p_loss, log_pi), policy_grads = jax.value_and_grad(policy_loss, has_aux=True)(
      state.policy_params, state.critic_params, transitions.observation, alpha, key_tm1,
      networks=networks, params_transform=params_transform)
  alpha_loss, alpha_grad = jax.value_and_grad(temperature_loss)(
      state.log_alpha, log_pi, target_entropy)
  c_updates, critic_opt_state = critic_optimizer.update(
      critic_grads, state.critic_opt_state, state.critic_params)
  p_updates, policy_opt_state = policy_optimizer.update(
      policy_grads, state.policy_opt_state, state.policy_params)
  a_updates, alpha_opt_state = alpha_optimizer.update(
      alpha_grad, state.alpha_opt_state, state.log_alpha)
  critic_params = optax.apply_updates(state.critic_params, c_updates)
  new_state = TrainingState(
      optax.apply_updates(state.policy_params, p_updates), critic_params,
      target_update(critic_params, state.target_critic_params, steps, target_update_period,
                    target_update_tau),
      optax.apply_updates(state.log_alpha, a_updates), policy_opt_state,
      critic_opt_state, alpha_opt_state, steps)
  return new_state, {"critic_loss": c_loss, "policy_loss": p_loss,
                     "alpha_loss": alpha_loss, "alpha": alpha,
                     "entropy": -jnp.mean(log_pi),
                     "critic_gradient_norm": optax.global_norm(critic_grads),
                     "policy_gradient_norm": optax.global_norm(policy_grads)}


def init_state(networks, random_key: jax.Array, dummy_observation,
               policy_optimizer: optax.GradientTransformation,
               critic_optimizer: optax.GradientTransformation,
               alpha_optimizer: optax.GradientTransformation, initial_temperature
               ) -> Tuple[TrainingState, jax.Array]:
  """`SACLearner`'s start from `random_key`: `(k_init, sample_key) = split(random_key)`,
  policy and critic from `init_policy_and_critic(k_init)`, target critic = online, log
  alpha = log(initial_temperature) (float32), fresh optimizer states, 0 steps.

  Returns:
    `(state, sample_key)`.
  """
  k_init, sample_key = jax.random.split(random_key)
  policy_params, critic_params = init_policy_and_critic(
      networks.policy, networks.critic, k_init, dummy_observation,
      jnp.asarray(networks.action_minimum).shape[0])
  log_alpha = jnp.asarray(np.log(initial_temperature), jnp.float32)
  state = TrainingState(policy_params, critic_params, critic_params, log_alpha,
                        policy_optimizer.init(policy_params),
                        critic_optimizer.init(critic_params),
                        alpha_optimizer.init(log_alpha), jnp.zeros((), jnp.int32))
  return state, sample_key


class SACLearner(learners.JaxLearner):
  """Full-precision SAC learner: a stochastic policy, twin critics and the temperature.

  Args:
    networks: `actorq.agents.sac.networks.SACNetworks` (policy outputs [B, 2A], twin
      critic outputs [B, 2]).
    iterator: yields `reverb.ReplaySample`s whose `data` is an `acme.types.Transition` batch.
    random_key: initialisation key; the samples of learner step k come from
      `fold_in(key, k)` (a function of the seed and the step count: resumable).
    dummy_observation: one observation `[D]` for initialisation.
    policy_optimizer, critic_optimizer, alpha_optimizer: optax transformations.
    discount: gamma (the bootstrap is `gamma * transition.discount`, see components.adders).
    target_entropy: nats (the paper's -|A|).
    initial_temperature: alpha at step 0 (> 0).
    target_update_period, target_update_tau: see `dpg_common.learning.target_update`.
    params_transform: applied to the policy params inside the policy loss (QAT fake quant).

  `get_variables(["policy", "version"])` returns `[policy params, learner steps]`; also
  served: "critic", "target_critic", "temperature" (alpha, float).

  Raises:
    ValueError: a non-positive or non-finite `initial_temperature` or non-finite
      `target_entropy`; bad target-update settings (see `target_update`).
  """

  def __init__(self, networks, iterator: Iterator[Any], random_key: jax.Array,
               dummy_observation: np.ndarray, policy_optimizer: optax.GradientTransformation,
               critic_optimizer: optax.GradientTransformation,
               alpha_optimizer: optax.GradientTransformation, discount: float,
               target_entropy: float, initial_temperature: float = 1.0,
               target_update_period: int = 1, target_update_tau: float = 0.005,
               params_transform: Optional[Callable] = None,
               logger: Optional[loggers.Logger] = None,
               counter: Optional[counting.Counter] = None):
    if not (np.isfinite(initial_temperature) and initial_temperature > 0):
      raise ValueError(f"initial_temperature must be a finite number > 0, got "
                       f"{initial_temperature}")
    if not np.isfinite(target_entropy):
      raise ValueError(f"target_entropy must be finite, got {target_entropy}")
    self._iterator = iterator
    self._init_bookkeeping(counter, logger)
    transform = params_transform or (lambda p: p)
    period, tau = int(target_update_period), float(target_update_tau)
    check_target_update(period, tau)
    self._state, sample_key = init_state(
        networks, random_key, dummy_observation, policy_optimizer, critic_optimizer,
        alpha_optimizer, initial_temperature)
    self._sgd_step = jax.jit(functools.partial(
        sgd_step, networks=networks, sample_key=sample_key,
        policy_optimizer=policy_optimizer, critic_optimizer=critic_optimizer,
        alpha_optimizer=alpha_optimizer, discount=discount,
        target_entropy=float(target_entropy), target_update_period=period,
        target_update_tau=tau, params_transform=transform))

  def get_variables(self, names):
    state = self._state  # one consistent snapshot, also when read from another thread
    out = {"policy": lambda: state.policy_params, "critic": lambda: state.critic_params,
           "target_critic": lambda: state.target_critic_params,
           "temperature": lambda: float(np.exp(state.log_alpha)),
           "version": lambda: int(state.steps)}
    return [out[name]() for name in names]
