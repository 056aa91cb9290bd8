"""DQN's population learner: N members' training states on a leading member axis, updated
in ONE jitted, vmapped step (Flajolet et al. 2022, "Fast Population-Based Reinforcement
Learning on a Single Machine", section 3), with the mutable hyperparameters as arrays.

Each member's step is DQN's, the same function `DQNLearner` jits: `learning.DQNUpdate`
(double-Q n-step TD, Huber, importance-sampling weights under prioritized replay, a target
copy every `target_update_period` learner steps), with Adam after a global-norm clip and
the learning rate decayed as `DQNBuilder.make_optimizer` decays it. What differs from
`DQNLearner` is only where the per-member values live: learning rate, discount, Huber delta and the
importance-sampling exponent are float32 arrays [N] (`MemberHyperparameters`), so a
member's hyperparameters can change (PBT's exploit/explore) without recompiling.

    population = DQNPopulation(config, networks, environment_spec)
    state = population.init(jax.random.split(key, N))        # TrainingState, leaves [N, ...]
    hyper = population.hyperparameters(N)                    # MemberHyperparameters, [N] each
    state, td, metrics = population.step(state, transitions, probabilities, table_size,
                                         hyper, active)      # transitions leaves [N, B, ...]
"""
from __future__ import annotations

from typing import Any, Dict, Mapping, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from acme import specs

from actorq.agents.dqn import config as config_lib
from actorq.agents.dqn import learning
from actorq.agents.dqn import networks as networks_lib
from actorq.components import population as population_lib
from actorq.quantization import qat


class MemberHyperparameters(NamedTuple):
  """A member's mutable hyperparameters (float32 scalars; stacked: [N] each).

  learning_rate: Adam's step size at learner step 0 (decayed by the config's schedule).
  discount: gamma of the bootstrap (the adder's n-step returns use the member's gamma
    from when each item was written).
  huber_delta: threshold of the Huber TD loss.
  importance_sampling_exponent: beta at learner step 0 (annealed to 1), prioritized replay.
  epsilon_start, epsilon_end: the actors' epsilon-greedy schedule's ends.
  """
  learning_rate: Any
  discount: Any
  huber_delta: Any
  importance_sampling_exponent: Any
  epsilon_start: Any
  epsilon_end: Any


# The fields `--mutate` may name, with their search ranges (Jaderberg et al. 2017 perturb
# within and resample from them). Other config fields are fixed for the population.
HYPERPARAMETERS: Mapping[str, population_lib.Hyperparameter] = {
    "learning_rate": population_lib.learning_rate("Adam's learning rate at learner step 0"),
    "discount": population_lib.DISCOUNT,
    "huber_delta": population_lib.Hyperparameter(0.1, 10.0, log=True,
                                                 doc="Huber TD loss threshold"),
    "importance_sampling_exponent": population_lib.Hyperparameter(
        0.0, 1.0, doc="prioritized replay's beta at learner step 0"),
    "epsilon_start": population_lib.Hyperparameter(0.05, 1.0,
                                                   doc="exploration epsilon at actor step 0"),
    "epsilon_end": population_lib.Hyperparameter(0.0, 0.2,
                                                 doc="exploration epsilon after the decay"),
    "actor_precision": population_lib.ACTOR_PRECISION,
}


def _optimizer(config: config_lib.DQNConfig) -> optax.GradientTransformation:
  """`DQNBuilder.make_optimizer` without its learning rate (applied per member in `_step`):
  the global-norm clip, then Adam's normalised moments."""
  return optax.chain(optax.clip_by_global_norm(config.max_gradient_norm),
                     optax.scale_by_adam(eps=config.adam_eps))


def _learning_rate_fraction(config: config_lib.DQNConfig, steps):
  """The learning rate at learner step `steps` as a fraction of the one at step 0:
  `DQNBuilder.make_optimizer`'s linear decay to `final_learning_rate_fraction` over
  `learning_rate_decay_steps` (1 when there is none)."""
  if not config.learning_rate_decay_steps:
    return jnp.float32(1.0)
  return optax.linear_schedule(1.0, config.final_learning_rate_fraction,
                               config.learning_rate_decay_steps)(steps)


