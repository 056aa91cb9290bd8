"""Policy and critic networks of the off-policy actor-critic agents (DDPG, D4PG, TD3, SAC).

The policy is a `NetworkSpec` MLP so that actors can run it through any policy runtime,
int8 included: a deterministic policy ends in tanh (`u in [-1, 1]^A`), a stochastic one
in a linear `[mean[A], log_std[A]]` head whose sampling and tanh squash happen in the
actor's numpy selector. Actors rescale `u` to the action bounds
(`actorq.components.acting.continuous`). The critic is learner-only plain Haiku: an MLP over
`concat(observation, u)`, with actions in the same `[-1, 1]` units; `num_critics=2` makes
the twin critics of TD3 and SAC (two independent MLPs, clipped double Q).
"""
from __future__ import annotations

import dataclasses
from typing import Optional, Sequence

import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np
from acme import specs

from actorq.components import networks as networks_lib
from actorq.components.acting import continuous
from actorq.core import UnsupportedEnvironmentError
from actorq.quantization import network_spec as ns


@dataclasses.dataclass
class DPGNetworks:
  """`spec`/`policy`: `apply(params, obs[B, D]) -> float32[B, A]` (deterministic: u in
  [-1, 1]) or `[B, 2A]` (stochastic: mean and unclipped log-std of the pre-tanh Gaussian).
  `critic`: `apply(params, obs[B, D], u[B, A]) -> float32[B, critic_output_size]`, or
  `[B, num_critics]` for several scalar critics.
  `action_minimum`/`action_maximum`: float32 `[A]` bounds of the environment.
  `policy_preactivation` (deterministic policies): the same network and parameters without
  the final tanh, `apply(params, obs[B, D]) -> z float32[B, A]` with `u = tanh(z)`; None
  for a stochastic policy."""
  spec: ns.NetworkSpec
  policy: hk.Transformed
  critic: hk.Transformed
  action_minimum: np.ndarray
  action_maximum: np.ndarray
  policy_preactivation: Optional[hk.Transformed] = None


def make_critic(hidden_sizes: Sequence[int], output_size: int,
                layer_norm: bool = False, num_critics: int = 1) -> hk.Transformed:
  """MLP over `concat(obs, u)` with a linear `output_size` head.

  `layer_norm=False`: ReLU MLP. `layer_norm=True`: Acme's `LayerNormMLP` torso (the
  critic of Acme's D4PG and DDPG control-suite agents): first layer linear -> LayerNorm
  (Ba et al. 2016) -> tanh, the remaining hidden layers ELU; it keeps the first layer's
  features bounded however large the inputs or weights grow.

  `num_critics > 1` (scalar critics only): that many independent MLPs (own parameters
  `critic_0`, `critic_1`, ...), outputs stacked to float32 `[B, num_critics]`: the twin
  critics of TD3 (Fujimoto et al. 2018, sec. 4.2) and SAC.

  Raises:
    ValueError: `layer_norm` with no hidden layer (the LayerNorm follows the first one);
      `num_critics < 1`, or `num_critics > 1` with `output_size != 1`.
  """
  hidden_sizes = [int(h) for h in hidden_sizes]
  if layer_norm and not hidden_sizes:
    raise ValueError("critic_layer_norm needs at least one critic hidden layer, got "
                     f"critic_hidden_sizes={tuple(hidden_sizes)}")
  if num_critics < 1 or (num_critics > 1 and output_size != 1):
    raise ValueError(f"num_critics must be 1, or > 1 with scalar critics (output_size 1); "
                     f"got num_critics={num_critics}, output_size={output_size}")

  def one_critic(x, name):
    if not layer_norm:
      return hk.nets.MLP(hidden_sizes + [int(output_size)], activation=jax.nn.relu,
                         name=name)(x)
    with hk.experimental.name_scope(name):
      x = hk.Linear(hidden_sizes[0], name="linear_0")(x)
      x = jnp.tanh(hk.LayerNorm(axis=-1, create_scale=True, create_offset=True,
                                name="layer_norm")(x))
      for i, h in enumerate(hidden_sizes[1:], start=1):
        x = jax.nn.elu(hk.Linear(h, name=f"linear_{i}")(x))
      return hk.Linear(int(output_size), name=f"linear_{len(hidden_sizes)}")(x)

  def fn(observation, action):
    x = jnp.concatenate([observation.astype(jnp.float32), action.astype(jnp.float32)], -1)
    if num_critics == 1:
      return one_critic(x, "critic")
    return jnp.concatenate([one_critic(x, f"critic_{i}") for i in range(num_critics)], -1)

  return hk.without_apply_rng(hk.transform(fn))


def make_networks(environment_spec: specs.EnvironmentSpec, policy_hidden_sizes: Sequence[int],
                  critic_hidden_sizes: Sequence[int], critic_output_size: int,
                  critic_layer_norm: bool = False,
                  policy_output_init_scale: Optional[float] = None, num_critics: int = 1,
                  stochastic_policy: bool = False) -> DPGNetworks:
  """Networks for a vector-observation, bounded continuous-action environment.

  `critic_layer_norm`, `num_critics`: see `make_critic`. `policy_output_init_scale`: see
  `actorq.components.networks.haiku_network` (1e-4 is Acme's near-zero policy head).
  `stochastic_policy`: the policy outputs `[mean[A], log_std[A]]` (linear head) instead of
  a tanh `u[A]`.

  Raises:
    UnsupportedEnvironmentError: discrete or unbounded actions, or non-vector observations.
    ValueError: `critic_layer_norm` with no critic hidden layer or a bad `num_critics`
      (see `make_critic`), or a non-positive `policy_output_init_scale`.
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
  preactivation = None
  if stochastic_policy:
    spec = ns.mlp(obs_shape[0], policy_hidden_sizes, 2 * lo.shape[0])
  else:
    spec = ns.mlp(obs_shape[0], policy_hidden_sizes, lo.shape[0], output_activation="tanh")
    # Same layer names, so the same parameters; the last layer without its tanh.
    linear_out = ns.mlp(obs_shape[0], policy_hidden_sizes, lo.shape[0])
    preactivation = networks_lib.haiku_network(linear_out, policy_output_init_scale)
  return DPGNetworks(spec=spec,
                     policy=networks_lib.haiku_network(spec, policy_output_init_scale),
                     critic=make_critic(critic_hidden_sizes, critic_output_size,
                                        critic_layer_norm, num_critics),
                     action_minimum=lo, action_maximum=hi,
                     policy_preactivation=preactivation)
