"""QR-DQN, composed outside the actorq package from its components.

Dabney, Rowland, Bellemare and Munos (2018), "Distributional Reinforcement Learning with
Quantile Regression" (AAAI; arXiv:1710.10044): the Q-network outputs N quantiles of the
return distribution per action, at the midpoints tau_i = (2i + 1) / 2N, and learns them
with the quantile Huber loss (eq. 10), `rlax.quantile_q_learning`. Actions are greedy
in the quantile MEANS, which are the Q-values.

What comes from actorq, unchanged:
  network    a `NetworkSpec` MLP with A * N outputs (`actorq.quantization.network_spec`):
             Haiku for the learner (`components.networks`), and whatever runtime the
             actors' precision names (fp32, fp16, bf16, int8 with per-channel scales)
  builder    `components.builders.TransitionReplayBuilder`: the Reverb transition table,
             the dataset, the n-step adder and a `FeedForwardActor` with its variable client
  learner    `components.learners.JaxLearner`: step, finite-loss check, counting, logging,
             save/restore (checkpoints, --resume), get_variables
  selectors  `components.actors.greedy` / `epsilon_greedy`, applied to the quantile means
Nothing in the package names this agent. From this folder:

    actorq train --agent qr_dqn_agent:QRDQNBuilder --env gym:CartPole-v1 --steps 30000
    actorq train --agent qr_dqn_agent:QRDQNBuilder --actor-precision int8 --launch local_mp

and `actorq eval|quantize|export --checkpoint RUN` read the run back through its run.json
(``"agent": "qr_dqn_agent:QRDQNBuilder"``). See docs/guides/compose-an-agent.md.
"""
from __future__ import annotations

import dataclasses
import functools
from typing import Any, Iterator, NamedTuple, Optional, Tuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
import rlax
from acme import specs

from actorq import core
from actorq.components import builders, learners
from actorq.components import config_checks as checks
from actorq.components import networks as networks_lib
from actorq.components.acting import actors
from actorq.quantization import network_spec as ns


@dataclasses.dataclass
class QRDQNConfig:
  """QR-DQN's settings. Units: actor steps are environment steps (summed over the actors
  of a distributed run); learner steps are gradient updates. Every field is checked at
  construction (`actorq.components.config_checks`)."""
  hidden_sizes: Tuple[int, ...] = checks.field((128, 128), ge=1)
  # N quantiles per action (the paper's Atari agent: 200; small control tasks need fewer).
  num_quantiles: int = checks.field(51, ge=1)
  # kappa of the quantile Huber loss (eq. 10; 0: the plain quantile loss, eq. 8).
  huber_kappa: float = checks.field(1.0, ge=0.0)
  learning_rate: float = checks.field(1e-3, gt=0.0)
  adam_eps: float = checks.field(0.01 / 32, gt=0.0)  # the paper's Adam epsilon
  max_gradient_norm: float = checks.field(10.0, gt=0.0)
  discount: float = checks.field(0.99, ge=0.0, le=1.0)
  n_step: int = checks.field(3, ge=1)
  batch_size: int = checks.field(64, ge=1)
  min_replay_size: int = checks.field(1_000, ge=1)        # transitions
  max_replay_size: int = checks.field(50_000, ge=1)       # transitions
  samples_per_insert: float = checks.field(16.0, gt=0.0)  # sampled per inserted transition
  target_update_period: int = checks.field(250, ge=1)     # learner steps
  epsilon_start: float = checks.field(1.0, ge=0.0, le=1.0)
  epsilon_end: float = checks.field(0.01, ge=0.0, le=1.0)
  epsilon_decay_steps: int = checks.field(10_000, ge=0)   # actor steps
  variable_update_period: int = checks.field(10, ge=1)    # actor steps between pulls
  actor_precision: str = checks.precision_field("fp32")
  evaluation_precision: Optional[str] = checks.precision_field(None)  # None: actors'
  replay_table_name: str = checks.field("priority_table", nonempty=True)

  RULES = (checks.Rule("need min_replay_size <= max_replay_size",
                       lambda c: c.min_replay_size <= c.max_replay_size),
           checks.Rule("need epsilon_end <= epsilon_start",
                       lambda c: c.epsilon_end <= c.epsilon_start))

  def __post_init__(self):
    checks.validate(self)


