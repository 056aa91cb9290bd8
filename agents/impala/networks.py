"""IMPALA networks: the actors' policy as a `NetworkSpec` (logits, or Gaussian mean and
log-std) and a learner-only MLP baseline V(s)."""
from __future__ import annotations

from acme import specs

from actorq.agents import onpolicy_common as onpolicy

IMPALANetworks = onpolicy.ActorCriticNetworks


def make_networks(environment_spec: specs.EnvironmentSpec, config) -> IMPALANetworks:
  return onpolicy.make_actor_critic_networks(environment_spec, config.policy_hidden,
                                             config.value_hidden, config.activation)
