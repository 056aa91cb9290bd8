"""R2D2 (Kapturowski et al. 2019): recurrent experience replay with burn-in and stored state.

`from actorq.agents import r2d2` as in Acme: r2d2.R2D2Config, r2d2.R2D2Builder,
r2d2.make_networks, r2d2.R2D2Learner and its losses."""
from actorq.agents.r2d2.config import R2D2Config
from actorq.agents.r2d2.networks import R2D2Networks, make_networks, recurrent_spec
from actorq.agents.r2d2.learning import (
    R2D2Learner, TrainingState, batch_loss, burn_in_mask, r2d2_sequence_loss, sequence_priority,
    transformed_n_step_double_q_targets, unroll_with_burn_in, value_rescale,
    value_rescale_inverse)
from actorq.agents.r2d2.builder import R2D2Builder, extras_spec
