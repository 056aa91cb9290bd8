"""Configuration shared by the off-policy actor-critic agents on transition replay.

`ActorCriticConfig`: networks, optimisers, replay, targets and actors of DDPG, D4PG, TD3
and SAC. `DPGConfig` adds what a deterministic policy needs (Gaussian exploration noise,
dQ/da clipping): DDPG, D4PG and TD3 extend it; SAC extends `ActorCriticConfig`.

Units per field: *actor steps* are environment steps (of a distributed run: summed over its
actors, as its step limit and the random warm-up count them); *learner steps* are gradient updates (one critic update and at most one policy update each)."""
from __future__ import annotations

import dataclasses
from typing import Optional, Tuple

from actorq.components import agent_config
from actorq.components import config_checks as checks


@dataclasses.dataclass
class ActorCriticConfig(agent_config.OffPolicySettings):
  """Settings of an actor-critic agent learning from n-step transitions.

  Acme's D4PG network details are on by default for all four agents (`critic_layer_norm`,
  `policy_output_init_scale`; chosen on D4PG: on dmc:cartpole-balance with 64x64 networks,
  seed 0, 15k steps, they end at 751 where the plain ReLU critic with Haiku's default policy
  head ends at 392, random actions ~331; see agents/d4pg/README.md for the seed aggregates).
  TD3 and SAC inherit them; SAC's near-zero head starts its Gaussian at mean 0, std 1.

  Every field is checked at construction (type, finite, range, allowed values) and so
  are `RULES`, the pairs of fields that could contradict each other. Replay items are
  n-step transitions.

  Attributes:
    policy_hidden_sizes: widths of the policy network's hidden layers, each >= 1.
    critic_hidden_sizes: widths of the critic network's hidden layers, each >= 1.
    critic_layer_norm: Acme's LayerNormMLP critic torso (linear -> LayerNorm -> tanh,
      then ELU layers) instead of a ReLU MLP (see `dpg_common.networks.make_critic`).
    policy_output_init_scale: the policy's output layer is initialised by
      VarianceScaling(scale) (1e-4: Acme's near-zero head, tanh starts unsaturated);
      > 0, or null: Haiku's default.
    policy_learning_rate: Adam's learning rate of the policy; > 0.
    critic_learning_rate: Adam's learning rate of the critic(s); > 0.
    max_gradient_norm: global-norm clip of each network's gradient; > 0.
    discount: per-step discount gamma of the return, in [0, 1].
    n_step: steps summed in each n-step return; >= 1.
    batch_size: transitions per learner step; >= 1.
    samples_per_insert: sampled transitions per inserted transition: one learner step
      every batch_size / samples_per_insert actor steps; > 0.
    target_update_period: learner steps K between two target updates target <- tau *
      online + (1 - tau) * target; >= 1. tau = 1 is a periodic hard copy (target ==
      online right after learner steps K, 2K, ...); K = 1 with a small tau is Polyak
      averaging (Lillicrap et al. 2016).
    target_update_tau: tau of the target update, in (0, 1].
    random_warmup_steps: the run's first actor steps take uniformly random actions, then
      the policy (TD3's pure-exploration start, Fujimoto et al. 2018 sec. 6.1: 1000 on
      most tasks; 0: none); with N distributed actors, each takes about
      random_warmup_steps / N of them. >= 0.
    qat_bits: quantization-aware training: fake-quantize the policy's weights to this
      many bits in the learner's forward pass (2 to 8), or null (off).
  """
  policy_hidden_sizes: Tuple[int, ...] = checks.field((256, 256), ge=1)
  critic_hidden_sizes: Tuple[int, ...] = checks.field((256, 256), ge=1)
  critic_layer_norm: bool = True
  policy_output_init_scale: Optional[float] = checks.field(1e-4, gt=0.0)
  policy_learning_rate: float = checks.field(3e-4, gt=0.0)
  critic_learning_rate: float = checks.field(3e-4, gt=0.0)
  max_gradient_norm: float = checks.field(40.0, gt=0.0)
  discount: float = checks.field(0.99, ge=0.0, le=1.0)
  n_step: int = checks.field(5, ge=1)
  batch_size: int = checks.field(256, ge=1)
  target_update_tau: float = checks.field(1.0, gt=0.0, le=1.0)
  random_warmup_steps: int = checks.field(0, ge=0)
  qat_bits: Optional[int] = checks.field(None, ge=2, le=8)

  RULES = agent_config.OffPolicySettings.RULES + (
      checks.Rule("critic_layer_norm needs at least one critic hidden layer "
                  "(critic_hidden_sizes)",
                  lambda c: not c.critic_layer_norm or len(c.critic_hidden_sizes) > 0),
  )


@dataclasses.dataclass
class DPGConfig(ActorCriticConfig):
  """Deterministic policy gradient agent settings (Lillicrap et al. 2016).

  Attributes:
    sigma: std of the Gaussian exploration noise added to the actors' actions, in units
      of half the action range (= units of the policy's tanh output; see
      `actorq.components.acting.continuous`); >= 0.
    dqda_clipping: clip dQ/da per sample to this L2 norm in the policy loss (> 0), or
      null: no clip.
    preactivation_penalty: lambda of the policy loss's penalty lambda * mean_b sum_i
      z_bi^2 on the pre-tanh outputs z (u = tanh(z)), "to prevent tanh saturation and
      vanishing gradients" (Andrychowicz et al. 2017, "Hindsight Experience Replay",
      appendix A, coefficient 1): a saturated policy gets no gradient through tanh, this
      term's gradient 2 lambda z pulls it back. 0: off (the default); >= 0.
  """
  sigma: float = checks.field(0.3, ge=0.0)
  dqda_clipping: Optional[float] = checks.field(None, gt=0.0)
  preactivation_penalty: float = checks.field(0.0, ge=0.0)
