"""TD3's population learner: N members' training states on a leading member axis, updated
in ONE jitted, vmapped step (Flajolet et al. 2022, "Fast Population-Based Reinforcement
Learning on a Single Machine", section 3, which vmaps TD3 this way), with the mutable
hyperparameters as arrays.

Each member's step is `DPGLearner`'s with TD3's options: `dpg_common.learning.sgd_step`
(the same function `DPGLearner` jits) with the twin-critic loss (Fujimoto et al. 2018,
eq. 10), delayed policy and target updates (sec. 5.2) and target policy smoothing (eq.
14), each network's Adam after a global-norm clip (`ActorCriticBuilder.optimizer`).
What differs is only where the per-member values live: both learning rates, the
discount, the target smoothing noise's sigma and the exploration noise's sigma are
float32 arrays [N] (`MemberHyperparameters`), so PBT's exploit/explore changes them
without recompiling.

    population = TD3Population(config, networks, environment_spec)
    state = population.init(jax.random.split(key, N))        # MemberState, leaves [N, ...]
    hyper = population.hyperparameters(N)                    # MemberHyperparameters, [N] each
    state, td, metrics = population.step(state, transitions, probabilities, table_size,
                                         hyper, active)      # transitions leaves [N, B, ...]

Acting: `policy_values` gives every member's tanh outputs u [N, B, A] in one vmapped call
(an int8 member's come from its policy runtime instead, as for any precision: the launcher
decides); `select_actions` maps them to the action box with member m's Gaussian noise
(`continuous.gaussian_bounded`'s formula, its sigma per member) after the config's
`random_warmup_steps` uniform actions of each member (`continuous.uniform_warmup`).
"""
from __future__ import annotations

from typing import Any, Mapping, NamedTuple

import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np
import optax
from acme import specs

from actorq.agents.dpg_common import learning as dpg_learning
from actorq.agents.td3 import builder as builder_lib
from actorq.agents.td3 import config as config_lib
from actorq.agents.td3 import networks as networks_lib
from actorq.components import population as population_lib
from actorq.components.acting import continuous


class MemberHyperparameters(NamedTuple):
  """A member's mutable hyperparameters (float32 scalars; stacked: [N] each).

  policy_learning_rate, critic_learning_rate: the two Adams' step sizes.
  discount: gamma of the bootstrap (the adder's n-step returns use the member's gamma
    from when each item was written).
  target_noise_sigma: std of the target policy smoothing noise (units: half the action
    range; clipped to +-config.target_noise_clip).
  sigma: std of the actors' Gaussian exploration noise (units: half the action range).
  """
  policy_learning_rate: Any
  critic_learning_rate: Any
  discount: Any
  target_noise_sigma: Any
  sigma: Any


# The fields `--mutate` may name, with their search ranges (Jaderberg et al. 2017 perturb
# within and resample from them). Other config fields are fixed for the population.
HYPERPARAMETERS: Mapping[str, population_lib.Hyperparameter] = {
    "policy_learning_rate": population_lib.learning_rate("the policy's Adam learning rate"),
    "critic_learning_rate": population_lib.learning_rate("the critics' Adam learning rate"),
    "discount": population_lib.DISCOUNT,
    "target_noise_sigma": population_lib.Hyperparameter(
        0.0, 1.0, doc="target policy smoothing noise std (half action ranges)"),
    "sigma": population_lib.Hyperparameter(
        0.0, 1.0, doc="exploration noise std (half action ranges)"),
    "actor_precision": population_lib.ACTOR_PRECISION,
}


class MemberState(NamedTuple):
  """`dpg_common.learning.TrainingState`'s fields, then `noise_key`: the key of the
  member's target smoothing noise (`DPGLearner`'s `fold_in(init key, 1)`; an exploit
  copies it with the rest, so a copy draws its source's noise sequence from then on,
  on batches of its own replay)."""
  policy_params: hk.Params
  critic_params: hk.Params
  target_policy_params: hk.Params
  target_critic_params: hk.Params
  policy_opt_state: optax.OptState
  critic_opt_state: optax.OptState
  steps: jnp.ndarray
  noise_key: jax.Array


