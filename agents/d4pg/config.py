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
  """
  num_atoms: int = checks.field(51, ge=2)
  # Finite and well inside float32's range (the atoms are float32; an infinite or huge
  # bound would make inf/NaN atoms).
  vmin: float = checks.field(-150.0, ge=-SUPPORT_LIMIT, le=SUPPORT_LIMIT)
  vmax: float = checks.field(150.0, ge=-SUPPORT_LIMIT, le=SUPPORT_LIMIT)

  RULES = DPGConfig.RULES + (
      checks.Rule("need vmin < vmax (the critic's support)", lambda c: c.vmin < c.vmax),)
