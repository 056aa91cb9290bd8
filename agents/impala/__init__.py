"""IMPALA (Espeholt et al. 2018): V-trace targets and the importance-weighted policy gradient.

`from actorq.agents import impala` as in Acme: impala.IMPALAConfig, impala.IMPALABuilder,
impala.make_networks, impala.OnPolicyLearner (the family's, driven by make_update) and its
losses."""
from actorq.agents.impala.builder import IMPALABuilder
from actorq.agents.impala.config import IMPALAConfig
from actorq.agents.impala.learning import VTraceOutput, impala_loss, make_update, vtrace_targets
from actorq.agents.impala.networks import IMPALANetworks, make_networks
from actorq.agents.onpolicy_common.learning import OnPolicyLearner
