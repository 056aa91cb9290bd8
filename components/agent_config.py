"""The settings every agent's config shares, declared once (issue 38).

    AgentConfig            checks every field at construction (`config_checks.validate`)
      ActorSettings        what the actors and the variable client read: parameter pulls,
                           actor/evaluation precision, the replay table's name
        OffPolicySettings  + replay sizes, samples per insert, target network period
      EpsilonGreedySettings  the epsilon schedule of value-based agents' actors

DQN, R2D2 and the actor-critic agents (`dpg_common.ActorCriticConfig`) extend
`OffPolicySettings` (DQN and R2D2 also `EpsilonGreedySettings`); the on-policy agents (`onpolicy_common.OnPolicyConfig`) extend
`ActorSettings`. A subclass changes a default by re-declaring the field with a plain
default (it keeps the checks and, in `config_io.field_help`, the meaning declared here) and
may re-word a field's meaning in its own `Attributes:` (e.g. replay units: sequences).
The fields a builder reads are listed in `actorq.components.builders`.
"""
from __future__ import annotations

import dataclasses
from typing import Optional

from actorq.components import config_checks as checks


def replay_size_rule(unit: str) -> checks.Rule:
  """`min_replay_size <= max_replay_size`, worded for the table's items (`unit`:
  "transitions", "sequences")."""
  return checks.Rule("need min_replay_size <= max_replay_size (learning starts once the "
                     f"table holds min_replay_size {unit})",
                     lambda c: c.min_replay_size <= c.max_replay_size)


@dataclasses.dataclass
class AgentConfig:
  """Base of an agent's config: every field is checked at construction (type, finite,
  range, allowed values) and so are `RULES`, the relations between fields that could
  contradict each other (a subclass extends its parent's: `RULES = Parent.RULES + (...)`)."""

  RULES = ()

  def __post_init__(self):
    """Raises ValueError naming the field(s), the value(s) and what is allowed
    (`actorq.components.config_checks`); subclasses extend `RULES`."""
    checks.validate(self)


@dataclasses.dataclass
class ActorSettings(AgentConfig):
  """What an agent's actors and their variable client need.

  Attributes:
    variable_update_period: actor steps between two parameter pulls of an actor's
      variable client; >= 1.
    actor_precision: precision the actors act with: fp32, fp16, bf16, int8 (runtimes:
      `actorq.quantization.runtimes`) or a per-layer policy ``mixed:<choice>,...`` (one
      choice per parameter layer, e.g. ``mixed:int8,int8,fp32``). The learner is always
      fp32 (ActorQ, Lam et al. 2022).
    evaluation_precision: precision of the greedy evaluation episodes, as
      `actor_precision`; null: the same as the actors.
    replay_table_name: name of the Reverb table the actors write to and the learner
      reads from (non-empty).
  """
  variable_update_period: int = checks.field(10, ge=1)
  actor_precision: str = checks.precision_field("fp32")
  evaluation_precision: Optional[str] = checks.precision_field(None)
  replay_table_name: str = checks.field("priority_table", nonempty=True)

  def policy_precision(self, evaluation: bool) -> str:
    """The precision a policy acts at, resolved here for every builder:
    `evaluation_precision` (None: `actor_precision`) for evaluation, else
    `actor_precision`."""
    return (self.evaluation_precision or self.actor_precision) if evaluation \
        else self.actor_precision


@dataclasses.dataclass
class OffPolicySettings(ActorSettings):
  """`ActorSettings` plus the replay and target network of an off-policy learner.

  Attributes:
    min_replay_size: items (transitions, or the agent's replay unit) the table holds
      before the learner starts; <= max_replay_size.
    max_replay_size: capacity of the replay table (items); the oldest are evicted (FIFO).
    samples_per_insert: sampled items per inserted item (Reverb's rate limiter ratio): the
      learner takes one step every batch_size / samples_per_insert inserted items; > 0.
    target_update_period: learner steps between two target network updates; >= 1.
  """
  min_replay_size: int = checks.field(1_000, ge=1)
  max_replay_size: int = checks.field(1_000_000, ge=1)
  samples_per_insert: float = checks.field(64.0, gt=0.0)
  target_update_period: int = checks.field(100, ge=1)

  RULES = (replay_size_rule("transitions"),)


@dataclasses.dataclass
class EpsilonGreedySettings(AgentConfig):
  """The exploration of epsilon-greedy actors (Mnih et al. 2015): epsilon decays linearly
  from epsilon_start to epsilon_end over epsilon_decay_steps actor steps, then stays.

  Attributes:
    epsilon_start: exploration epsilon at actor step 0, in [0, 1].
    epsilon_end: epsilon after the decay, in [0, 1] and <= epsilon_start.
    epsilon_decay_steps: actor steps over which epsilon decays linearly, summed over the
      actors of a distributed run (each of N actors counts its own steps times N); >= 0.
  """
  epsilon_start: float = checks.field(1.0, ge=0.0, le=1.0)
  epsilon_end: float = checks.field(0.01, ge=0.0, le=1.0)
  epsilon_decay_steps: int = checks.field(20_000, ge=0)

  EPSILON_RULE = checks.Rule("need epsilon_end <= epsilon_start (epsilon decays)",
                             lambda c: c.epsilon_end <= c.epsilon_start)
  RULES = (EPSILON_RULE,)
