"""R2D2 configuration. Units are given per field: actor steps are environment steps (of a
distributed run: summed over its actors, as its step limit and exploration schedule count
them); learner steps are gradient updates; a sequence is one replay item of
`burn_in_length + trace_length + 1` consecutive steps of one episode."""
from __future__ import annotations

import dataclasses
from typing import Tuple

from actorq.components import agent_config
from actorq.components import config_checks as checks


@dataclasses.dataclass
class R2D2Config(agent_config.OffPolicySettings, agent_config.EpsilonGreedySettings):
  """R2D2: recurrent experience replay (Kapturowski et al. 2019, "Recurrent Experience
  Replay in Distributed Reinforcement Learning", ICLR).

  * Network: MLP torso (ReLU) -> `haiku.LSTM(lstm_size)` -> linear head, dueling
    (Wang et al. 2016) when `dueling`. Actors keep the LSTM state (h, c), float32 [H]
    each, zeroed at every episode's first step.
  * Replay: acme's `SequenceAdder` writes sequences of L = burn_in_length +
    trace_length + 1 steps every `sequence_period` steps (consecutive sequences overlap
    by L - sequence_period steps), zero-padded after an episode's end; every step
    carries the actor's LSTM state *before* that step as an extra, and the learner
    starts each sequence from its first step's stored state (the paper's "stored state").
  * Burn-in (section 3): the first `burn_in_length` steps are unrolled from the stored
    state without gradient (`jax.lax.stop_gradient` on their outputs and on the state
    they end in); the loss covers the remaining transitions, masked after the episode's
    end (acme's terminal step and the zero padding).
  * Targets (section 2, "value function rescaling"; Pohlen et al. 2018): n-step double-Q
    y_t = h(sum_{k<n} gamma^k r_{t+k} + gamma^n h^-1(Q(s_{t+n}, a*; theta^-))),
    a* = argmax_a Q(s_{t+n}, a; theta), h(x) = sign(x)(sqrt(|x| + 1) - 1) + eps x
    (`rlax.signed_hyperbolic`, inverse `rlax.signed_parabolic`), eps =
    `value_rescaling_epsilon`; the n-step window stops at the episode's last real
    transition (a time-limit end bootstraps from the final observation).
  * Loss: per sequence 0.5 * mean over the unmasked transitions of (y_t - Q(s_t, a_t))^2,
    weighted by prioritized replay's importance-sampling weights
    w_i = (N P(i))^-beta / max_j w_j with beta = `importance_sampling_exponent`.
  * Priorities (section 2): p = eta max_t |delta_t| + (1 - eta) mean_t |delta_t| over the
    unmasked transitions, eta = `max_priority_weight`, written back after every learner
    step; P(i) = p_i^alpha / sum_k p_k^alpha, alpha = `priority_exponent`. New sequences
    enter with priority 1.0 (the paper's actors compute an initial priority; these
    actors do not).
  * Actors at `actor_precision` "int8": the torso, the LSTM's gate matmul
    ([x_t, h_{t-1}] @ W, W [F + H, 4H]) and the head run LiteRT's dynamic-range int8
    kernels (int8 weights, per-channel scales); the LSTM cell's elementwise update
    (sigmoid/tanh, c_t, h_t) and the recurrent state stay float32
    (`actorq.quantization.runtimes.recurrent`). The learner is float32 throughout. A
    per-layer policy's ``"mixed:<choice>,..."`` name gives each parameter layer its own
    precision, in the order torso layers, gate matmul, head (``"mixed:int8,int8,fp32"``:
    int8 torso and gate matmul, float32 head; see the README for why and what it costs).

  Defaults are small, for (partially observable) CartPole (`gym:CartPole-v1-po`, which
  hides the velocities); the paper's Atari values are in the comments. Every field is
  checked at construction (type, finite, range, allowed values) and so are `RULES`.

  Attributes:
    torso_sizes: widths of the MLP torso's layers (ReLU after each) before the LSTM,
      each >= 1.
    lstm_size: H, the LSTM's hidden size (paper: 512); >= 1.
    dueling: a dueling head (Wang et al. 2016) on the LSTM output; false: a plain Q head.
    burn_in_length: steps unrolled from the stored state without gradient before the
      loss's transitions (paper: 40); >= 0.
    trace_length: steps of a sequence that carry the loss (paper: 80); >= 1.
    sequence_period: steps between the starts of two consecutive sequences (paper: 40);
      >= 1 and <= burn_in_length + trace_length + 1.
    n_step: steps summed in each n-step target (paper: 5); >= 1 and <= trace_length.
    discount: per-step discount gamma (paper: 0.997), in [0, 1].
    value_rescaling_epsilon: eps of the value rescaling h (paper: 1e-3); >= 0.
    learning_rate: Adam's learning rate (paper: 1e-4); > 0.
    adam_eps: Adam's epsilon (paper: 1e-3); > 0.
    max_gradient_norm: global-norm clip of the gradient; > 0.
    batch_size: sequences per learner step (paper: 64); >= 1.
    target_update_period: learner steps between two copies online -> target (paper:
      2500); >= 1.
    min_replay_size: sequences the table holds before the learner starts; <=
      max_replay_size.
    max_replay_size: capacity of the replay table (sequences); the oldest are evicted.
    samples_per_insert: sampled sequences per inserted sequence: one learner step per
      batch_size / samples_per_insert sequences written (64: one per half sequence, ~every
      4-5 actor steps on CartPole; 16 learned nothing in 40k steps on seed 0, see
      README); > 0.
    priority_exponent: alpha of prioritized replay (paper: 0.9); >= 0.
    importance_sampling_exponent: beta of the importance-sampling weights (paper: 0.6), in
      [0, 1].
    max_priority_weight: eta, the weight of the max in a sequence's priority (paper:
      0.9), in [0, 1].
    epsilon_end: epsilon after the decay, in [0, 1] and <= epsilon_start (the paper gives
      each of its 256 actors a fixed epsilon instead).
    variable_update_period: actor steps between two parameter pulls of an actor (paper:
      400); >= 1.
    actor_precision: precision the actors act with: fp32, fp16, bf16, int8 or a
      ``mixed:<choice>,...`` name (one choice per parameter layer in the order torso
      layers, gate matmul, head; see above).
  """
  torso_sizes: Tuple[int, ...] = checks.field((64,), ge=1)
  lstm_size: int = checks.field(64, ge=1)
  dueling: bool = checks.field(True)
  burn_in_length: int = checks.field(8, ge=0)
  trace_length: int = checks.field(16, ge=1)
  sequence_period: int = checks.field(8, ge=1)
  n_step: int = checks.field(5, ge=1)
  discount: float = checks.field(0.99, ge=0.0, le=1.0)
  value_rescaling_epsilon: float = checks.field(1e-3, ge=0.0)
  learning_rate: float = checks.field(1e-3, gt=0.0)
  adam_eps: float = checks.field(1e-3, gt=0.0)
  max_gradient_norm: float = checks.field(10.0, gt=0.0)
  batch_size: int = checks.field(32, ge=1)
  target_update_period: int = 200
  min_replay_size: int = 100
  max_replay_size: int = 10_000
  priority_exponent: float = checks.field(0.9, ge=0.0)
  importance_sampling_exponent: float = checks.field(0.6, ge=0.0, le=1.0)
  max_priority_weight: float = checks.field(0.9, ge=0.0, le=1.0)
  replay_table_name: str = "r2d2_sequences"
  epsilon_decay_steps: int = 10_000

  RULES = (
      agent_config.replay_size_rule("sequences"),
      agent_config.EpsilonGreedySettings.EPSILON_RULE,
      checks.Rule("need n_step <= trace_length (an n-step target bootstraps inside the "
                  "sequence)", lambda c: c.n_step <= c.trace_length),
      checks.Rule("need sequence_period <= burn_in_length + trace_length + 1 (the "
                  "sequence length; a longer period would skip steps)",
                  lambda c: c.sequence_period <= c.burn_in_length + c.trace_length + 1),
  )

  @property
  def sequence_length(self) -> int:
    """L = burn_in_length + trace_length + 1 steps per replay item."""
    return self.burn_in_length + self.trace_length + 1
