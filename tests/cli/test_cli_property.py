"""Property: any `--set` values for any agent's config fields either run or are refused by
`actorq train` in one line with exit status 2 and no run directory (issue 18).

Hypothesis draws (fixed seed and example budgets, `derandomize=True`):

* `test_any_set_values_are_accepted_or_refused_in_one_line`: 1-3 fields of any agent's
  config, each set to a value of any kind (integers, floats with NaN and +-inf, booleans,
  null, strings, lists, the field's allowed strings), through `actorq train --dry-run`
  (cheap: the config and the agent's networks are built, nothing runs). The exit status
  is 0 exactly when the config accepts the values, else 2 with the config's own one-line
  message; no run directory either way.
* `test_accepted_set_values_train_with_actions_in_the_space`: values drawn inside each
  field's declared checks (`components/config_checks`; the cross-field rules may still
  refuse a combination), through a 100-step `actorq train` on an environment that records
  every action it receives: exit 0 with every action inside the action space and every
  logged number and policy parameter finite, or exit 2 in one line with no run
  directory, or (a drawn learning rate can diverge) exit 1 with the one-line
  non-finite error (a loss, or a policy output). Training is the expensive draw: 6
  examples, marked slow.
"""
import csv
import dataclasses
import json
import math
import typing

import gymnasium
import jax
import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from actorq.cli import main as cli
from actorq.components import config_checks, config_io
from actorq.components import checkpointing
from actorq.agents import registry
from actorq.testing.cli import run_cli

# QDagger's student needs a teacher run (tests/agents/test_qdagger.py trains one).
AGENTS = [a for a in registry.names() if a != "qdagger"]
CONTINUOUS = ("d4pg", "ddpg", "td3", "sac")
# Multi-agent agents (issue 44) run on a multi-agent id; their training is tested in
# tests/agents/test_ippo.py, test_mappo.py and test_idqn.py, so the trained property below
# draws the single-agent agents (whose actions the recording Gymnasium environments check).
MULTI_AGENT = ("idqn", "ippo", "mappo")
SINGLE_AGENT = [a for a in AGENTS if a not in MULTI_AGENT]
# Base settings that keep a run small; drawn values replace them.
SMALL = {"dqn": {"hidden_sizes": [16], "min_replay_size": 32, "batch_size": 8},
         "d4pg": {"policy_hidden_sizes": [16], "critic_hidden_sizes": [16], "num_atoms": 11,
                  "min_replay_size": 32, "batch_size": 8},
         "ddpg": {"policy_hidden_sizes": [16], "critic_hidden_sizes": [16],
                  "min_replay_size": 32, "batch_size": 8},
         "td3": {"policy_hidden_sizes": [16], "critic_hidden_sizes": [16],
                 "min_replay_size": 32, "batch_size": 8, "samples_per_insert": 8.0},
         "sac": {"policy_hidden_sizes": [16], "critic_hidden_sizes": [16],
                 "min_replay_size": 32, "batch_size": 8, "samples_per_insert": 8.0},
         "ppo": {"policy_hidden": [16], "value_hidden": [16], "rollout_length": 16,
                 "batch_size": 2, "minibatch_size": 16},
         "a2c": {"policy_hidden": [16], "value_hidden": [16], "rollout_length": 16,
                 "batch_size": 2},
         "impala": {"policy_hidden": [16], "value_hidden": [16], "rollout_length": 16,
                    "batch_size": 2},
         "r2d2": {"torso_sizes": [8], "lstm_size": 8, "min_replay_size": 4, "batch_size": 4,
                  "burn_in_length": 2, "trace_length": 4, "sequence_period": 2,
                  "n_step": 2}}

ACTIONS = []  # (action space, action) of every step the recording environments received


class _Recording(gymnasium.Wrapper):

  def step(self, action):
    ACTIONS.append((self.env.action_space, action))
    return self.env.step(action)


for _id, _inner in (("ActorqRecordingCartPole-v0", "CartPole-v1"),
                    ("ActorqRecordingPendulum-v0", "Pendulum-v1")):
  if _id not in gymnasium.registry:
    gymnasium.register(id=_id, entry_point=lambda inner=_inner, **kw: _Recording(
        gymnasium.make(inner, **kw)), disable_env_checker=True)


def _env_id(agent):
  if agent in MULTI_AGENT:
    return "pz:mpe2/simple_spread_v3"
  return ("gym:ActorqRecordingPendulum-v0" if agent in CONTINUOUS
          else "gym:ActorqRecordingCartPole-v0")


def _fields(agent):
  config_cls = registry.get(agent)[0]
  hints = typing.get_type_hints(config_cls)
  return config_cls, [(f.name, hints[f.name], config_checks.check_of(config_cls, f.name))
                      for f in dataclasses.fields(config_cls)]


def _assignment(name, value):
  """`--set name=<value>`: JSON (NaN and Infinity included), or a bare string."""
  if isinstance(value, str):
    return f"{name}={value}"
  return f"{name}={json.dumps(value)}"


_run = run_cli


