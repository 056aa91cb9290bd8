"""PPO networks: an MLP policy described by a `NetworkSpec` (logits, or Gaussian mean and
log-std: it runs on the actors at any precision) and a learner-only MLP value network."""
from __future__ import annotations

from acme import specs

from actorq.agents import onpolicy_common as onpolicy

PPONetworks = onpolicy.ActorCriticNetworks


def make_networks(environment_spec: specs.EnvironmentSpec, config) -> PPONetworks:
  """Raises `actorq.core.UnsupportedEnvironmentError` for image observations or an
  unsupported action spec."""
  return onpolicy.make_actor_critic_networks(environment_spec, config.policy_hidden,
                                             config.value_hidden, config.activation,
                                             config.state_independent_log_std,
                                             config.initial_log_std)
