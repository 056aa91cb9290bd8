"""A2C configuration. Units per field: actor steps are environment steps of one actor;
a learner step is one SGD step on a batch of `batch_size` rollouts."""
from __future__ import annotations

import dataclasses

from actorq.agents.onpolicy_common.config import CorrectedOnPolicyConfig
from actorq.components import config_checks as checks


@dataclasses.dataclass
class A2CConfig(CorrectedOnPolicyConfig):
  """Synchronous advantage actor-critic (Mnih et al. 2016, the synchronous variant of
  Algorithm S3): n-step (GAE) advantages. With actors at another precision than fp32 the
  policy gradient is importance-weighted by default (`importance_correction`, see
  `agents/a2c/learning.py`); otherwise there is no off-policy correction.

  The defaults solve gym:CartPole-v1 (greedy return >= 475); see agents/a2c/README.md.

  Attributes:
    gae_lambda: lambda of the GAE advantages (Schulman et al. 2016), in [0, 1]; 1: n-step
      returns bootstrapped at the rollout end.
    value_cost: weight of the value loss in the total loss; >= 0.
    entropy_cost: weight of the entropy bonus (Mnih et al. 2016); >= 0.
  """
  gae_lambda: float = checks.field(1.0, ge=0.0, le=1.0)
  value_cost: float = checks.field(0.5, ge=0.0)
  entropy_cost: float = checks.field(0.01, ge=0.0)
  replay_table_name: str = "a2c_rollouts"
