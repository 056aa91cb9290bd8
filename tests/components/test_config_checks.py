"""Every agent config validates every field at construction (issue 18): the one
declarative mechanism (`components/config_checks.py`), and each config's fields and
contradicting pairs with the exact one-line message."""
import dataclasses
import importlib.util
import math
import os
import sys
import typing
from typing import Optional, Tuple

import pytest

from actorq.components import config_checks as checks
from actorq.components import config_io
from actorq.agents import registry

_EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "expected_sarsa.py")


def _example_config():
  if "expected_sarsa" not in sys.modules:
    spec = importlib.util.spec_from_file_location("expected_sarsa", _EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    sys.modules["expected_sarsa"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
  return sys.modules["expected_sarsa"].Config


def _all_configs():
  return [registry.get(name)[0] for name in registry.names()] + [_example_config()]


@dataclasses.dataclass
class _Base:
  size: int = checks.field(4, ge=1)
  rate: float = checks.field(0.5, gt=0.0, le=1.0)
  widths: Tuple[int, ...] = checks.field((8,), ge=1)
  mode: str = checks.field("a", choices=("a", "b"))
  bits: Optional[int] = checks.field(None, ge=2, le=8)
  flag: bool = False
  low: int = checks.field(1, ge=0)
  high: int = checks.field(2, ge=0)

  RULES = (checks.Rule("need low <= high", lambda c: c.low <= c.high),)

  def __post_init__(self):
    checks.validate(self)


@dataclasses.dataclass
class _Child(_Base):
  size: int = 16  # a plain re-declared default keeps the parent's check
  extra: float = checks.field(1.0)

  RULES = _Base.RULES + (checks.Rule("need size > extra", lambda c: c.size > c.extra),)


@pytest.mark.parametrize("kwargs,message", [
    ({"size": 0}, "_Base.size must be >= 1, got 0"),
    ({"size": 2.0}, "_Base.size must be an integer, got 2.0"),
    ({"size": True}, "_Base.size must be an integer, got True"),
    ({"rate": 0.0}, "_Base.rate must be in (0, 1], got 0.0"),
    ({"rate": math.nan}, "_Base.rate must be a finite number in (0, 1], got nan"),
    ({"rate": -math.inf}, "_Base.rate must be a finite number in (0, 1], got -inf"),
    ({"rate": "fast"}, "_Base.rate must be a number, got 'fast'"),
    ({"widths": (8, 0)}, "_Base.widths must be a list of integers >= 1, got [8, 0]"),
    ({"widths": 8}, "_Base.widths must be a list of integers >= 1, got 8"),
    ({"widths": (8, "x")}, "_Base.widths must be a list of integers >= 1, got [8, 'x']"),
    ({"mode": "c"}, "_Base.mode must be one of a, b; got 'c'"),
    ({"bits": 9}, "_Base.bits must be in [2, 8] (or null), got 9"),
    ({"bits": "8"}, "_Base.bits must be an integer (or null), got '8'"),
    ({"flag": 1}, "_Base.flag must be true or false, got 1"),
    ({"low": 3, "high": 2}, "_Base: need low <= high; got low=3, high=2"),
])
def test_each_kind_of_bad_value_is_one_line_naming_field_value_and_allowed(kwargs, message):
  with pytest.raises(ValueError) as e:
    _Base(**kwargs)
  assert str(e.value) == message


def test_good_values_pass_and_ints_are_numbers_for_float_fields():
  config = _Base(size=1, rate=1, widths=[3, 4], mode="b", bits=8, flag=True, low=0, high=0)
  assert config.rate == 1 and config.widths == [3, 4]
  assert _Base(bits=None).bits is None


def test_a_redeclared_default_keeps_the_parents_check_and_rules_accumulate():
  assert _Child().size == 16
  with pytest.raises(ValueError, match=r"^_Child.size must be >= 1, got 0$"):
    _Child(size=0, extra=-1.0)
  with pytest.raises(ValueError, match=r"^_Child: need low <= high; got low=5, high=1$"):
    _Child(low=5, high=1)
  with pytest.raises(ValueError, match=r"^_Child: need size > extra; got size=16, extra=20.0$"):
    _Child(extra=20.0)


def test_an_annotation_it_cannot_check_is_a_type_error_of_the_class():
  @dataclasses.dataclass
  class _Odd:
    value: dict = dataclasses.field(default_factory=dict)

    def __post_init__(self):
      checks.validate(self)

  with pytest.raises(TypeError, match="cannot check a field of type"):
    _Odd()


@pytest.mark.parametrize("config_cls", _all_configs(), ids=lambda c: c.__name__)
def test_every_field_of_every_agent_config_is_declared_checked(config_cls):
  """A number, string or list field without bounds or allowed values would let any value
  through: every field is a bool or has a declared check (booleans need none)."""
  hints = typing.get_type_hints(config_cls)
  unchecked = []
  for f in dataclasses.fields(config_cls):
    check = checks.check_of(config_cls, f.name)
    base = [a for a in typing.get_args(hints[f.name]) if a is not type(None)] or [hints[f.name]]
    if base[0] is bool:
      continue
    if check is None or not (check.bounds() or check.choices or check.nonempty):
      unchecked.append(f.name)
  assert unchecked == []
  defaults = config_cls()
  assert config_io.from_dict(config_cls, config_io.to_dict(defaults)) == defaults


_MIN_MAX = ("need min_replay_size <= max_replay_size (learning starts once the table holds "
            "min_replay_size transitions); got min_replay_size=1000, max_replay_size=500")
_QUEUE = ("need batch_size <= max_queue_size (a learner step takes batch_size rollouts from a "
          "queue that holds at most max_queue_size); got batch_size=65, max_queue_size=64")


@pytest.mark.parametrize("agent,values,message", [
    # B2: a replay that can never start learning, for every transition agent.
    ("dqn", {"min_replay_size": 1000, "max_replay_size": 500}, "DQNConfig: " + _MIN_MAX),
    ("d4pg", {"min_replay_size": 1000, "max_replay_size": 500}, "D4PGConfig: " + _MIN_MAX),
    ("ddpg", {"min_replay_size": 1000, "max_replay_size": 500}, "DDPGConfig: " + _MIN_MAX),
    ("dqn", {"epsilon_start": 0.1, "epsilon_end": 0.5},
     "DQNConfig: need epsilon_end <= epsilon_start (epsilon decays); got epsilon_end=0.5, "
     "epsilon_start=0.1"),
    ("dqn", {"target_update_period": 0}, "DQNConfig.target_update_period must be >= 1, got 0"),
    ("dqn", {"n_step": 0}, "DQNConfig.n_step must be >= 1, got 0"),
    ("dqn", {"qat_bits": 1}, "DQNConfig.qat_bits must be in [2, 8] (or null), got 1"),
    ("dqn", {"learning_rate_decay_steps": 0},
     "DQNConfig.learning_rate_decay_steps must be >= 1 (or null), got 0"),
    ("dqn", {"final_learning_rate_fraction": 1.5},
     "DQNConfig.final_learning_rate_fraction must be in [0, 1], got 1.5"),
    ("dqn", {"actor_precision": "int4"},
     "DQNConfig.actor_precision must be one of fp32, fp16, bf16, int8, litert-fp32 or mixed:<choice>,... "
     "(one per layer, e.g. mixed:fp16,int8,int8); got 'int4'"),
    ("dqn", {"evaluation_precision": "fp8"},
     "DQNConfig.evaluation_precision must be one of fp32, fp16, bf16, int8, litert-fp32 or "
     "mixed:<choice>,... (one per layer, e.g. mixed:fp16,int8,int8) (or null); got 'fp8'"),
    ("sac", {"actor_precision": "mixed:fp16,int9"},
     "SACConfig.actor_precision: precision choice 'int9' not understood; allowed: fp32, fp16, "
     "bf16, int2..int8, optionally /tensor and +p<sparsity>, e.g. int4/tensor+p0.5"),
    # R2D2's recurrent runtime takes per-layer names too; their labels are checked here.
    ("r2d2", {"actor_precision": "int4"},
     "R2D2Config.actor_precision must be one of fp32, fp16, bf16, int8, litert-fp32 or mixed:<choice>,... "
     "(one per layer, e.g. mixed:fp16,int8,int8); got 'int4'"),
    ("r2d2", {"evaluation_precision": "mixed:int8,int9,fp32"},
     "R2D2Config.evaluation_precision: precision choice 'int9' not understood; allowed: fp32, "
     "fp16, bf16, int2..int8, optionally /tensor and +p<sparsity>, e.g. int4/tensor+p0.5"),
    # A -inf support bound made NaN atoms; now it is refused at construction.
    ("d4pg", {"vmin": -math.inf}, "D4PGConfig.vmin must be a finite number in "
                                  "[-1e+30, 1e+30], got -inf"),
    ("d4pg", {"vmin": 5.0, "vmax": 5.0},
     "D4PGConfig: need vmin < vmax (the critic's support); got vmin=5.0, vmax=5.0"),
    ("ddpg", {"target_update_tau": 0.0}, "DDPGConfig.target_update_tau must be in (0, 1], got 0.0"),
    ("ddpg", {"huber_delta": 0.0}, "DDPGConfig.huber_delta must be > 0 (or null), got 0.0"),
    ("ddpg", {"sigma": math.nan}, "DDPGConfig.sigma must be a finite number >= 0, got nan"),
    ("ppo", {"minibatch_size": 600},
     "PPOConfig: need minibatch_size <= batch_size * rollout_length (a minibatch is drawn from "
     "the batch_size * rollout_length transitions of a learner step); got minibatch_size=600, "
     "batch_size=4, rollout_length=128"),
    ("ppo", {"batch_size": 65}, "PPOConfig: " + _QUEUE),
    ("a2c", {"batch_size": 65}, "A2CConfig: " + _QUEUE),
    ("impala", {"batch_size": 65}, "IMPALAConfig: " + _QUEUE),
    ("a2c", {"activation": "gelu"}, "A2CConfig.activation must be one of tanh, relu; got 'gelu'"),
    ("impala", {"clip_pg_rho_threshold": -1.0},
     "IMPALAConfig.clip_pg_rho_threshold must be > 0, got -1.0"),
    ("ppo", {"initial_log_std": 3.0}, "PPOConfig.initial_log_std must be in [-5, 2], got 3.0"),
    ("ppo", {"policy_hidden": [64, 0]}, "PPOConfig.policy_hidden must be a list of integers "
                                        ">= 1, got [64, 0]"),
])
def test_agent_configs_refuse_bad_fields_and_contradicting_pairs(agent, values, message):
  config_cls = registry.get(agent)[0]
  with pytest.raises(ValueError) as e:
    config_io.from_dict(config_cls, values)
  assert str(e.value) == message
  assert "\n" not in message


@pytest.mark.parametrize("agent", ["dqn", "ddpg", "d4pg", "sac", "td3", "ppo", "a2c", "impala"])
def test_feed_forward_agents_take_a_per_layer_precision_name(agent):
  config_cls = registry.get(agent)[0]
  config = config_io.from_dict(config_cls, {"actor_precision": "mixed:fp16,int4+p0.5,int8",
                                            "evaluation_precision": "mixed:int8,int8,fp32"})
  assert config.actor_precision == "mixed:fp16,int4+p0.5,int8"


def test_example_config_is_checked_too():
  config_cls = _example_config()
  with pytest.raises(ValueError, match=r"^Config: need min_replay_size <= max_replay_size; "
                                       r"got min_replay_size=10, max_replay_size=5$"):
    config_cls(min_replay_size=10, max_replay_size=5)
  with pytest.raises(ValueError, match=r"^Config.epsilon must be in \[0, 1\], got 2.0$"):
    config_cls(epsilon=2.0)