# ---------------------------------------------------------------------------------------
# Quantiles and the loss.


def quantile_midpoints(num_quantiles: int) -> np.ndarray:
  """tau_i = (2i + 1) / 2N, i = 0..N-1 (the paper's Lemma 2): float32 `[N]`."""
  return ((2 * np.arange(num_quantiles) + 1) / (2.0 * num_quantiles)).astype(np.float32)


def quantile_values(outputs, num_actions: int):
  """The network's outputs `[..., A * N]` (action-major) as quantiles `[..., A, N]`."""
  return outputs.reshape(outputs.shape[:-1] + (num_actions, -1))


def quantile_means(outputs, num_actions: int):
  """Q-values `[..., A]`: the mean over each action's N quantiles of outputs
  `[..., A * N]` (numpy or JAX arrays)."""
  return quantile_values(outputs, num_actions).mean(axis=-1)


def qr_loss(dist_q_tm1: jnp.ndarray, a_tm1: jnp.ndarray, r_t: jnp.ndarray,
            discount_t: jnp.ndarray, dist_q_t: jnp.ndarray, huber_kappa: float) -> jnp.ndarray:
  """The batch mean of QR-DQN's loss (eq. 10 with Algorithm 1's target):
  sum_i mean_j |tau_i - 1{u_ij < 0}| * L_kappa(u_ij), u_ij = T theta_j - theta_i(s, a),
  T theta_j = r + discount * theta_j(s', argmax_a' mean_j theta_j(s', a')) from the
  target network; L_kappa is rlax's Huber loss (0.5 u^2 inside kappa, not divided by
  kappa: the paper's form for kappa = 1), |u| when kappa = 0.

  Args:
    dist_q_tm1: float32 `[B, A, N]` online quantiles at s.
    a_tm1: int `[B]` actions taken.
    r_t: float32 `[B]` n-step returns.
    discount_t: float32 `[B]` bootstrap discounts (0 after a termination).
    dist_q_t: float32 `[B, A, N]` target-network quantiles at s'.
    huber_kappa: kappa >= 0.

  Returns:
    float32 scalar.
  """
  taus = jnp.asarray(quantile_midpoints(dist_q_tm1.shape[-1]))
  to_rlax = lambda d: jnp.swapaxes(d, -1, -2)  # rlax wants [N, A]
  per_item = jax.vmap(rlax.quantile_q_learning, in_axes=(0, None, 0, 0, 0, 0, 0, None))(
      to_rlax(dist_q_tm1), taus, a_tm1, r_t, discount_t, to_rlax(dist_q_t), to_rlax(dist_q_t),
      huber_kappa)
  return jnp.mean(per_item)


# ---------------------------------------------------------------------------------------
# Learner.


class TrainingState(NamedTuple):
  params: Any
  target_params: Any
  opt_state: Any
  steps: jnp.ndarray  # int32 scalar: learner steps taken


class QRDQNLearner(learners.JaxLearner):
  """Adam on `qr_loss`, target copied every `target_update_period` learner steps; serves
  `get_variables(["policy", "version"])` like every actorq learner (`JaxLearner`)."""

  def __init__(self, spec: ns.NetworkSpec, num_actions: int, iterator: Iterator[Any],
               random_key: jax.Array, config: QRDQNConfig, logger=None, counter=None):
    self._iterator = iterator
    self._init_bookkeeping(counter, logger)
    network = networks_lib.haiku_network(spec)
    optimizer = optax.chain(optax.clip_by_global_norm(config.max_gradient_norm),
                            optax.adam(config.learning_rate, eps=config.adam_eps))
    quantiles = lambda params, obs: quantile_values(network.apply(params, obs), num_actions)

    def loss_fn(params, target_params, t):
      return qr_loss(quantiles(params, t.observation), t.action.astype(jnp.int32), t.reward,
                     config.discount * t.discount, quantiles(target_params, t.next_observation),
                     config.huber_kappa)

    def sgd_step(state: TrainingState, transitions):
      loss, grads = jax.value_and_grad(loss_fn)(state.params, state.target_params, transitions)
      updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
      params = optax.apply_updates(state.params, updates)
      steps = state.steps + 1
      target = jax.lax.cond(steps % config.target_update_period == 0, lambda: params,
                            lambda: state.target_params)
      return TrainingState(params, target, opt_state, steps), {
          "loss": loss, "gradient_norm": optax.global_norm(grads)}

    self._sgd_step = learners.jit_with_packed_metrics(sgd_step)
    params = networks_lib.init_params(spec, random_key)
    self._state = TrainingState(params, params, optimizer.init(params),
                                jnp.zeros((), jnp.int32))


