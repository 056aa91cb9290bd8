"""D4PG networks: tanh policy (a `NetworkSpec`, runnable by int8 actors) and a critic
with `num_atoms` logits of the return distribution."""
from __future__ import annotations

import numpy as np
from acme import specs

from actorq.agents.dpg_common import networks as dpg_networks
from actorq.agents.dpg_common.networks import DPGNetworks, UnsupportedEnvironmentError  # noqa: F401


def make_networks(environment_spec: specs.EnvironmentSpec, policy_hidden_sizes=(256, 256),
                  critic_hidden_sizes=(256, 256), num_atoms: int = 51,
                  critic_layer_norm: bool = False,
                  policy_output_init_scale=None) -> DPGNetworks:
  """Critic `apply(params, obs[B, D], u[B, A]) -> logits float32[B, num_atoms]`.

  Raises:
    UnsupportedEnvironmentError: discrete/unbounded actions or non-vector observations.
  """
  return dpg_networks.make_networks(environment_spec, policy_hidden_sizes,
                                    critic_hidden_sizes, num_atoms, critic_layer_norm,
                                    policy_output_init_scale)


def atoms(num_atoms: int, vmin: float, vmax: float) -> np.ndarray:
  """float32 `[num_atoms]` support `linspace(vmin, vmax, num_atoms)`."""
  return np.linspace(vmin, vmax, num_atoms, dtype=np.float32)
