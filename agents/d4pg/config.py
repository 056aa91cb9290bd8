"""D4PG configuration (units: see `actorq.agents.dpg_common.config`)."""
from __future__ import annotations

import dataclasses

from actorq.agents.dpg_common.config import DPGConfig


@dataclasses.dataclass
class D4PGConfig(DPGConfig):
  """D4PG (Barth-Maron et al. 2018): a categorical critic over `num_atoms` evenly spaced
  returns in [vmin, vmax] (units: discounted return), n-step transitions, Gaussian
  exploration, periodic hard target copies (every `target_update_period` learner steps).

  vmin/vmax must cover the task's discounted returns: dmc tasks give rewards in [0, 1],
  so with discount 0.99 returns lie in [0, 100].
  """
  num_atoms: int = 51
  vmin: float = -150.0
  vmax: float = 150.0

  def __post_init__(self):
    super().__post_init__()
    if self.num_atoms < 2:
      raise ValueError(f"num_atoms must be >= 2, got {self.num_atoms}")
    if not self.vmin < self.vmax:
      raise ValueError(f"need vmin < vmax, got {self.vmin} and {self.vmax}")
