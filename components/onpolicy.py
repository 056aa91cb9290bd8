"""Shared on-policy machinery for PPO, A2C and IMPALA.

Data path (one builder for every launch mode):

    actor (policy runtime, any precision) -> stochastic selector, extras = behaviour
    log-prob (+ logits / raw action) -> acme `SequenceAdder` (rollouts of T transitions,
    T + 1 steps, consecutive rollouts overlap by one step for the bootstrap value, and
    they run on across episode ends) -> Reverb *queue* (each rollout is consumed once,
    in order; a full queue blocks the actors: IMPALA's back-pressure) -> dataset of
    `[B, T + 1]` rollouts -> learner.

Acme step layout. Step `t` of a rollout holds `(observation o_t, action a_t, reward
r_t, discount d_t, start_of_episode, extras_t)`, where `r_t`, `d_t` follow `a_t`. When
an episode ends, acme appends one *terminal step* `(o_T, 0, 0, 0, extras 0)`; with
`EndBehavior.CONTINUE` the next step is the next episode's first. So transition `t`
(`o_t -> o_{t+1}`) is real iff step `t + 1` does not start an episode; the terminal
step's own transition (into the next episode) is masked out (`transition_mask`), and
traces (GAE, V-trace) are cut there. A time-limit end keeps `d = 1` on the last real
transition, so it bootstraps from `V(o_T)`.

Policy heads (what the actors' `NetworkSpec` outputs, float32):
  * discrete, A actions: `logits[A]`;
  * continuous, A dims: `[mean[A], log_std[A]]` (`2A` outputs), the Gaussian's
    log-std clipped to [LOG_STD_MIN, LOG_STD_MAX]. Sampled actions are clipped to the
    action bounds before they reach the environment; the unclipped sample is kept as
    extras `raw_action` so the learner evaluates the density where it was sampled.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Dict, Iterator, List, NamedTuple, Optional, Sequence, Tuple

import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np
import optax
import reverb
from acme import core, specs
from acme.adders import base as adders_base
from acme.adders import reverb as adders_reverb
from acme.utils import counting, loggers

from actorq.components import actors, learners, replay
from actorq.components import networks as networks_lib
from actorq.components import variable_client as vc
from actorq.quantization import network_spec as ns

LOG_STD_MIN = -5.0
LOG_STD_MAX = 2.0
_LOG_2PI = float(np.log(2.0 * np.pi))


class UnsupportedEnvironmentError(ValueError):
  """The agent cannot act in this environment (e.g. image observations with an MLP)."""


# ---------------------------------------------------------------------------------
# Policy heads: the same distribution on the actor (numpy) and the learner (jax).
# ---------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class PolicyHead:
  """Which distribution a policy network's outputs parameterise.

  Attributes:
    discrete: categorical over `num_actions` (True) or diagonal Gaussian (False).
    action_size: A: number of actions (discrete) or action dimensions (continuous).
    minimum, maximum: float32 `[A]` action bounds (continuous only).
    action_dtype: the environment's action dtype.
  """
  discrete: bool
  action_size: int
  minimum: Optional[np.ndarray] = None
  maximum: Optional[np.ndarray] = None
  action_dtype: Any = np.int32

  @property
  def output_size(self) -> int:
    """Policy network outputs: A logits, or 2A (mean, log-std)."""
    return self.action_size if self.discrete else 2 * self.action_size


def policy_head(environment_spec: specs.EnvironmentSpec) -> PolicyHead:
  """The head for an environment's action spec.

  Raises:
    UnsupportedEnvironmentError: for an action spec that is neither a `DiscreteArray`
      nor a 1-d `BoundedArray`.
  """
  a = environment_spec.actions
  if isinstance(a, specs.DiscreteArray):
    return PolicyHead(True, int(a.num_values), action_dtype=np.dtype(a.dtype))
  if isinstance(a, specs.BoundedArray) and len(a.shape) == 1:
    low = np.broadcast_to(np.asarray(a.minimum, np.float32), a.shape).copy()
    high = np.broadcast_to(np.asarray(a.maximum, np.float32), a.shape).copy()
    return PolicyHead(False, int(a.shape[0]), low, high, np.dtype(a.dtype))
  raise UnsupportedEnvironmentError(
      f"action spec {a!r} is not supported: on-policy agents need discrete actions "
      "(DiscreteArray) or a 1-d bounded continuous action (BoundedArray [A])")


def extras_spec(head: PolicyHead) -> Dict[str, specs.Array]:
  """The actor's extras (table signature, case E3).

  Discrete: `{"logits": float32[A], "log_prob": float32[]}`;
  continuous: `{"log_prob": float32[], "raw_action": float32[A]}`.
  """
  if head.discrete:
    return {"logits": specs.Array((head.action_size,), np.float32),
            "log_prob": specs.Array((), np.float32)}
  return {"log_prob": specs.Array((), np.float32),
          "raw_action": specs.Array((head.action_size,), np.float32)}


def _np_log_softmax(logits: np.ndarray) -> np.ndarray:
  z = logits - np.max(logits)
  return z - np.log(np.sum(np.exp(z)))


def categorical_selector(head: PolicyHead, evaluation: bool = False) -> actors.Selector:
  """Samples `a ~ softmax(logits)` (evaluation: argmax). Extras: logits, log-prob."""

  def select(outputs: np.ndarray, rng: np.random.Generator, step: int):
    del step
    logits = np.asarray(outputs, np.float32)
    if evaluation:
      return np.asarray(np.argmax(logits), head.action_dtype), ()
    log_p = _np_log_softmax(logits.astype(np.float64))
    action = int(np.argmax(log_p - np.log(-np.log(rng.random(log_p.shape)))))  # Gumbel-max
    return (np.asarray(action, head.action_dtype),
            {"logits": logits, "log_prob": np.float32(log_p[action])})

  return select


def split_gaussian(outputs, xp=np):
  """`[..., 2A] -> (mean [..., A], log_std [..., A])`, log-std clipped."""
  a = outputs.shape[-1] // 2
  return outputs[..., :a], xp.clip(outputs[..., a:], LOG_STD_MIN, LOG_STD_MAX)


def gaussian_selector(head: PolicyHead, evaluation: bool = False) -> actors.Selector:
  """Samples `u ~ N(mean, std^2)`, acts with `clip(u, min, max)` (evaluation: the
  clipped mean). Extras: log-prob of `u` and `raw_action = u`. Actions are float32 and
  always inside the bounds (case E4)."""

  def select(outputs: np.ndarray, rng: np.random.Generator, step: int):
    del step
    mean, log_std = split_gaussian(np.asarray(outputs, np.float32))
    if evaluation:
      return np.clip(mean, head.minimum, head.maximum).astype(np.float32), ()
    noise = rng.standard_normal(mean.shape).astype(np.float32)
    raw = (mean + np.exp(log_std) * noise).astype(np.float32)
    log_prob = np.sum(-0.5 * noise.astype(np.float64) ** 2 - log_std - 0.5 * _LOG_2PI)
    action = np.clip(raw, head.minimum, head.maximum).astype(np.float32)
    return action, {"log_prob": np.float32(log_prob), "raw_action": raw}

  return select


def make_selector(head: PolicyHead, evaluation: bool = False) -> actors.Selector:
  return (categorical_selector if head.discrete else gaussian_selector)(head, evaluation)


def log_prob(head: PolicyHead, outputs: jnp.ndarray, actions: jnp.ndarray) -> jnp.ndarray:
  """log pi(a|s) of the learner's policy outputs.

  Args:
    outputs: float32 `[..., A]` logits or `[..., 2A]` (mean, log-std).
    actions: int `[...]` (discrete) or float32 `[..., A]` raw (unclipped) samples.

  Returns:
    float32 `[...]`.
  """
  if head.discrete:
    log_p = jax.nn.log_softmax(outputs)
    return jnp.take_along_axis(log_p, actions.astype(jnp.int32)[..., None], axis=-1)[..., 0]
  mean, log_std = split_gaussian(outputs, jnp)
  z = (actions - mean) * jnp.exp(-log_std)
  return jnp.sum(-0.5 * z ** 2 - log_std - 0.5 * _LOG_2PI, axis=-1)


def entropy(head: PolicyHead, outputs: jnp.ndarray) -> jnp.ndarray:
  """Entropy (nats) of the policy, float32 `[...]`."""
  if head.discrete:
    log_p = jax.nn.log_softmax(outputs)
    return -jnp.sum(jnp.exp(log_p) * log_p, axis=-1)
  _, log_std = split_gaussian(outputs, jnp)
  return jnp.sum(log_std + 0.5 * (_LOG_2PI + 1.0), axis=-1)


def behaviour_actions(head: PolicyHead, trajectory) -> jnp.ndarray:
  """The actions whose density the behaviour log-prob is of (raw samples if continuous)."""
  return trajectory.action if head.discrete else trajectory.extras["raw_action"]


# ---------------------------------------------------------------------------------
# Networks: a NetworkSpec policy (runs on the actors at any precision) and a
# learner-only Haiku value MLP.
# ---------------------------------------------------------------------------------


@dataclasses.dataclass
class ActorCriticNetworks:
  """`spec`/`policy`: observation `[B, D]` -> float32 `[B, head.output_size]`;
  `value`: observation `[B, D]` -> float32 `[B]`."""
  spec: ns.NetworkSpec
  head: PolicyHead
  policy: hk.Transformed
  value: hk.Transformed
  policy_head_scale: float = 0.01
  state_independent_log_std: bool = False
  initial_log_std: float = 0.0

  def init(self, key: jax.Array, dummy_observation: np.ndarray) -> Dict[str, hk.Params]:
    """`{"policy": {layer: {w, b}}, "value": ...}`; the policy's last layer is scaled
    by `policy_head_scale` (a near-uniform / unit-ish initial policy, as in PPO
    implementations' 0.01-gain output layer).

    With `state_independent_log_std` (continuous heads only), the output layer's
    log-std columns start at zero weights and bias `initial_log_std`, and
    `mask_gradients` keeps those weights at zero: the log-std is then the bias alone,
    a free parameter vector as in PPO's continuous-control setup (Schulman et al.
    2017, sec. 6.1), while the actors still run one plain `NetworkSpec` MLP.
    """
    kp, kv = jax.random.split(key)
    obs = jnp.asarray(dummy_observation)[None]
    policy = self.policy.init(kp, obs)
    last = self.spec.layers[-1].name
    policy = {k: dict(v) for k, v in policy.items()}
    policy[last]["w"] = policy[last]["w"] * self.policy_head_scale
    if self._log_std_parameter:
      a = self.head.action_size
      policy[last]["w"] = policy[last]["w"].at[:, a:].set(0.0)
      policy[last]["b"] = policy[last]["b"].at[a:].set(self.initial_log_std)
    return {"policy": policy, "value": self.value.init(kv, obs)}

  @property
  def _log_std_parameter(self) -> bool:
    return self.state_independent_log_std and not self.head.discrete

  def mask_gradients(self, grads: Dict[str, hk.Params]) -> Dict[str, hk.Params]:
    """Zeroes the gradients of the output layer's log-std weights when the log-std is
    state-independent (so those weights stay at their zero init); else `grads` as is."""
    if not self._log_std_parameter:
      return grads
    last = self.spec.layers[-1].name
    a = self.head.action_size
    policy = {k: dict(v) for k, v in grads["policy"].items()}
    policy[last]["w"] = policy[last]["w"].at[:, a:].set(0.0)
    return {**grads, "policy": policy}


def make_actor_critic_networks(environment_spec: specs.EnvironmentSpec,
                               policy_hidden: Sequence[int] = (64, 64),
                               value_hidden: Sequence[int] = (64, 64),
                               activation: str = "tanh",
                               state_independent_log_std: bool = False,
                               initial_log_std: float = 0.0) -> ActorCriticNetworks:
  """MLP policy (NetworkSpec) and value networks for vector observations.

  `state_independent_log_std` / `initial_log_std`: see `ActorCriticNetworks.init`
  (continuous heads; ignored for discrete ones).

  Raises:
    UnsupportedEnvironmentError: for non-vector observations or an unsupported action spec.
  """
  head = policy_head(environment_spec)
  obs_shape = tuple(environment_spec.observations.shape)
  if len(obs_shape) != 1:
    raise UnsupportedEnvironmentError(
        f"observation shape {obs_shape} is not supported by the on-policy MLP agents: "
        "use a vector observation [D]")
  spec = ns.mlp(obs_shape[0], policy_hidden, head.output_size, activation=activation)
  value_hidden = tuple(int(h) for h in value_hidden)
  act = jnp.tanh if activation == "tanh" else jax.nn.relu

  def value_fn(observation):
    x = observation.astype(jnp.float32)
    for i, h in enumerate(value_hidden):
      x = act(hk.Linear(h, name=f"value_{i}")(x))
    return hk.Linear(1, name=f"value_{len(value_hidden)}")(x)[..., 0]

  return ActorCriticNetworks(spec, head, networks_lib.haiku_network(spec),
                             hk.without_apply_rng(hk.transform(value_fn)),
                             state_independent_log_std=bool(state_independent_log_std),
                             initial_log_std=float(initial_log_std))


# ---------------------------------------------------------------------------------
# Rollouts: the step layout -> transitions, masks and minibatches.
# ---------------------------------------------------------------------------------


def transition_mask(start_of_episode: jnp.ndarray) -> jnp.ndarray:
  """float32 `[..., T]`: 1 where transition t (`o_t -> o_{t+1}`) is real, 0 where step
  t is acme's terminal step (step t + 1 starts an episode). Input: bool `[..., T + 1]`."""
  return 1.0 - start_of_episode[..., 1:].astype(jnp.float32)


