"""DDPG configuration (units: see `actorq.agents.dpg_common.config`)."""
from __future__ import annotations

import dataclasses
from typing import Optional

from actorq.agents.dpg_common.config import DPGConfig


@dataclasses.dataclass
class DDPGConfig(DPGConfig):
  """DDPG (Lillicrap et al. 2016) with Gaussian instead of Ornstein-Uhlenbeck noise:
  a scalar critic trained by TD learning, Polyak-averaged targets (tau per learner step).
  """
  n_step: int = 1
  target_update_period: int = 1
  target_update_tau: float = 0.005
  sigma: float = 0.2
  # Huber threshold of the critic's TD loss (None: squared loss 0.5 * td^2).
  huber_delta: Optional[float] = None
