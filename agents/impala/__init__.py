"""IMPALA (Espeholt et al. 2018): V-trace targets and the importance-weighted policy gradient.

As in Acme, the package is the agent's public face:

    from actorq.agents import impala
    config = impala.IMPALAConfig(...)
    builder = impala.IMPALABuilder(config)

Exports the config, networks, learner (with its losses) and builder; results: README.md.

The learner is `actorq.agents.onpolicy_common.OnPolicyLearner`, re-exported here, driven by
this package's `make_update`."""
from actorq.agents.impala.config import IMPALAConfig
from actorq.agents.impala.networks import IMPALANetworks, make_networks
from actorq.agents.impala.learning import VTraceOutput, impala_loss, make_update, vtrace_targets
from actorq.agents.impala.builder import IMPALABuilder
from actorq.agents.onpolicy_common.learning import OnPolicyLearner

__all__ = [
    "IMPALABuilder",
    "IMPALAConfig",
    "IMPALANetworks",
    "OnPolicyLearner",
    "VTraceOutput",
    "impala_loss",
    "make_networks",
    "make_update",
    "vtrace_targets",
]
