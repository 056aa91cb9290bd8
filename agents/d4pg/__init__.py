"""D4PG (Barth-Maron et al. 2018): the deterministic policy gradient with a categorical critic.

As in Acme, the package is the agent's public face:

    from actorq.agents import d4pg
    config = d4pg.D4PGConfig(...)
    builder = d4pg.D4PGBuilder(config)

Exports the config, networks, learner (with its losses) and builder; results: README.md."""
from actorq.agents.d4pg.config import D4PGConfig, SUPPORT_LIMIT
from actorq.agents.d4pg.networks import DPGNetworks, atoms, make_networks
from actorq.agents.d4pg.learning import (
    DPGLearner, categorical_q_value, d4pg_critic_loss, dpg_policy_loss)
from actorq.agents.d4pg.builder import D4PGBuilder

__all__ = [
    "D4PGBuilder",
    "D4PGConfig",
    "DPGLearner",
    "DPGNetworks",
    "SUPPORT_LIMIT",
    "atoms",
    "categorical_q_value",
    "d4pg_critic_loss",
    "dpg_policy_loss",
    "make_networks",
]
