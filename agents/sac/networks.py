"""SAC networks: the policy is a `NetworkSpec` MLP with a linear `[mean[A], log_std[A]]`
head (runnable by any policy runtime, int8 included; the sampling, the tanh squash and
the rescale to the action bounds happen in the actor's numpy selector,
`components.continuous.tanh_gaussian_bounded`), and twin scalar critics
(`dpg_common.networks.make_critic(num_critics=2)`)."""
from __future__ import annotations

from typing import Optional, Sequence

from acme import specs

from actorq.agents.dpg_common import networks as dpg_networks
from actorq.agents.dpg_common.networks import DPGNetworks, UnsupportedEnvironmentError  # noqa: F401

SACNetworks = DPGNetworks


def make_networks(environment_spec: specs.EnvironmentSpec,
                  policy_hidden_sizes: Sequence[int] = (256, 256),
                  critic_hidden_sizes: Sequence[int] = (256, 256),
                  critic_layer_norm: bool = False,
                  policy_output_init_scale: Optional[float] = None) -> SACNetworks:
  """Policy `apply(params, obs[B, D]) -> float32[B, 2A]` (pre-tanh Gaussian mean and
  log-std, the log-std clipped where it is used: `continuous.split_gaussian`); critic
  `apply(params, obs[B, D], u[B, A]) -> q float32[B, 2]` with `u` in [-1, 1].

  Raises:
    UnsupportedEnvironmentError: discrete/unbounded actions or non-vector observations.
  """
  return dpg_networks.make_networks(environment_spec, policy_hidden_sizes,
                                    critic_hidden_sizes, 1, critic_layer_norm,
                                    policy_output_init_scale, num_critics=2,
                                    stochastic_policy=True)