def trace_lambda(lambda_: float, mask: jnp.ndarray) -> jnp.ndarray:
  """Per-step lambda `[T]` that cuts traces before a masked (terminal) step: the
  advantage / V-trace error of step t must not absorb that of step t + 1 when t + 1
  is the terminal step of an episode (its own `d = 0` already stops the rest)."""
  next_mask = jnp.concatenate([mask[1:], jnp.ones_like(mask[:1])])
  return lambda_ * next_mask


def masked_mean(x: jnp.ndarray, weights: jnp.ndarray) -> jnp.ndarray:
  """sum(w x) / max(sum(w), 1): finite for all-zero weights."""
  return jnp.sum(x * weights) / jnp.maximum(jnp.sum(weights), 1.0)


def normalize_advantages(adv: jnp.ndarray, weights: jnp.ndarray, eps: float = 1e-8) -> jnp.ndarray:
  """(A - mean) / (std + eps) over the items with weight > 0 (case L1).

  With one item, or all-equal advantages, the result is 0 (not NaN, and not float32
  rounding noise blown up by 1 / eps): a spread std <= 1e-6 * max(1, |mean|) counts as
  none. The statistics are under `stop_gradient`, so no 0/0 reaches the gradients.
  """
  adv = jax.lax.stop_gradient(adv)
  mean = masked_mean(adv, weights)
  std = jnp.sqrt(masked_mean(jnp.square(adv - mean), weights))
  spread = std > 1e-6 * jnp.maximum(1.0, jnp.abs(mean))
  return jnp.where(spread, (adv - mean) / (std + eps), 0.0)


