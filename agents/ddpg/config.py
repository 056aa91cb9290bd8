"""DDPG configuration (units: see `actorq.agents.dpg_common.config`)."""
from __future__ import annotations

import dataclasses
from typing import Optional

from actorq.agents.dpg_common.config import DPGConfig
from actorq.components import config_checks as checks


@dataclasses.dataclass
class DDPGConfig(DPGConfig):
  """DDPG (Lillicrap et al. 2016): a scalar critic trained by TD learning.

  As in Acme's DDPG (and unlike the paper's 1-step returns, Ornstein-Uhlenbeck noise and
  Polyak targets) the defaults use n-step returns, Gaussian noise and periodic hard target
  copies: D4PG's settings with a non-distributional critic. On dmc:cartpole-balance the
  paper-style settings (n_step=1, target_update_period=1, target_update_tau=0.005,
  sigma=0.2) reached only 484 after 40k actor steps (seed 0), these ones >= 900 (README).

  Attributes:
    huber_delta: Huber threshold of the critic's TD loss (> 0), or null: the squared
      loss 0.5 * td^2.
  """
  huber_delta: Optional[float] = checks.field(None, gt=0.0)
