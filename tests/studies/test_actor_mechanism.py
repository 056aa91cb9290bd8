"""The per-step mechanism measurement of issue 53 (`studies.actor_mechanism`): the action
gap and its bins by hand, and a tiny int8 DQN run whose recorder changes nothing in the
run and finds the version lag a synchronous in-process pull gives."""
import csv
import json
import math

import numpy as np
import pytest

from actorq.studies import actor_mechanism as am

TINY = ["min_replay_size=100", "hidden_sizes=[16]"]


def test_action_gap_and_its_bin():
  assert am.action_gap(np.array([1.0, 3.5, 3.0])) == pytest.approx(0.5)
  assert am.action_gap(np.array([2.0, 2.0])) == 0.0
  assert am.action_gap(np.array([7.0])) == math.inf
  # Bins [0, 0.01), [0.01, 0.03), [0.03, 0.1), [0.1, 0.3), [0.3, 1), [1, 3), [3, inf).
  assert [am.gap_bin(g) for g in (0.0, 0.005, 0.01, 0.05, 0.2, 0.5, 2.0, 50.0)] == [
      0, 0, 1, 2, 3, 4, 5, 6]


def _train_rows(path):
  with open(path, newline="", encoding="utf-8") as f:
    return [(r["actor_steps"], r["episode_return"], r["policy_version"])
            for r in csv.DictReader(f)]


@pytest.mark.slow
def test_a_measured_int8_run_is_the_unmeasured_run_and_lags_a_few_learner_steps(tmp_path):
  from actorq.launch import local
  from actorq.launch import spec as spec_lib
  import argparse
  import dataclasses
  summary = am.run("dqn", "gym:CartPole-v1", 0, 400, "int8", str(tmp_path / "m"), TINY)
  run_dir = tmp_path / "m" / "int8-s0"
  # The same run without the recorder: the same episodes, returns and versions.
  spec = spec_lib.RunSpec.from_args(argparse.Namespace(
      agent="dqn", env="gym:CartPole-v1", seed=0, config=None, set=TINY,
      actor_precision="int8"))
  plain = tmp_path / "plain"
  local.run(dataclasses.replace(spec, steps=400, eval_every=400, eval_episodes=1,
                                logdir=str(plain)).build())
  assert _train_rows(run_dir / "train.csv") == _train_rows(plain / "train.csv")
  # Every step is recorded; pulls are synchronous every 10 actor steps and the learner
  # takes one step per 2 actor steps (batch 64, samples_per_insert 32) once 100 items are
  # in: an action lags 0 to 5 learner steps behind the learner.
  assert summary["steps"] == 400 and summary["version_mismatch"] == 0
  lags = {int(k): v for k, v in summary["lag_histogram"].items()}
  assert set(lags) <= set(range(6)) and lags[0] > 0 and max(lags) >= 4
  assert summary["compared"] == 400 and 0.0 <= summary["share_differ"] <= 1.0
  with open(run_dir / "action_gaps.csv", newline="", encoding="utf-8") as f:
    gaps = list(csv.DictReader(f))
  assert sum(int(r["steps"]) for r in gaps) == 400
  assert sum(int(r["differ"]) for r in gaps) == summary["differ"]
  with open(run_dir / "lag.csv", newline="", encoding="utf-8") as f:
    assert sum(int(r["steps"]) for r in csv.DictReader(f)) == 0  # 400 < one window
  assert json.loads((run_dir / "summary.json").read_text())["precision"] == "int8"