def minibatch_indices(key: jax.Array, num_items: int, minibatch_size: int
                      ) -> Tuple[jnp.ndarray, jnp.ndarray]:
  """A random split of `num_items` into minibatches of `minibatch_size`; the last one
  holds the remainder and is padded (weight 0).

  Returns:
    int32 `[K, M]` indices and float32 `[K, M]` weights (1 real, 0 padding), with
    `K = ceil(num_items / M)` (static).

  Raises:
    ValueError: for a non-positive size.
  """
  if num_items < 1 or minibatch_size < 1:
    raise ValueError(f"num_items and minibatch_size must be >= 1, got {num_items}, {minibatch_size}")
  m = min(minibatch_size, num_items)
  k = -(-num_items // m)
  perm = jax.random.permutation(key, num_items)
  pad = k * m - num_items
  idx = jnp.concatenate([perm, jnp.zeros((pad,), perm.dtype)]).reshape(k, m)
  w = jnp.concatenate([jnp.ones((num_items,), jnp.float32), jnp.zeros((pad,), jnp.float32)])
  return idx.astype(jnp.int32), w.reshape(k, m)


# ---------------------------------------------------------------------------------
# Replay: a queue of rollouts and the sequence adder.
# ---------------------------------------------------------------------------------


def rollout_queue(name: str, environment_spec: specs.EnvironmentSpec, extras: Any,
                  rollout_length: int, max_size: int) -> reverb.Table:
  """A Reverb queue of rollouts of `rollout_length + 1` steps whose signature includes
  the actor's extras (case E3). Items are sampled once, oldest first; a full queue
  blocks inserts (back-pressure on actors)."""
  signature = adders_reverb.SequenceAdder.signature(environment_spec, extras,
                                                    sequence_length=rollout_length + 1)
  return reverb.Table.queue(name=name, max_size=int(max_size), signature=signature)


class CountingAdder(adders_base.Adder):
  """Wraps the rollout adder and counts the rollouts it has written.

  With `EndBehavior.CONTINUE`, `sequence_length = T + 1` and `period = T`, acme writes
  a rollout when its stored step count s reaches T + 1, 2T + 1, ...; every action is
  one step and every episode end one more (the terminal step).
  """

  def __init__(self, adder: adders_base.Adder, rollout_length: int):
    self._adder = adder
    self._t = int(rollout_length)
    self.stored_steps = 0

  @property
  def items_written(self) -> int:
    return 0 if self.stored_steps < self._t + 1 else (self.stored_steps - 1) // self._t

  def add_first(self, timestep):
    self._adder.add_first(timestep)

  def add(self, action, next_timestep, extras=()):
    self._adder.add(action, next_timestep, extras)
    self.stored_steps += 2 if next_timestep.last() else 1

  def reset(self):
    self._adder.reset()

  def close(self) -> None:
    self._adder.close()


def make_rollout_adder(client: reverb.Client, table: str, environment_spec: specs.EnvironmentSpec,
                       extras: Any, rollout_length: int) -> CountingAdder:
  """acme's `SequenceAdder` writing `[T + 1]`-step rollouts every T steps across
  episode ends, behind spec validation (case E3) and an item counter.

  Each rollout is flushed when it is created (`max_in_flight_items=0`): a learner that
  is owed a rollout can sample it at once, and a full queue blocks the actor there.
  """
  adder = adders_reverb.SequenceAdder(
      client, sequence_length=rollout_length + 1, period=rollout_length,
      priority_fns={table: None}, max_in_flight_items=0,
      end_of_episode_behavior=adders_reverb.EndBehavior.CONTINUE)
  return CountingAdder(replay.ValidatingAdder(adder, environment_spec, extras), rollout_length)


class RolloutIterator:
  """Batches of `batch_size` rollouts from a queue, as numpy `reverb.ReplaySample`s with
  leading dim B.

  Rollouts are read one at a time by a single reader (insertion order) and stacked here,
  not by `Dataset.batch`: a reader whose rate-limiter timeout expires while the queue is
  empty (normal between learner steps, e.g. during an evaluation) would otherwise drop
  the rollouts of a partial batch it already took off the queue. A reader that timed out
  in the background is replaced once; a wait longer than `timeout_ms` *after* the
  request raises (case R1).

  Raises (from `next`):
    replay.ReplayTimeoutError: no rollout within the timeout, or the server is gone.
  """

  def __init__(self, server_address: str, table: str, batch_size: int,
               timeout_ms: int = replay.DEFAULT_TIMEOUT_MS):
    self._address, self._table = server_address, table
    self._batch_size = int(batch_size)
    self._timeout_ms = int(timeout_ms)
    self._reader = None
    self._pending: list = []

  def _new_reader(self):
    ds = reverb.TrajectoryDataset.from_table_signature(
        server_address=self._address, table=self._table, max_in_flight_samples_per_worker=1,
        rate_limiter_timeout_ms=self._timeout_ms)
    return replay.numpy_iterator(ds)

  def _next_item(self):
    for attempt in (0, 1):
      if self._reader is None:
        self._reader = self._new_reader()
      try:
        return next(self._reader)
      except replay.ReplayTimeoutError:
        self._reader = None
        if attempt == 1:
          raise

  def __iter__(self):
    return self

  def __next__(self) -> reverb.ReplaySample:
    while len(self._pending) < self._batch_size:
      self._pending.append(self._next_item())
    items, self._pending = self._pending, []
    return jax.tree_util.tree_map(lambda *x: np.stack(x), *items)


# ---------------------------------------------------------------------------------
# Builder and learner scaffolding shared by the three agents.
# ---------------------------------------------------------------------------------


@dataclasses.dataclass
class OnPolicyPolicy:
  """What an actor needs: the network spec, a precision and a stochastic/greedy selector."""
  spec: ns.NetworkSpec
  precision: str
  selector: actors.Selector
  evaluation: bool


def rollout_forward(networks: "ActorCriticNetworks", params, traj):
  """The learner-side forward pass over a batch of rollouts `[B, T + 1]`.

  Returns:
    (policy outputs `[B, T, out]`, values `[B, T + 1]`, behaviour actions `[B, T, ...]`,
    transition mask `[B, T]`).
  """
  outputs = networks.policy.apply(params["policy"], traj.observation[:, :-1])
  values = networks.value.apply(params["value"], traj.observation)
  actions = behaviour_actions(networks.head, traj)[:, :-1]
  return outputs, values, actions, transition_mask(traj.start_of_episode)


def rollout_loss_update(networks: "ActorCriticNetworks", optimizer: optax.GradientTransformation,
                        discount: float, per_rollout_loss):
  """`update(state, traj) -> (state, metrics)` for a loss defined per rollout.

  `per_rollout_loss(outputs [T, out], values [T + 1], actions [T, ...], r_t [T],
  discount_t [T], mask [T], extras {name: [T, ...]}) -> (loss, metrics)` is vmapped over
  the batch of rollouts `[B, T + 1]` (r_t and discount_t follow a_t; discount_t is
  `discount` times the environment's; extras are the actors' per-step extras, e.g. the
  behaviour log-prob); loss and metrics are averaged over the batch, then one optimizer
  step is taken (`gradient_update`).
  """

  def loss_fn(params, traj):
    outputs, values, actions, mask = rollout_forward(networks, params, traj)
    extras = jax.tree_util.tree_map(lambda x: x[:, :-1], traj.extras)
    losses, metrics = jax.vmap(per_rollout_loss)(
        outputs, values, actions, traj.reward[:, :-1], discount * traj.discount[:, :-1],
        mask, extras)
    return jnp.mean(losses), jax.tree_util.tree_map(jnp.mean, metrics)

  return gradient_update(loss_fn, optimizer)


def gradient_update(loss_fn, optimizer: optax.GradientTransformation):
  """`update(state, traj) -> (state, metrics)`: one optimizer step on
  `loss_fn(params, traj) -> (loss, metrics)`."""

  def update(state: "TrainingState", traj):
    (loss, metrics), grads = jax.value_and_grad(loss_fn, has_aux=True)(state.params, traj)
    updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
    params = optax.apply_updates(state.params, updates)
    return TrainingState(params, opt_state, state.key, state.steps + 1), {"loss": loss, **metrics}

  return update


def learning_rate_schedule(config, updates_per_learner_step: int = 1):
  """The learning rate per optimizer update of an on-policy learner.

  Constant `config.learning_rate`, or, with `config.learning_rate_decay_steps` = N actor
  steps, linear from `learning_rate` to 0 over the updates of the first N actor steps:
  N / (batch_size * rollout_length) learner steps of `updates_per_learner_step` updates
  each (episode ends add terminal steps, so the decay ends slightly before N actor
  steps). PPO anneals it so over training (Schulman et al. 2017, sec. 6.1).
  """
  if config.learning_rate_decay_steps is None:
    return config.learning_rate
  learner_steps = max(1, config.learning_rate_decay_steps
                      // (config.batch_size * config.rollout_length))
  return optax.linear_schedule(config.learning_rate, 0.0,
                               learner_steps * int(updates_per_learner_step))


def make_optimizer(config, updates_per_learner_step: int = 1) -> optax.GradientTransformation:
  """Adam with gradient-norm clipping applied to the policy and value nets separately
  (the value gradients, in return units, would otherwise swamp the policy's); the
  learning rate follows `learning_rate_schedule`."""
  def one():
    return optax.chain(optax.clip_by_global_norm(config.max_gradient_norm),
                       optax.adam(learning_rate_schedule(config, updates_per_learner_step),
                                  eps=config.adam_eps))
  return optax.multi_transform({"policy": one(), "value": one()},
                               {"policy": "policy", "value": "value"})


class OnPolicyBuilder:
  """Acme's builder methods for a rollout-queue agent.

  A subclass names its agent's modules as class attributes:
    networks_lib: has `make_networks(environment_spec, config) -> ActorCriticNetworks`;
    learning_lib: has `make_optimizer(config)` and `make_update(networks, optimizer, config)`
      (the pure, jitted update `OnPolicyLearner` runs).
  The config needs `rollout_length`, `batch_size` (rollouts per learner step),
  `max_queue_size`, `replay_table_name`, `variable_update_period`, `actor_precision`,
  `evaluation_precision`.
  """
  networks_lib: Any = None
  learning_lib: Any = None

  def __init__(self, config):
    self.config = config
    self._adders: List[CountingAdder] = []

  # --- what the single-process loop asks -------------------------------------------
  def min_replay_size(self) -> int:
    return 0

  def replay_table_name(self) -> str:
    return self.config.replay_table_name

  def learner_steps_owed(self, actor_steps_since_start: int) -> int:
    """One learner step per `batch_size` rollouts *written* by this builder's adders.

    On-policy rollouts are consumed once, so the count is taken from the adders
    (rollouts written: (actor steps + episode ends) per T, see `CountingAdder`) rather
    than from the actor steps alone, which would let episode ends pile rollouts up in
    the queue (stale data) or, rounded the other way, wait for a rollout never written.
    """
    if not self._adders:
      # No adder in this process (e.g. the distributed launcher converting
      # `--eval-every` to learner steps): the nominal rate, T * batch_size actor steps
      # per learner step (episode ends add terminal steps, so the real rate is a bit higher).
      c = self.config
      return int(actor_steps_since_start) // (c.rollout_length * c.batch_size)
    return sum(a.items_written for a in self._adders) // self.config.batch_size

  # --- Acme's builder contract ------------------------------------------------------
  def make_networks(self, environment_spec: specs.EnvironmentSpec) -> ActorCriticNetworks:
    return self.networks_lib.make_networks(environment_spec, self.config)

  def make_learner(self, random_key: jax.Array, networks: ActorCriticNetworks,
                   dataset: Iterator[reverb.ReplaySample], logger_fn,
                   environment_spec: specs.EnvironmentSpec,
                   replay_client: Optional[reverb.Client] = None,
                   counter=None) -> "OnPolicyLearner":
    del replay_client
    key_init, key_learn = jax.random.split(random_key)
    dummy = np.zeros(environment_spec.observations.shape, np.float32)
    params = networks.init(key_init, dummy)
    optimizer = self.learning_lib.make_optimizer(self.config)
    update = self.learning_lib.make_update(networks, optimizer, self.config)
    return OnPolicyLearner(update, params, optimizer, dataset, key_learn,
                           logger=logger_fn("learner"), counter=counter)

  def make_policy(self, networks: ActorCriticNetworks, environment_spec: specs.EnvironmentSpec,
                  evaluation: bool = False) -> OnPolicyPolicy:
    del environment_spec
    c = self.config
    precision = (c.evaluation_precision or c.actor_precision) if evaluation else c.actor_precision
    return OnPolicyPolicy(networks.spec, precision, make_selector(networks.head, evaluation),
                          evaluation)

  def make_replay_tables(self, environment_spec: specs.EnvironmentSpec,
                         policy: Optional[OnPolicyPolicy] = None,
                         rate_limited: bool = True) -> List[reverb.Table]:
    """The rollout queue. `rate_limited` (the distributed launcher's argument) changes
    nothing: a queue is always rate-limited (a full queue blocks the actors)."""
    del policy, rate_limited
    c = self.config
    head = policy_head(environment_spec)
    return [rollout_queue(c.replay_table_name, environment_spec, extras_spec(head),
                          c.rollout_length, c.max_queue_size)]

  def make_dataset_iterator(self, replay_client: reverb.Client) -> Iterator[reverb.ReplaySample]:
    return RolloutIterator(replay_client.server_address, self.config.replay_table_name,
                           self.config.batch_size)

  def make_adder(self, replay_client: reverb.Client, environment_spec: specs.EnvironmentSpec,
                 policy: Optional[OnPolicyPolicy] = None) -> CountingAdder:
    del policy
    head = policy_head(environment_spec)
    adder = make_rollout_adder(replay_client, self.config.replay_table_name, environment_spec,
                               extras_spec(head), self.config.rollout_length)
    self._adders.append(adder)
    return adder

  def make_actor(self, random_key: jax.Array, policy: OnPolicyPolicy,
                 environment_spec: specs.EnvironmentSpec, variable_source: core.VariableSource,
                 adder: Optional[adders_base.Adder] = None) -> actors.FeedForwardActor:
    del environment_spec
    seed = int(jax.random.randint(random_key, (), 0, 2**31 - 1))
    runtime = vc.make_runtime(policy.precision, policy.spec)
    client = SynchronousVariableClient(variable_source, runtime,
                                       self.config.variable_update_period)
    client.update_and_wait()
    return actors.FeedForwardActor(runtime, policy.selector, client, adder, seed=seed)


class SynchronousVariableClient(vc.VariableClient):
  """Pulls (and loads) the newest policy every `update_period` actor steps, waiting for
  it, instead of in a background thread.

  On-policy actors should act with the policy the learner just produced: with
  background pulls, which version a step is taken with depends on thread scheduling,
  so a seeded single-process run is not reproducible on a loaded machine (and A2C,
  which has no off-policy correction, trains on a lagging policy's data). A pull of an
  unchanged version costs one `get_variables` call; a new version is converted once by
  the learner-side `PolicyPublisher`.
  """

  def update(self, wait: bool = False) -> None:
    self._calls += 1
    if wait or self._calls >= self._period:
      self.update_and_wait()


class TrainingState(NamedTuple):
  params: Dict[str, hk.Params]  # {"policy": {layer: {w, b}}, "value": ...}
  opt_state: Any
  key: jax.Array
  steps: jnp.ndarray  # int32 scalar: learner steps (= policy version)


class OnPolicyLearner(learners.JaxLearner):
  """Runs a pure, jitted `update(state, trajectory) -> (state, metrics)` on each batch
  of rollouts (`[B, T + 1]` acme `Trajectory`).

  `get_variables(["policy", "version"])` returns `[policy params, learner steps]`.
  """

  def __init__(self, update: Callable, params: Dict[str, hk.Params],
               optimizer, iterator: Iterator[Any], random_key: jax.Array,
               logger: Optional[loggers.Logger] = None,
               counter: Optional[counting.Counter] = None):
    self._iterator = iterator
    self._update = jax.jit(update)
    self._init_bookkeeping(counter, logger)
    self._state = TrainingState(params, optimizer.init(params), random_key,
                                jnp.zeros((), jnp.int32))

  def step(self) -> None:
    sample = next(self._iterator)
    self._state, metrics = self._update(self._state, sample.data)
    self._record_step(metrics)

  def get_variables(self, names):
    state = self._state
    out = {"policy": state.params["policy"], "value": state.params["value"],
           "version": int(state.steps)}
    return [out[name] for name in names]

