"""A2C (Mnih et al. 2016, synchronous): n-step (GAE) advantage actor-critic.

As in Acme, the package is the agent's public face:

    from actorq.agents import a2c
    config = a2c.A2CConfig(...)
    builder = a2c.A2CBuilder(config)

Exports the config, networks, learner (with its losses) and builder; results: README.md.

The learner is `actorq.agents.onpolicy_common.OnPolicyLearner`, re-exported here, driven by
this package's `make_update`."""
from actorq.agents.a2c.config import A2CConfig
from actorq.agents.a2c.networks import A2CNetworks, make_networks
from actorq.agents.a2c.learning import a2c_loss, make_update
from actorq.agents.a2c.builder import A2CBuilder
from actorq.agents.onpolicy_common.learning import OnPolicyLearner

__all__ = [
    "A2CBuilder",
    "A2CConfig",
    "A2CNetworks",
    "OnPolicyLearner",
    "a2c_loss",
    "make_networks",
    "make_update",
]
