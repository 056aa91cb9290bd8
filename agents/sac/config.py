"""SAC configuration (units: see `actorq.agents.dpg_common.config`)."""
from __future__ import annotations

import dataclasses
import math

from actorq.agents.dpg_common.config import ActorCriticConfig
from actorq.components import config_checks as checks


@dataclasses.dataclass
class SACConfig(ActorCriticConfig):
  """SAC with a learned temperature (Haarnoja et al. 2018, "Soft Actor-Critic Algorithms
  and Applications"): a tanh-squashed Gaussian policy, twin critics with the clipped
  double-Q soft target, and the temperature alpha adjusted toward a target entropy.

  The defaults are the paper's (Table 1): 1-step returns, Adam 3e-4 for the policy,
  critics and temperature, batch 256, one learner step per actor step
  (`samples_per_insert = batch_size`), Polyak targets with tau 0.005 every learner step,
  target entropy -1 nat per action dimension (-|A|). Learning starts after
  `min_replay_size` transitions of the initial stochastic policy (no separate
  uniform-random phase).

  Attributes:
    initial_temperature: alpha at the start, the entropy bonus's weight (units: reward
      per nat); > 0.
    temperature_learning_rate: Adam's learning rate for log(alpha); > 0.
    target_entropy_per_dimension: the target entropy is |A| times this (nats per action
      dimension; -1: the paper's -|A|). Below log 2, the entropy of the uniform
      distribution on [-1, 1], which no squashed policy exceeds (a higher target would
      raise alpha without end).
  """
  # Inherited fields, at the paper's defaults (their checks and meanings are the base's):
  n_step: int = 1
  samples_per_insert: float = 256.0
  target_update_period: int = 1
  target_update_tau: float = 0.005
  # SAC's own:
  initial_temperature: float = checks.field(1.0, gt=0.0)
  temperature_learning_rate: float = checks.field(3e-4, gt=0.0)
  target_entropy_per_dimension: float = checks.field(-1.0, lt=math.log(2.0))