def _inside(annotation, check):
  """Values of `annotation` inside `check`'s bounds and choices, small (runs stay cheap)."""
  args = [a for a in typing.get_args(annotation) if a is not type(None)]
  if typing.get_origin(annotation) is typing.Union:
    return st.one_of(st.none(), _inside(args[0], check))
  if typing.get_origin(annotation) is tuple:
    return st.lists(_inside(args[0], check), max_size=2)
  if annotation is bool:
    return st.booleans()
  if annotation is str:
    if check is not None and check.choices:
      return st.sampled_from(check.choices)
    return st.text("abcdefgh_", min_size=1, max_size=8)
  low = -1e3 if check is None or (check.ge is None and check.gt is None) else (
      check.ge if check.ge is not None else check.gt)
  high = 1e3 if check is None or (check.le is None and check.lt is None) else (
      check.le if check.le is not None else check.lt)
  if annotation is int:
    low = int(math.floor(low)) + (1 if check is not None and check.gt is not None else 0)
    return st.integers(low, min(int(high), low + 15))
  high = min(high, max(low, 0.0) + 10.0)
  low = max(low, -1e3)
  return st.floats(low, high, exclude_min=check is not None and check.gt is not None,
                   exclude_max=check is not None and check.lt is not None)


# --- any values ---------------------------------------------------------------------------
ANY_VALUE = st.one_of(
    st.integers(-3, 3), st.sampled_from([2**31, 10**9]),
    st.floats(allow_nan=True, allow_infinity=True, width=32), st.booleans(), st.none(),
    st.sampled_from(["", "many", "int4", "fp8", "fp16", "tanh", "8,8", "nan", "-inf",
                     "1_000", "[16, 0]"]),
    st.lists(st.integers(-1, 40), max_size=3))


@st.composite
def any_assignments(draw):
  agent = draw(st.sampled_from(AGENTS))
  config_cls, fields = _fields(agent)
  chosen = draw(st.lists(st.sampled_from(fields), min_size=1, max_size=3,
                         unique_by=lambda f: f[0]))
  # Half the values inside the field's declared checks, so that accepted combinations
  # (and the cross-field rules) are drawn as often as refused ones.
  return agent, config_cls, {name: draw(st.one_of(_inside(annotation, check), ANY_VALUE))
                             for name, annotation, check in chosen}


@settings(derandomize=True, max_examples=60, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(drawn=any_assignments())
def test_any_set_values_are_accepted_or_refused_in_one_line(drawn, tmp_path, capsys):
  agent, config_cls, values = drawn
  sets = [_assignment(k, v) for k, v in values.items()]
  overrides = dict(config_io.parse_assignment(a) for a in sets)
  try:
    config_io.from_dict(config_cls, {}, overrides)
    expected = None
  except ValueError as e:
    expected = str(e)
  logdir = tmp_path / "run"
  argv = ["train", "--agent", agent, "--env", _env_id(agent), "--logdir", str(logdir),
          "--dry-run"]
  for a in sets:
    argv += ["--set", a]
  code, _, err = _run(argv, capsys)
  event("accepted" if expected is None else "refused")
  if expected is None:
    assert code == 0, err
  else:
    assert code == 2
    assert err == f"actorq: error: {expected}\n"  # one line, the config's own message
  assert not logdir.exists()


# --- values inside the declared checks, trained ------------------------------------------
@st.composite
def inside_assignments(draw):
  agent = draw(st.sampled_from(SINGLE_AGENT))
  config_cls, fields = _fields(agent)
  chosen = draw(st.lists(st.sampled_from(fields), min_size=1, max_size=3,
                         unique_by=lambda f: f[0]))
  return agent, config_cls, {name: draw(_inside(annotation, check))
                             for name, annotation, check in chosen}


def _numbers(path):
  with open(path, encoding="utf-8") as f:
    for row in csv.DictReader(f):
      for value in row.values():
        try:
          yield float(value)
        except (TypeError, ValueError):
          pass


@pytest.mark.slow
@settings(derandomize=True, max_examples=6, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(drawn=inside_assignments())
def test_accepted_set_values_train_with_actions_in_the_space(drawn, tmp_path_factory, capsys):
  agent, _, values = drawn
  logdir = tmp_path_factory.mktemp("prop") / "run"
  argv = ["train", "--agent", agent, "--env", _env_id(agent), "--logdir", str(logdir),
          "--steps", "100", "--eval-every", "100", "--eval-episodes", "1", "--no-progress"]
  for k, v in dict(SMALL[agent], **values).items():
    argv += ["--set", _assignment(k, v)]
  del ACTIONS[:]
  code, _, err = _run(argv, capsys)
  event(f"exit {code}")
  if code == 2:
    assert err.count("\n") == 1 and err.startswith("actorq: error: ")
    assert not logdir.exists()
    return
  if code == cli.EXIT_RUN_FAILED:  # e.g. a drawn learning rate that diverges
    assert err.count("\n") == 1 and err.startswith("actorq: stopped: ") and " finite" in err, err
    return
  assert code == 0, err
  assert len(ACTIONS) >= 100
  outside = [(space, a) for space, a in ACTIONS if not space.contains(
      np.asarray(a, space.dtype) if space.shape else a)]
  assert outside == []
  for name in ("train.csv", "eval.csv", "learner.csv"):
    if (logdir / name).exists():
      assert all(math.isfinite(x) for x in _numbers(logdir / name)), name
  _, state = checkpointing.restore_latest(str(logdir / "checkpoints"))
  leaves = jax.tree_util.tree_leaves(state["policy_params"])
  assert leaves and all(np.isfinite(np.asarray(x)).all() for x in leaves)