class TD3Population(population_lib.BoxPopulationLearner):
  """N TD3 learners stepped as one (see the module docstring); `policy_values` gives every
  member's tanh outputs u in [-1, 1], float32 [N, B, A].

  Args:
    config: the population's `TD3Config`: everything but `MemberHyperparameters` is
      common to the members (networks, batch size, replay, policy delay, targets).
    networks: `TD3Builder(config).make_networks(spec)`.
    environment_spec: the task's spec, as `BoxPopulationLearner` takes it.

  Raises:
    ValueError: `config` is not a `TD3Config`; `continuous.UnboundedActionSpecError`
      (a ValueError) for actions that are not a finite box.
  """
  CONFIG = config_lib.TD3Config
  MEMBER_HYPERPARAMETERS = MemberHyperparameters
  HYPERPARAMETERS = HYPERPARAMETERS
  LOSS_METRICS = ("critic_loss", "policy_loss")

  def __init__(self, config: config_lib.TD3Config, networks: networks_lib.DPGNetworks,
               environment_spec: specs.EnvironmentSpec):
    super().__init__(config, networks, environment_spec)
    builder = self._builder = builder_lib.TD3Builder(config)
    self._critic_loss, self._q_value = builder.critic_functions(networks)
    self._transform = builder.params_transform() or (lambda p: p)

  def init(self, keys: jax.Array) -> MemberState:
    """Member m's state as `DPGLearner` starts with `random_key = keys[m]`: policy and
    critic from `init_policy_and_critic`, targets = online, fresh Adam states, 0 steps,
    noise key `fold_in(keys[m], 1)`; leaves [N, ...]."""
    action_size = self._lo.shape[0]

    def one(key):
      policy, critic = dpg_learning.init_policy_and_critic(
          self.networks.policy, self.networks.critic, key, self._dummy, action_size)
      opt = self._builder.optimizer(1.0)
      return MemberState(policy, critic, policy, critic, opt.init(policy), opt.init(critic),
                         jnp.zeros((), jnp.int32), jax.random.fold_in(key, 1))
    return jax.vmap(one)(keys)

  @staticmethod
  def policy_params(state: MemberState) -> Any:
    """The policy parameters the actors run (leaves [N, ...] of a stacked state)."""
    return state.policy_params

  # -- acting ---------------------------------------------------------------------------
  def greedy_actions(self, values: np.ndarray) -> np.ndarray:
    """float32 [N, B, A]: `clip(from_unit(u), minimum, maximum)` of the members' outputs u
    [N, B, A] (`continuous.deterministic_bounded`)."""
    lo, hi = self._lo, self._hi
    u = np.asarray(values, np.float32)
    return np.clip(continuous.from_unit(u, lo, hi), lo, hi).astype(np.float32)

  def explore_actions(self, values: np.ndarray, hyper: MemberHyperparameters,
                      eps: np.ndarray) -> np.ndarray:
    """float32 [N, B, A]: member m's `clip(from_unit(u) + sigma_m * (maximum - minimum) / 2
    * eps, minimum, maximum)` (`continuous.gaussian_bounded` with its own sigma) of the
    outputs u [N, B, A] (`select_actions`, `BoxPopulationLearner`, adds the warm-up's
    uniform actions and draws eps)."""
    lo, hi = self._lo, self._hi
    u = np.asarray(values, np.float32)
    sigma = np.asarray(hyper.sigma, np.float32)[:, None, None]
    noisy = continuous.from_unit(u, lo, hi) + sigma * (0.5 * (hi - lo)) * eps
    return np.clip(noisy, lo, hi).astype(np.float32)

  # -- learning -------------------------------------------------------------------------
  def member_step(self, state: MemberState, transitions, probabilities, table_size,
                  hyper: MemberHyperparameters, active):
    """One member's TD3 update (pure; `step` is its jitted vmap over the member axis).

    Args:
      state: the member's `MemberState`.
      transitions: `acme.types.Transition` batch [B, ...] (actions in environment units).
      probabilities, table_size: float32 [B] (the population signature; TD3 samples
        uniformly and reads neither).
      hyper: the member's `MemberHyperparameters` (float32 scalars).
      active: bool scalar: False returns `state` unchanged (a member that owes no learner
        step this round).

    Returns:
      `(state, td, metrics)`: the new state, float32 [B] zeros (no priorities) and
      `sgd_step`'s float32 scalars (critic_loss, policy_loss, critic_gradient_norm,
      policy_gradient_norm).
    """
    del probabilities, table_size
    c = self.config
    new, metrics = dpg_learning.sgd_step(
        dpg_learning.TrainingState(*state[:-1]), transitions, networks=self.networks,
        policy_optimizer=self._builder.optimizer(hyper.policy_learning_rate),
        critic_optimizer=self._builder.optimizer(hyper.critic_learning_rate),
        discount=hyper.discount, critic_loss=self._critic_loss, q_value=self._q_value,
        target_update_period=c.target_update_period, target_update_tau=c.target_update_tau,
        dqda_clipping=c.dqda_clipping, params_transform=self._transform,
        policy_delay=c.policy_delay,
        target_policy_noise=(hyper.target_noise_sigma, c.target_noise_clip),
        preactivation_penalty=c.preactivation_penalty, noise_key=state.noise_key)
    new = population_lib.where_active(active, MemberState(*new, state.noise_key), state)
    return new, population_lib.no_priorities(transitions), metrics