class DQNPopulation(population_lib.PopulationLearner):
  """N DQN learners stepped as one (see the module docstring); `policy_values` gives every
  member's Q-values float32 [N, B, A] (dueling-combined Q, what
  `builder.policy_outputs(...).to_values` makes of a runtime's outputs).

  Args:
    config: the population's shared config: everything but `MemberHyperparameters` is
      common to the members (network, batch size, replay, target period, prioritized).
    networks: `make_networks(spec, config.hidden_sizes, dueling=config.dueling)`.
    environment_spec: the task's spec (one observation initialises the networks).

  Raises:
    ValueError: `config` is not a `DQNConfig`.
  """
  CONFIG = config_lib.DQNConfig
  MEMBER_HYPERPARAMETERS = MemberHyperparameters
  HYPERPARAMETERS = HYPERPARAMETERS
  LOSS_METRICS = ("loss",)
  POLICY_NETWORK = "network"

  def __init__(self, config: config_lib.DQNConfig, networks: networks_lib.DQNNetworks,
               environment_spec: specs.EnvironmentSpec):
    super().__init__(config, networks)
    if config.td_operator != "q_learning":  # the member step below is (double) Q-learning
      raise ValueError(f"DQNConfig.td_operator={config.td_operator!r}: the population learner "
                       "trains with q_learning only; allowed: 'q_learning'")
    self._optimizer = _optimizer(config)
    self._update = learning.DQNUpdate(
        networks.network, config.target_update_period, config.double_q,
        (lambda p: qat.fake_quant_params(p, bits=config.qat_bits)) if config.qat_bits
        else None,
        learning.TDOperator.of_config(config))
    self._dummy = np.zeros(environment_spec.observations.shape,
                           environment_spec.observations.dtype)[None]

  # -- members ------------------------------------------------------------------------
  @staticmethod
  def constrain(values: Dict[str, Any]) -> Dict[str, Any]:
    """`values` (field -> value of one member) made a valid `DQNConfig` after an
    independent explore of each field: epsilon_end <= epsilon_start (the config's rule;
    epsilon_end is lowered)."""
    out = dict(values)
    out["epsilon_end"] = min(out["epsilon_end"], out["epsilon_start"])
    return out

  def init(self, keys: jax.Array) -> learning.TrainingState:
    """Member m's parameters from `network.init(keys[m], ...)` (as `DQNLearner` does with
    its key), target = online, fresh optimizer state, 0 steps; leaves [N, ...]."""
    def one(key):
      params = self.networks.network.init(key, self._dummy)
      return learning.TrainingState(params, params, self._optimizer.init(params),
                                    jnp.zeros((), jnp.int32))
    return jax.vmap(one)(keys)

  @staticmethod
  def policy_params(state: learning.TrainingState) -> Any:
    """The parameters the actors run (the online Q-network; leaves [N, ...] of a stacked
    state)."""
    return state.params

  # -- acting ---------------------------------------------------------------------------
  def select_actions(self, q_values: np.ndarray, actor_steps: np.ndarray,
                     hyper: MemberHyperparameters, rng: np.random.Generator,
                     explore: bool = True) -> np.ndarray:
    """int [N, B] actions from every member's Q-values [N, B, A]: greedy, or with
    `explore` epsilon-greedy (`actors.epsilon_greedy` per row) with member m's epsilon
    linear from its epsilon_start to its epsilon_end over the config's
    epsilon_decay_steps of ITS `actor_steps[m]` (`actors.linear_schedule`). Draws from
    `rng`: uniforms [N, B], then random actions [N, B] (every row, so the stream does not
    depend on epsilon)."""
    actions = q_values.argmax(-1)
    if not explore:
      return actions
    c = self.config
    start = np.asarray(hyper.epsilon_start, np.float64)
    end = np.asarray(hyper.epsilon_end, np.float64)
    frac = (np.minimum(np.asarray(actor_steps) / c.epsilon_decay_steps, 1.0)
            if c.epsilon_decay_steps > 0 else np.ones(len(start)))
    epsilon = (start + frac * (end - start))[:, None]
    draws = rng.random(actions.shape)
    random_actions = rng.integers(q_values.shape[-1], size=actions.shape)
    return np.where(draws < epsilon, random_actions, actions)

  # -- learning -------------------------------------------------------------------------
  def member_step(self, state: learning.TrainingState, transitions, probabilities,
                  table_size, hyper: MemberHyperparameters, active):
    """One member's DQN update (pure; `step` is its jitted vmap over the member axis).

    Args:
      state: the member's `TrainingState`.
      transitions: `acme.types.Transition` batch [B, ...].
      probabilities: float32 [B] sampling probabilities (`info.probability`; ignored
        without prioritized replay).
      table_size: float32 [B] items in the table when sampled (`info.table_size`).
      hyper: the member's `MemberHyperparameters` (float32 scalars).
      active: bool scalar: False returns `state` unchanged (a member that owes no learner
        step this round; its batch is not read).

    Returns:
      `(state, td, metrics)`: the new state, float32 [B] TD errors (0 when not active;
      new priorities are |td| + priority_epsilon) and a dict of float32 scalars (loss,
      gradient_norm, beta, learning_rate).
    """
    c = self.config
    if c.prioritized_replay:
      frac = jnp.minimum(state.steps / max(c.importance_sampling_annealing_steps, 1), 1.0)
      beta0 = hyper.importance_sampling_exponent
      beta = (beta0 + frac * (1.0 - beta0) if c.importance_sampling_annealing_steps > 0
              else jnp.float32(1.0))
      weights = learning.importance_sampling_weights(probabilities, table_size, beta)
    else:
      beta = jnp.float32(0.0)
      weights = jnp.ones(probabilities.shape, jnp.float32)
    learning_rate = hyper.learning_rate * _learning_rate_fraction(c, state.steps)

    def optimizer_update(grads, opt_state, params):
      updates, opt_state = self._optimizer.update(grads, opt_state, params)
      return jax.tree_util.tree_map(lambda u: -learning_rate * u, updates), opt_state

    new, out = self._update(state, transitions, weights, hyper.discount, hyper.huber_delta,
                            optimizer_update)
    new = population_lib.where_active(active, new, state)
    metrics = {"loss": out.loss, "gradient_norm": out.gradient_norm, "beta": beta,
               "learning_rate": learning_rate}
    return new, jnp.where(active, out.td, 0.0), metrics
