"""TD3 networks: the deterministic tanh policy of DDPG (a `NetworkSpec`, runnable by int8
actors) and twin scalar critics (`dpg_common.networks.make_critic(num_critics=2)`)."""
from __future__ import annotations

from typing import Optional, Sequence

from acme import specs

from actorq.agents.dpg_common import networks as dpg_networks
from actorq.agents.dpg_common.networks import DPGNetworks, UnsupportedEnvironmentError  # noqa: F401


def make_networks(environment_spec: specs.EnvironmentSpec,
                  policy_hidden_sizes: Sequence[int] = (256, 256),
                  critic_hidden_sizes: Sequence[int] = (256, 256),
                  critic_layer_norm: bool = False,
                  policy_output_init_scale: Optional[float] = None) -> DPGNetworks:
  """Policy `apply(params, obs[B, D]) -> u float32[B, A]` in [-1, 1]; critic
  `apply(params, obs[B, D], u[B, A]) -> q float32[B, 2]` (the twin critics).

  Raises:
    UnsupportedEnvironmentError: discrete/unbounded actions or non-vector observations.
  """
  return dpg_networks.make_networks(environment_spec, policy_hidden_sizes,
                                    critic_hidden_sizes, 1, critic_layer_norm,
                                    policy_output_init_scale, num_critics=2)
