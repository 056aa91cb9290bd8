"""DDPG networks: tanh policy (a `NetworkSpec`, runnable by int8 actors) and a scalar critic."""
from __future__ import annotations

from acme import specs

from actorq.agents.dpg_common import networks as dpg_networks
from actorq.agents.dpg_common.networks import DPGNetworks, UnsupportedEnvironmentError  # noqa: F401


def make_networks(environment_spec: specs.EnvironmentSpec, policy_hidden_sizes=(256, 256),
                  critic_hidden_sizes=(256, 256), critic_layer_norm: bool = False,
                  policy_output_init_scale=None) -> DPGNetworks:
  """Critic `apply(params, obs[B, D], u[B, A]) -> q float32[B, 1]`.

  Raises:
    UnsupportedEnvironmentError: discrete/unbounded actions or non-vector observations.
  """
  return dpg_networks.make_networks(environment_spec, policy_hidden_sizes,
                                    critic_hidden_sizes, 1, critic_layer_norm,
                                    policy_output_init_scale)
