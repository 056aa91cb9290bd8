"""D4PG (Barth-Maron et al. 2018): the deterministic policy gradient with a categorical critic.

`from actorq.agents import d4pg` as in Acme: d4pg.D4PGConfig, d4pg.D4PGBuilder,
d4pg.make_networks, d4pg.DPGLearner (the family's) and its losses."""
from actorq.agents.d4pg.config import D4PGConfig, SUPPORT_LIMIT
from actorq.agents.d4pg.networks import DPGNetworks, atoms, make_networks
from actorq.agents.d4pg.learning import (
    DPGLearner, categorical_q_value, d4pg_critic_loss, dpg_policy_loss)
from actorq.agents.d4pg.builder import D4PGBuilder
