"""TD3 configuration (units: see `actorq.agents.dpg_common.config`)."""
from __future__ import annotations

import dataclasses

from actorq.agents.dpg_common.config import DPGConfig
from actorq.components import config_checks as checks


@dataclasses.dataclass
class TD3Config(DPGConfig):
  """TD3 (Fujimoto et al. 2018): twin critics with the clipped double-Q target, delayed
  policy (and target) updates, target policy smoothing.

  The defaults are the paper's (sec. 6.1 / Algorithm 1) but for the n-step return: Adam 3e-4 for
  both networks, batch 256 (the authors' code; the paper used 100), one learner step per
  actor step (`samples_per_insert = batch_size`), Polyak targets with tau 0.005 updated
  with the policy every `policy_delay = 2` learner steps, exploration noise 0.1 and target
  noise 0.2 clipped to 0.5 (units: half the action range, i.e. the tanh output's units).
  Like the paper, the run's first `random_warmup_steps = 1000` actions (summed over a
  distributed run's actors) are uniformly random ("the first 1000 time steps for the remaining environments", sec. 6.1); learning
  starts after `min_replay_size = 1000` transitions, i.e. on the random ones.

  3-step returns instead of the paper's 1-step, and the random warm-up, both against the
  same failure on `gym:Pendulum-v1`: the policy's tanh saturates in the first learner
  steps and the greedy return stays flat. 1-step without warm-up (seed 0): saturated within
  ~1,700 learner steps (policy gradient norm 1.5e-4, then 1e-7), -1348 up to 20k actor
  steps; discount 0.98 alone did not help (-1569 at 3k); 3-step returns reached -274 at 3k.
  3-step without warm-up still failed on 1 seed in 5 (seed 4: -1426 flat at both
  precisions); with the warm-up that seed reaches -122 at 6k (agents/td3/README.md).

  Attributes:
    policy_delay: d: the policy and the targets change on learner steps d, 2d, ...
      (sec. 5.2, delayed policy updates); >= 1.
    target_noise_sigma: std of the target policy smoothing noise N(0, sigma^2) added to
      the target action (eq. 14; units: half the action range; 0: none); >= 0.
    target_noise_clip: the smoothing noise is clipped to +-this (units: half the action
      range); >= 0.
  """
  # Inherited fields, at the defaults above (their checks and meanings are the base's):
  n_step: int = 3
  random_warmup_steps: int = 1_000
  samples_per_insert: float = 256.0
  target_update_period: int = 2
  target_update_tau: float = 0.005
  sigma: float = 0.1
  # TD3's own:
  policy_delay: int = checks.field(2, ge=1)
  target_noise_sigma: float = checks.field(0.2, ge=0.0)
  target_noise_clip: float = checks.field(0.5, ge=0.0)
