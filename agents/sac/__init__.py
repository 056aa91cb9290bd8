"""SAC (Haarnoja et al. 2018) with a learned temperature.

As in Acme, the package is the agent's public face:

    from actorq.agents import sac
    config = sac.SACConfig(...)
    builder = sac.SACBuilder(config)

Exports the config, networks, learner (with its losses) and builder; results: README.md."""
from actorq.agents.sac.config import SACConfig
from actorq.agents.sac.networks import SACNetworks, make_networks
from actorq.agents.sac.learning import (
    SACLearner, TrainingState, sac_policy_loss, sac_temperature_loss, sample_tanh_gaussian,
    tanh_gaussian_log_prob)
from actorq.agents.sac.builder import SACBuilder

__all__ = [
    "SACBuilder",
    "SACConfig",
    "SACLearner",
    "SACNetworks",
    "TrainingState",
    "make_networks",
    "sac_policy_loss",
    "sac_temperature_loss",
    "sample_tanh_gaussian",
    "tanh_gaussian_log_prob",
]
