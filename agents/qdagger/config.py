"""QDagger configuration: DQN's fields (the student's) plus the teacher and the
distillation settings. Units as in `agents/dqn/config.py`: actor steps are environment
steps, learner steps are gradient updates."""
from __future__ import annotations

import dataclasses
from typing import Optional

from actorq.agents.dqn import config as dqn_config
from actorq.components import config_checks as checks


@dataclasses.dataclass
class QDaggerConfig(dqn_config.DQNConfig):
  """QDagger (Agarwal et al. 2022, "Reincarnating Reinforcement Learning", sec. 4.1 and
  Algorithm 1): a DQN student trained with its n-step TD loss plus a distillation term
  that pulls its softmax policy towards a trained teacher's, weighted by
  max(1 - student_return / teacher_return, 0) so that distillation fades as the student
  catches up (and stays off once it has); before acting, the student takes
  `offline_steps` updates on the teacher's replay (QDagger's offline phase).

  The student's network is this config's `hidden_sizes` (any size: `--set
  hidden_sizes=[64,64]`); its actors act at `actor_precision` from the first step (`int8`:
  a student trained for int8 actors). The teacher is a run directory of a DQN (or QDagger)
  run on the same environment: its newest readable checkpoint's fp32 policy parameters,
  its replay (a single-process run's) and its final evaluation return.

  Attributes:
    teacher: the teacher's run directory (required: `--set teacher=RUN_DIR`; null only
      in the defaults).
    temperature: tau of the softmax over Q-values on both sides of the distillation
      cross-entropy (CleanRL's qdagger_dqn: 1.0); > 0.
    offline_steps: learner updates on the teacher's replay before the first online one
      (QDagger's offline phase; 0: none; needs a teacher run with an in-process replay).
    teacher_return: the return the distillation weight compares with (null: the teacher
      run's last greedy evaluation in its eval.csv); > 0.
    coefficient_every: learner steps between two greedy evaluations of the student (fp32,
      on the teacher's environment, in the learner) that update the distillation weight.
    coefficient_episodes: greedy episodes per such evaluation; >= 1.
  """
  teacher: Optional[str] = checks.field(None, nonempty=True)
  temperature: float = checks.field(1.0, gt=0.0)
  offline_steps: int = checks.field(2_000, ge=0)
  teacher_return: Optional[float] = checks.field(None, gt=0.0)
  coefficient_every: int = checks.field(1_000, ge=1)
  coefficient_episodes: int = checks.field(3, ge=1)
