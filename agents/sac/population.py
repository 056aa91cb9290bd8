"""SAC's population learner: N members' training states on a leading member axis, updated
in ONE jitted, vmapped step (Flajolet et al. 2022, "Fast Population-Based Reinforcement
Learning on a Single Machine", section 3), with the mutable hyperparameters as arrays.

Each member's step is `SACLearner`'s: `sac.learning.sgd_step` (the same function
`SACLearner` jits) with the twin soft critics (Haarnoja et al. 2018, "Soft Actor-Critic
Algorithms and Applications", eq. 5), the reparameterised policy loss (eq. 7, 11), the
learned temperature (eq. 18) and Polyak targets; the policy's and critics' Adam after a
global-norm clip (`ActorCriticBuilder.optimizer`), the temperature's plain Adam
(`SACBuilder.temperature_optimizer`). What differs is only where the per-member values
live: the three learning rates, the discount and the target entropy per action dimension
are float32 arrays [N] (`MemberHyperparameters`), so PBT's exploit/explore changes them
without recompiling. The temperature itself is learned state (`log_alpha`, copied by an
exploit with the networks), not a hyperparameter.

    population = SACPopulation(config, networks, environment_spec)
    state = population.init(jax.random.split(key, N))        # MemberState, leaves [N, ...]
    hyper = population.hyperparameters(N)                    # MemberHyperparameters, [N] each
    state, td, metrics = population.step(state, transitions, probabilities, table_size,
                                         hyper, active)      # transitions leaves [N, B, ...]

Acting: `policy_values` gives every member's Gaussian head `[mean, log_std]` [N, B, 2A] in
one vmapped call (an int8 member's come from its policy runtime instead: the launcher
decides); `select_actions` samples the tanh-Gaussian from them in numpy, as SAC's actor
does outside its runtime (`continuous.tanh_gaussian_bounded`'s formula), after the
config's `random_warmup_steps` uniform actions of each member (`continuous.uniform_warmup`).
"""
from __future__ import annotations

from typing import Any, Mapping, NamedTuple

import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np
import optax
from acme import specs

from actorq.agents.sac import builder as builder_lib
from actorq.agents.sac import config as config_lib
from actorq.agents.sac import learning as sac_learning
from actorq.agents.sac import networks as networks_lib
from actorq.components import population as population_lib
from actorq.components.acting import continuous


class MemberHyperparameters(NamedTuple):
  """A member's mutable hyperparameters (float32 scalars; stacked: [N] each).

  policy_learning_rate, critic_learning_rate: the two clipped Adams' step sizes.
  temperature_learning_rate: Adam's step size for log(alpha).
  discount: gamma of the bootstrap (the adder's n-step returns use the member's gamma
    from when each item was written).
  target_entropy_per_dimension: the temperature loss's target entropy is |A| times this
    (nats per action dimension, < log 2).
  """
  policy_learning_rate: Any
  critic_learning_rate: Any
  temperature_learning_rate: Any
  discount: Any
  target_entropy_per_dimension: Any


# The fields `--mutate` may name, with their search ranges (Jaderberg et al. 2017 perturb
# within and resample from them). Other config fields are fixed for the population.
HYPERPARAMETERS: Mapping[str, population_lib.Hyperparameter] = {
    "policy_learning_rate": population_lib.learning_rate("the policy's Adam learning rate"),
    "critic_learning_rate": population_lib.learning_rate("the critics' Adam learning rate"),
    "temperature_learning_rate": population_lib.learning_rate(
        "the temperature's (log alpha's) Adam learning rate"),
    "discount": population_lib.DISCOUNT,
    # Below log 2 (the highest entropy a squashed policy has per dimension, see SACConfig).
    "target_entropy_per_dimension": population_lib.Hyperparameter(
        -3.0, 0.5, doc="target entropy per action dimension (nats)"),
    "actor_precision": population_lib.ACTOR_PRECISION,
}


class MemberState(NamedTuple):
  """`sac.learning.TrainingState`'s fields, then `sample_key`: the key of the member's
  learner samples (`SACLearner`'s second half of `split(init key)`; an exploit copies it
  with the rest, so a copy draws its source's sample sequence from then on, on batches
  of its own replay)."""
  policy_params: hk.Params
  critic_params: hk.Params
  target_critic_params: hk.Params
  log_alpha: jnp.ndarray
  policy_opt_state: optax.OptState
  critic_opt_state: optax.OptState
  alpha_opt_state: optax.OptState
  steps: jnp.ndarray
  sample_key: jax.Array


