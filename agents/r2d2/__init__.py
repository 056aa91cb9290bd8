"""R2D2 (Kapturowski et al. 2019): recurrent experience replay with burn-in and stored state.

As in Acme, the package is the agent's public face:

    from actorq.agents import r2d2
    config = r2d2.R2D2Config(...)
    builder = r2d2.R2D2Builder(config)

Exports the config, networks, learner (with its losses) and builder; results: README.md."""
from actorq.agents.r2d2.config import R2D2Config
from actorq.agents.r2d2.networks import R2D2Networks, make_networks, recurrent_spec
from actorq.agents.r2d2.learning import (
    R2D2Learner, TrainingState, batch_loss, burn_in_mask, r2d2_sequence_loss, sequence_priority,
    transformed_n_step_double_q_targets, unroll_with_burn_in, value_rescale,
    value_rescale_inverse)
from actorq.agents.r2d2.builder import R2D2Builder, extras_spec

__all__ = [
    "R2D2Builder",
    "R2D2Config",
    "R2D2Learner",
    "R2D2Networks",
    "TrainingState",
    "batch_loss",
    "burn_in_mask",
    "extras_spec",
    "make_networks",
    "r2d2_sequence_loss",
    "recurrent_spec",
    "sequence_priority",
    "transformed_n_step_double_q_targets",
    "unroll_with_burn_in",
    "value_rescale",
    "value_rescale_inverse",
]
