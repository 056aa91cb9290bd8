"""Policy and critic networks for deterministic-policy agents.

The policy is a `NetworkSpec` MLP with a tanh output (`u in [-1, 1]^A`) so that actors
can run it through any policy runtime, int8 included; actors rescale `u` to the
action bounds (`actorq.components.continuous`). The critic is learner-only plain Haiku:
an MLP over `concat(observation, u)`, with actions in the same `[-1, 1]` units.
"""
from __future__ import annotations

import dataclasses
from typing import Sequence

import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np
from acme import specs

from actorq.components import continuous
from actorq.components import networks as networks_lib
from actorq.quantization import network_spec as ns


class UnsupportedEnvironmentError(ValueError):
  """The agent cannot act in this environment (e.g. discrete actions)."""


@dataclasses.dataclass
class DPGNetworks:
  """`spec`/`policy`: `apply(params, obs[B, D]) -> u float32[B, A]` in [-1, 1].
  `critic`: `apply(params, obs[B, D], u[B, A]) -> float32[B, critic_output_size]`.
  `action_minimum`/`action_maximum`: float32 `[A]` bounds of the environment."""
  spec: ns.NetworkSpec
  policy: hk.Transformed
  critic: hk.Transformed
  action_minimum: np.ndarray
  action_maximum: np.ndarray


def make_critic(hidden_sizes: Sequence[int], output_size: int) -> hk.Transformed:
  """ReLU MLP over `concat(obs, u)` with a linear `output_size` head."""

  def fn(observation, action):
    x = jnp.concatenate([observation.astype(jnp.float32), action.astype(jnp.float32)], -1)
    return hk.nets.MLP(list(hidden_sizes) + [int(output_size)], activation=jax.nn.relu,
                       name="critic")(x)

  return hk.without_apply_rng(hk.transform(fn))


def make_networks(environment_spec: specs.EnvironmentSpec, policy_hidden_sizes: Sequence[int],
                  critic_hidden_sizes: Sequence[int], critic_output_size: int) -> DPGNetworks:
  """Networks for a vector-observation, bounded continuous-action environment.

  Raises:
    UnsupportedEnvironmentError: discrete or unbounded actions, or non-vector observations.
  """
  actions = environment_spec.actions
  if isinstance(actions, specs.DiscreteArray):
    raise UnsupportedEnvironmentError(
        f"this agent needs continuous (bounded) actions, but this environment has "
        f"{actions.num_values} discrete actions; use dqn, or a continuous environment "
        "such as dmc:cartpole-balance")
  try:
    lo, hi = continuous.bounds(actions)
  except continuous.UnboundedActionSpecError as e:
    raise UnsupportedEnvironmentError(str(e)) from None
  if len(lo.shape) != 1:
    raise UnsupportedEnvironmentError(f"action shape {lo.shape} is not supported: use a vector [A]")
  obs_shape = tuple(environment_spec.observations.shape)
  if len(obs_shape) != 1:
    raise UnsupportedEnvironmentError(
        f"observation shape {obs_shape} is not supported: use a vector [D]")
  spec = ns.mlp(obs_shape[0], policy_hidden_sizes, lo.shape[0], output_activation="tanh")
  return DPGNetworks(spec=spec, policy=networks_lib.haiku_network(spec),
                     critic=make_critic(critic_hidden_sizes, critic_output_size),
                     action_minimum=lo, action_maximum=hi)
