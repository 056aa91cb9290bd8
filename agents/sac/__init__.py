"""SAC (Haarnoja et al. 2018) with a learned temperature.

`from actorq.agents import sac` as in Acme: sac.SACConfig, sac.SACBuilder,
sac.make_networks, sac.SACLearner and its losses."""
from actorq.agents.sac.config import SACConfig
from actorq.agents.sac.networks import SACNetworks, make_networks
from actorq.agents.sac.learning import (
    SACLearner, TrainingState, sac_policy_loss, sac_temperature_loss, sample_tanh_gaussian,
    tanh_gaussian_log_prob)
from actorq.agents.sac.builder import SACBuilder