class SACPopulation(population_lib.BoxPopulationLearner):
  """N SAC learners stepped as one (see the module docstring); `policy_values` gives every
  member's Gaussian head `[mean, log_std]` (log-std not yet clipped), float32 [N, B, 2A].

  Args:
    config: the population's `SACConfig`: everything but `MemberHyperparameters` is
      common to the members (networks, batch size, replay, initial temperature,
      targets).
    networks: `SACBuilder(config).make_networks(spec)`.
    environment_spec: the task's spec, as `BoxPopulationLearner` takes it.

  Raises:
    ValueError: `config` is not a `SACConfig`; `continuous.UnboundedActionSpecError`
      (a ValueError) for actions that are not a finite box.
  """
  CONFIG = config_lib.SACConfig
  MEMBER_HYPERPARAMETERS = MemberHyperparameters
  HYPERPARAMETERS = HYPERPARAMETERS
  LOSS_METRICS = ("critic_loss", "policy_loss", "alpha_loss")

  def __init__(self, config: config_lib.SACConfig, networks: networks_lib.SACNetworks,
               environment_spec: specs.EnvironmentSpec):
    super().__init__(config, networks, environment_spec)
    self._builder = builder_lib.SACBuilder(config)
    self._transform = self._builder.params_transform() or (lambda p: p)

  def init(self, keys: jax.Array) -> MemberState:
    """Member m's state as `SACLearner` starts with `random_key = keys[m]`
    (`sac.learning.init_state`: networks, target critic = online, log alpha =
    log(config.initial_temperature), fresh optimizer states, 0 steps) and its sample key;
    leaves [N, ...]."""
    opt = self._builder.optimizer(1.0)  # the states do not depend on the learning rate
    alpha_opt = self._builder.temperature_optimizer(1.0)

    def one(key):
      state, sample_key = sac_learning.init_state(
          self.networks, key, self._dummy, opt, opt, alpha_opt, self.config.initial_temperature)
      return MemberState(*state, sample_key)
    return jax.vmap(one)(keys)

  @staticmethod
  def policy_params(state: MemberState) -> Any:
    """The policy parameters the actors run (leaves [N, ...] of a stacked state)."""
    return state.policy_params

  # -- acting ---------------------------------------------------------------------------
  def greedy_actions(self, values: np.ndarray) -> np.ndarray:
    """float32 [N, B, A]: `clip(from_unit(tanh(mean)), minimum, maximum)` of the members'
    heads [N, B, 2A]."""
    lo, hi = self._lo, self._hi
    mean, _ = continuous.split_gaussian(np.asarray(values, np.float32))
    return np.clip(continuous.from_unit(np.tanh(mean), lo, hi), lo, hi).astype(np.float32)

  def explore_actions(self, values: np.ndarray, hyper: MemberHyperparameters,
                      eps: np.ndarray) -> np.ndarray:
    """float32 [N, B, A]: member m's `clip(from_unit(tanh(mean + exp(log_std) * eps)),
    minimum, maximum)` of the heads [N, B, 2A] (log_std clipped to [LOG_STD_MIN,
    LOG_STD_MAX], `continuous.tanh_gaussian_bounded`); `hyper` is not read (no acting
    hyperparameter). `select_actions` (`BoxPopulationLearner`) adds the warm-up's uniform
    actions and draws eps."""
    del hyper
    lo, hi = self._lo, self._hi
    mean, log_std = continuous.split_gaussian(np.asarray(values, np.float32))
    u = mean + np.exp(log_std) * eps
    return np.clip(continuous.from_unit(np.tanh(u), lo, hi), lo, hi).astype(np.float32)

  # -- learning -------------------------------------------------------------------------
  def member_step(self, state: MemberState, transitions, probabilities, table_size,
                  hyper: MemberHyperparameters, active):
    """One member's SAC update (pure; `step` is its jitted vmap over the member axis).

    Args:
      state: the member's `MemberState`.
      transitions: `acme.types.Transition` batch [B, ...] (actions in environment units).
      probabilities, table_size: float32 [B] (the population signature; SAC samples
        uniformly and reads neither).
      hyper: the member's `MemberHyperparameters` (float32 scalars); the target entropy is
        `|A| * target_entropy_per_dimension` in float32 (`SACBuilder.target_entropy`
        computes it in float64: the same value for the default -1).
      active: bool scalar: False returns `state` unchanged (a member that owes no learner
        step this round).

    Returns:
      `(state, td, metrics)`: the new state, float32 [B] zeros (no priorities) and
      `sac.learning.sgd_step`'s float32 scalars (critic_loss, policy_loss, alpha_loss,
      alpha, entropy, critic_gradient_norm, policy_gradient_norm).
    """
    del probabilities, table_size
    c = self.config
    new, metrics = sac_learning.sgd_step(
        sac_learning.TrainingState(*state[:-1]), transitions, networks=self.networks,
        sample_key=state.sample_key,
        policy_optimizer=self._builder.optimizer(hyper.policy_learning_rate),
        critic_optimizer=self._builder.optimizer(hyper.critic_learning_rate),
        alpha_optimizer=self._builder.temperature_optimizer(hyper.temperature_learning_rate),
        discount=hyper.discount,
        target_entropy=self._action_size * hyper.target_entropy_per_dimension,
        target_update_period=c.target_update_period, target_update_tau=c.target_update_tau,
        params_transform=self._transform)
    new = population_lib.where_active(active, MemberState(*new, state.sample_key), state)
    return new, population_lib.no_priorities(transitions), metrics
