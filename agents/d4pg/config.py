"""D4PG configuration (units: see `actorq.agents.dpg_common.config`)."""
from __future__ import annotations

import dataclasses

from actorq.agents.dpg_common.config import DPGConfig
from actorq.components import config_checks as checks

SUPPORT_LIMIT = 1e30  # |vmin|, |vmax| bound: float32 holds up to ~3.4e38


@dataclasses.dataclass
class D4PGConfig(DPGConfig):
  """D4PG (Barth-Maron et al. 2018): a categorical critic over `num_atoms` evenly spaced
  returns in [vmin, vmax] (units: discounted return), n-step transitions, Gaussian
  exploration, periodic hard target copies (every `target_update_period` learner steps).

  vmin/vmax must cover the task's discounted returns: dmc tasks give rewards in [0, 1],
  so with discount 0.99 returns lie in [0, 100].

  Attributes:
    num_atoms: atoms of the critic's categorical distribution (Bellemare et al. 2017's
      51); >= 2.
    vmin: the lowest atom (discounted return); finite and |vmin| <= 1e30 (the atoms are
      float32: an infinite or huge bound would make inf/NaN atoms); < vmax.
    vmax: the highest atom (discounted return), as vmin; > vmin.
  """
  num_atoms: int = checks.field(51, ge=2)
  vmin: float = checks.field(-150.0, ge=-SUPPORT_LIMIT, le=SUPPORT_LIMIT)
  vmax: float = checks.field(150.0, ge=-SUPPORT_LIMIT, le=SUPPORT_LIMIT)

  RULES = DPGConfig.RULES + (
      checks.Rule("need vmin < vmax (the critic's support)", lambda c: c.vmin < c.vmax),)
