"""A2C (Mnih et al. 2016, synchronous): n-step (GAE) advantage actor-critic.

`from actorq.agents import a2c` as in Acme: a2c.A2CConfig, a2c.A2CBuilder,
a2c.make_networks, a2c.OnPolicyLearner (the family's, driven by make_update) and its
losses."""
from actorq.agents.a2c.builder import A2CBuilder
from actorq.agents.a2c.config import A2CConfig
from actorq.agents.a2c.learning import a2c_loss, make_update
from actorq.agents.a2c.networks import A2CNetworks, make_networks
from actorq.agents.onpolicy_common.learning import OnPolicyLearner