# ---------------------------------------------------------------------------------------
# Builder: the one class `actorq train --agent qr_dqn_agent:QRDQNBuilder` names.


@dataclasses.dataclass
class QRDQNNetworks:
  spec: ns.NetworkSpec  # what the actors run: obs [B, D] -> [B, A * N]
  num_actions: int


def over_means(selector: actors.Selector, num_actions: int) -> actors.Selector:
  """`selector` applied to the quantile means of an output row (the Q-values)."""

  def select(outputs: np.ndarray, rng: np.random.Generator, step: int):
    return selector(quantile_means(np.asarray(outputs), num_actions), rng, step)

  return select


class QRDQNBuilder(builders.TransitionReplayBuilder):
  """Networks, policies, declared outputs and learner; the replay table, dataset, n-step
  adder and actor are `TransitionReplayBuilder`'s."""
  config_class = QRDQNConfig

  def __init__(self, config: Optional[QRDQNConfig] = None):
    super().__init__(config or QRDQNConfig())

  def make_networks(self, environment_spec: specs.EnvironmentSpec) -> QRDQNNetworks:
    """Raises core.UnsupportedEnvironmentError: continuous actions or non-vector
    observations."""
    actions, obs = environment_spec.actions, environment_spec.observations
    if not isinstance(actions, specs.DiscreteArray) or len(obs.shape) != 1:
      raise core.UnsupportedEnvironmentError(
          f"QR-DQN (this example) needs discrete actions and vector observations, got "
          f"actions {type(actions).__name__} {actions.shape} and observations {obs.shape}")
    c = self.config
    spec = ns.mlp(obs.shape[0], c.hidden_sizes, actions.num_values * c.num_quantiles)
    return QRDQNNetworks(spec, int(actions.num_values))

  def make_policy(self, networks: QRDQNNetworks, environment_spec: specs.EnvironmentSpec,
                  evaluation: bool = False) -> core.ActorPolicy:
    """Greedy in the quantile means (evaluation, at `evaluation_precision`), else
    epsilon-greedy with epsilon decayed linearly over `epsilon_decay_steps` actor steps."""
    del environment_spec
    c = self.config
    if evaluation:
      return core.ActorPolicy(networks.spec, c.evaluation_precision or c.actor_precision,
                              over_means(actors.greedy, networks.num_actions), True)
    epsilon = actors.linear_schedule(c.epsilon_start, c.epsilon_end, c.epsilon_decay_steps)
    return core.ActorPolicy(networks.spec, c.actor_precision,
                            over_means(actors.epsilon_greedy(epsilon), networks.num_actions),
                            False)

  def policy_outputs(self, networks: QRDQNNetworks,
                     environment_spec: specs.EnvironmentSpec) -> core.PolicyOutputs:
    """Q-values after the mean over quantiles: `actorq quantize` compares softmax of the
    A means (not of the A * N quantiles), `actorq export` writes this rule."""
    del environment_spec
    a, n = networks.num_actions, self.config.num_quantiles
    return core.PolicyOutputs(
        "q_values", functools.partial(quantile_means, num_actions=a),
        f"argmax_a mean_j y[a * {n} + j] (y = {a} actions x {n} quantiles, action-major)")

  def make_learner(self, random_key: jax.Array, networks: QRDQNNetworks, dataset, logger_fn,
                   environment_spec: specs.EnvironmentSpec, replay_client=None,
                   counter=None) -> QRDQNLearner:
    del environment_spec, replay_client
    return QRDQNLearner(networks.spec, networks.num_actions, dataset, random_key, self.config,
                        logger=logger_fn("learner"), counter=counter)
