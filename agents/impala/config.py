"""IMPALA configuration. Units per field: actor steps are environment steps of one actor;
a learner step is one SGD step on a batch of `batch_size` rollouts."""
from __future__ import annotations

import dataclasses

from actorq.agents.onpolicy_common.config import OnPolicyConfig
from actorq.components import config_checks as checks


@dataclasses.dataclass
class IMPALAConfig(OnPolicyConfig):
  """IMPALA: V-trace targets and the importance-weighted policy gradient
  (Espeholt et al. 2018, eq. 1 and 4). The actors' behaviour log-probs (from their own,
  possibly int8, policy) are the `mu` of the importance ratios.

  gym:CartPole-v1 (greedy return >= 475, seed 0): `configs/cartpole.json` single-process
  (fp32 and int8 actors), `configs/cartpole_distributed.json` or the defaults with
  `--launch local_mp --num-actors 2` (fp32; int8 not reliably); see agents/impala/README.md.
  `learning_rate_decay_steps` counts actor steps summed over actors (see
  `learning.learning_rate_schedule`).

  Attributes:
    vtrace_lambda: lambda of the V-trace targets, the trace coefficients c_s = lambda
      min(1, pi/mu) (`rlax.vtrace`; 1: the paper's eq. 1), in [0, 1].
    clip_rho_threshold: rho-bar, the truncation of the importance ratios in the V-trace
      targets; > 0.
    clip_pg_rho_threshold: rho-bar of the policy gradient's importance ratio (eq. 4);
      > 0.
    baseline_cost: weight of the value (baseline) loss; >= 0.
    entropy_cost: weight of the entropy bonus; >= 0.
  """
  vtrace_lambda: float = checks.field(1.0, ge=0.0, le=1.0)
  clip_rho_threshold: float = checks.field(1.0, gt=0.0)
  clip_pg_rho_threshold: float = checks.field(1.0, gt=0.0)
  baseline_cost: float = checks.field(0.5, ge=0.0)
  entropy_cost: float = checks.field(0.01, ge=0.0)
  replay_table_name: str = "impala_rollouts"
