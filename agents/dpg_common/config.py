"""Configuration shared by the off-policy actor-critic agents on transition replay.

`ActorCriticConfig`: networks, optimisers, replay, targets and actors of DDPG, D4PG, TD3
and SAC. `DPGConfig` adds what a deterministic policy needs (Gaussian exploration noise,
dQ/da clipping): DDPG, D4PG and TD3 extend it; SAC extends `ActorCriticConfig`.

Units per field: *actor steps* are environment steps (of a distributed run: summed over its
actors, as its step limit and the random warm-up count them); *learner steps* are gradient updates (one critic update and at most one policy update each)."""
from __future__ import annotations

import dataclasses
from typing import Optional, Tuple

from actorq.components import config_checks as checks


@dataclasses.dataclass
class ActorCriticConfig:
  """Settings of an actor-critic agent learning from n-step transitions.

  Acme's D4PG network details are on by default for all four agents (`critic_layer_norm`,
  `policy_output_init_scale`; chosen on D4PG: on dmc:cartpole-balance with 64x64 networks,
  seed 0, 15k steps, they end at 751 where the plain ReLU critic with Haiku's default policy
  head ends at 392, random actions ~331; see agents/d4pg/README.md for the seed aggregates).
  TD3 and SAC inherit them; SAC's near-zero head starts its Gaussian at mean 0, std 1.

  Every field is checked at construction (type, finite, range, allowed values) and so
  are `RULES`, the pairs of fields that could contradict each other.
  """
  policy_hidden_sizes: Tuple[int, ...] = checks.field((256, 256), ge=1)
  critic_hidden_sizes: Tuple[int, ...] = checks.field((256, 256), ge=1)
  # Acme's LayerNormMLP critic torso (linear -> LayerNorm -> tanh, then ELU layers)
  # instead of a ReLU MLP; see agents/dpg_common/networks.make_critic.
  critic_layer_norm: bool = True
  # Std of the policy's output-layer init as VarianceScaling(scale) (1e-4: Acme's
  # near-zero policy head, tanh starts unsaturated); None: Haiku's default.
  policy_output_init_scale: Optional[float] = checks.field(1e-4, gt=0.0)
  policy_learning_rate: float = checks.field(3e-4, gt=0.0)
  critic_learning_rate: float = checks.field(3e-4, gt=0.0)
  # Global-norm clip of each network's gradient.
  max_gradient_norm: float = checks.field(40.0, gt=0.0)
  discount: float = checks.field(0.99, ge=0.0, le=1.0)
  n_step: int = checks.field(5, ge=1)
  batch_size: int = checks.field(256, ge=1)
  # Replay (units: transitions).
  min_replay_size: int = checks.field(1_000, ge=1)
  max_replay_size: int = checks.field(1_000_000, ge=1)
  # Sampled transitions per inserted transition: one learner step every
  # batch_size / samples_per_insert actor steps.
  samples_per_insert: float = checks.field(64.0, gt=0.0)
  # Target networks: every `target_update_period` learner steps,
  # target <- tau * online + (1 - tau) * target. tau = 1 is a periodic hard copy
  # (exact: target == online right after learner steps K, 2K, ...); period 1 with a
  # small tau is Polyak averaging.
  target_update_period: int = checks.field(100, ge=1)
  target_update_tau: float = checks.field(1.0, gt=0.0, le=1.0)
  # Uniformly random actions for the run's first actor steps (TD3's pure-exploration start,
  # Fujimoto et al. 2018 sec. 6.1: 1000 on most tasks), then the policy (0: none); with N
  # distributed actors, each takes about random_warmup_steps / N of them.
  random_warmup_steps: int = checks.field(0, ge=0)
  # Actor steps between parameter pulls.
  variable_update_period: int = checks.field(10, ge=1)
  # Precision the actors act with: fp32, fp16, bf16, int8 (see quantization.runtimes).
  actor_precision: str = checks.precision_field("fp32")
  # None: same as the actors.
  evaluation_precision: Optional[str] = checks.precision_field(None)
  # Quantization-aware training: fake-quant the policy's weights (bits) or None.
  qat_bits: Optional[int] = checks.field(None, ge=2, le=8)
  replay_table_name: str = checks.field("priority_table", nonempty=True)

  RULES = (
      checks.Rule("need min_replay_size <= max_replay_size (learning starts once the "
                  "table holds min_replay_size transitions)",
                  lambda c: c.min_replay_size <= c.max_replay_size),
      checks.Rule("critic_layer_norm needs at least one critic hidden layer "
                  "(critic_hidden_sizes)",
                  lambda c: not c.critic_layer_norm or len(c.critic_hidden_sizes) > 0),
  )

  def __post_init__(self):
    """Raises ValueError naming the field(s), the value(s) and what is allowed
    (`actorq.components.config_checks`); subclasses extend `RULES`."""
    checks.validate(self)


@dataclasses.dataclass
class DPGConfig(ActorCriticConfig):
  """Deterministic policy gradient agent settings (Lillicrap et al. 2016)."""
  # Gaussian exploration noise, std in units of half the action range (= units of the
  # policy's tanh output; see actorq.components.acting.continuous).
  sigma: float = checks.field(0.3, ge=0.0)
  # Clip dQ/da per sample to this L2 norm in the policy loss (None: no clip).
  dqda_clipping: Optional[float] = checks.field(None, gt=0.0)
  # lambda of the policy loss's penalty lambda * mean_b sum_i z_bi^2 on the pre-tanh
  # outputs z (u = tanh(z)): "to prevent tanh saturation and vanishing gradients"
  # (Andrychowicz et al. 2017, "Hindsight Experience Replay", appendix A, coefficient 1).
  # A saturated policy (|u| = 1 everywhere) gets no gradient through tanh; this term's
  # gradient 2 lambda z pulls it back. 0: off (the default).
  preactivation_penalty: float = checks.field(0.0, ge=0.0)
