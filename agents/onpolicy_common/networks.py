"""Policy heads and actor-critic networks of the on-policy family (PPO, A2C, IMPALA).

Policy heads (what the actors' `NetworkSpec` outputs, float32):
  * discrete, A actions: `logits[A]`;
  * continuous, A dims: `[mean[A], log_std[A]]` (`2A` outputs), the Gaussian's
    log-std clipped to [LOG_STD_MIN, LOG_STD_MAX]. Sampled actions are clipped to the
    action bounds before they reach the environment; the unclipped sample is kept as
    extras `raw_action` so the learner evaluates the density where it was sampled.

The same distribution is computed on the actor (numpy selectors) and on the learner
(jax `log_prob`, `entropy`). The policy is a `NetworkSpec` MLP (it runs on the actors at
any precision); the value network is learner-only Haiku.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Dict, Optional, Sequence

import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np
from acme import specs

from actorq import core
from actorq.components import networks as networks_lib
from actorq.components.acting import actors
from actorq.components.acting.continuous import LOG_STD_MAX, LOG_STD_MIN, split_gaussian
from actorq.core import UnsupportedEnvironmentError
from actorq.quantization import network_spec as ns

_LOG_2PI = float(np.log(2.0 * np.pi))

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
  """log softmax over the last axis (float64 [..., A])."""
  z = logits - np.max(logits, axis=-1, keepdims=True)
  return z - np.log(np.sum(np.exp(z), axis=-1, keepdims=True))


def categorical_selector(head: PolicyHead, evaluation: bool = False) -> core.Selector:
  """Samples `a ~ softmax(logits)` (evaluation: argmax). Extras: logits, log-prob. The
  batch form (logits [K, A]) draws the Gumbel noise `rng.random((K, A))`, what K rows
  draw in row order."""

  def select(outputs: np.ndarray, rng: np.random.Generator, step: int):
    del step
    logits = np.asarray(outputs, np.float32)
    if evaluation:
      return np.asarray(np.argmax(logits), head.action_dtype), ()
    log_p = _np_log_softmax(logits.astype(np.float64))
    action = int(np.argmax(log_p - np.log(-np.log(rng.random(log_p.shape)))))  # Gumbel-max
    return (np.asarray(action, head.action_dtype),
            {"logits": logits, "log_prob": np.float32(log_p[action])})

  def batch(outputs: np.ndarray, rng: np.random.Generator, steps: np.ndarray):
    del steps
    logits = np.asarray(outputs, np.float32)
    if evaluation:
      return np.argmax(logits, axis=-1).astype(head.action_dtype), ()
    log_p = _np_log_softmax(logits.astype(np.float64))
    action = np.argmax(log_p - np.log(-np.log(rng.random(log_p.shape))), axis=-1)
    chosen = np.take_along_axis(log_p, action[:, None], axis=-1)[:, 0]
    return (action.astype(head.action_dtype),
            {"logits": logits, "log_prob": chosen.astype(np.float32)})

  return actors.with_batch(select, batch)


def gaussian_selector(head: PolicyHead, evaluation: bool = False) -> core.Selector:
  """Samples `u ~ N(mean, std^2)`, acts with `clip(u, min, max)` (evaluation: the
  clipped mean). Extras: log-prob of `u` and `raw_action = u`. Actions are float32 and
  always inside the bounds (case E4). It takes one row [2A] or K rows [K, 2A] alike (its
  batch form is itself)."""

  def select(outputs: np.ndarray, rng: np.random.Generator, step: int):
    del step
    mean, log_std = split_gaussian(np.asarray(outputs, np.float32))
    if evaluation:
      return np.clip(mean, head.minimum, head.maximum).astype(np.float32), ()
    noise = rng.standard_normal(mean.shape).astype(np.float32)
    raw = (mean + np.exp(log_std) * noise).astype(np.float32)
    log_prob = np.sum(-0.5 * noise.astype(np.float64) ** 2 - log_std - 0.5 * _LOG_2PI, axis=-1)
    action = np.clip(raw, head.minimum, head.maximum).astype(np.float32)
    return action, {"log_prob": np.asarray(log_prob, np.float32)[()], "raw_action": raw}

  # Rows [K, 2A]: the same operations along the last axis; `standard_normal((K, A))` is
  # what K rows draw in row order.
  return actors.with_batch(select, select)


def make_selector(head: PolicyHead, evaluation: bool = False) -> core.Selector:
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
