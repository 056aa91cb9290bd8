"""MAPPO's networks: PPO's policy on the agent's own input and a value MLP on the
centralized input (Yu et al. 2022, sec. 3).

A group's stored observation is `[policy input (D + I), critic input (S)]`
(`components.acting.multi_agent.ParameterGroup.stored`; I is the one-hot id's length, N
under parameter sharing, else 0). The policy (the `NetworkSpec` MLP the actors run at any
precision, on `D + I` inputs) reads the leading `D + I` entries; the value MLP (learner
only) reads `[critic input (S), agent id (I)]`, so it never sees the agent's own local
observation except through the global input.
"""
from __future__ import annotations

import dataclasses

import haiku as hk
import jax
import jax.numpy as jnp
from acme import specs

from actorq.agents.onpolicy_common import networks as onpolicy_networks
from actorq.agents.ppo.networks import PPONetworks


@dataclasses.dataclass(frozen=True)
class InputLayout:
  """Where the parts of a stored observation are: `[local (D), id (I), critic (S)]`."""
  local_size: int
  id_size: int
  critic_size: int

  def policy_input(self, observation):
    return observation[..., :self.local_size + self.id_size]

  def critic_input(self, observation):
    """float32 `[..., S + I]`: the critic input followed by the agent id."""
    d, i = self.local_size, self.id_size
    return jnp.concatenate([observation[..., d + i:], observation[..., d:d + i]], axis=-1)


def _sliced(transformed: hk.Transformed, take) -> hk.Transformed:
  return hk.Transformed(init=lambda key, obs: transformed.init(key, take(obs)),
                        apply=lambda params, obs: transformed.apply(params, take(obs)))


def make_networks(environment_spec: specs.EnvironmentSpec, config,
                  layout: InputLayout) -> PPONetworks:
  """PPO's actor-critic networks (`onpolicy_common.make_actor_critic_networks`, the
  config's widths and activation) with the policy on `layout.policy_input` and the value
  on `layout.critic_input` of the stored observation.

  Args:
    environment_spec: the group's spec; observations float32 `[D + I + S]`.
    config: a `MAPPOConfig`.
    layout: the sizes D, I, S.

  Raises:
    UnsupportedEnvironmentError: an unsupported action spec.
    ValueError: the observation's length is not D + I + S.
  """
  size = int(environment_spec.observations.shape[0])
  if size != layout.local_size + layout.id_size + layout.critic_size:
    raise ValueError(f"stored observation of {size} entries does not match the layout {layout}")
  policy_spec = environment_spec._replace(observations=specs.Array(
      (layout.local_size + layout.id_size,), environment_spec.observations.dtype,
      "observation"))
  base = onpolicy_networks.make_actor_critic_networks(
      policy_spec, config.policy_hidden, config.value_hidden, config.activation,
      config.state_independent_log_std, config.initial_log_std)
  value_hidden = tuple(int(h) for h in config.value_hidden)
  act = jnp.tanh if config.activation == "tanh" else jax.nn.relu

  def value_fn(critic_input):
    x = critic_input.astype(jnp.float32)
    for k, h in enumerate(value_hidden):
      x = act(hk.Linear(h, name=f"value_{k}")(x))
    return hk.Linear(1, name=f"value_{len(value_hidden)}")(x)[..., 0]

  return dataclasses.replace(
      base, policy=_sliced(base.policy, layout.policy_input),
      value=_sliced(hk.without_apply_rng(hk.transform(value_fn)), layout.critic_input))
