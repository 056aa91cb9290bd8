"""`actorq pbt --launch local_mp` (issue 52): a population runs as the Launchpad program
every agent runs as (`distributed.make_program`), writes pbt.csv with one row per member
per ready round (exploit rows recorded), resumes from its checkpoint, and its best member
is a run directory `actorq eval` reads."""
import csv
import dataclasses
import json
import os

import pytest

from actorq.agents.dqn import population as dqn_population
from actorq.components import checkpointing
from actorq.launch import pbt
from actorq.testing.cli import run_cli

pytestmark = pytest.mark.slow  # a multi-process Launchpad run, then one in threads

SMALL_SET = ["--set", "hidden_sizes=[16]", "--set", "min_replay_size=50", "--set",
             "batch_size=16", "--set", "samples_per_insert=16.0", "--set",
             "target_update_period=20"]


def _rows(logdir):
  with open(os.path.join(logdir, pbt.PBT_CSV), newline="", encoding="utf-8") as f:
    reader = csv.DictReader(f)
    return reader.fieldnames, list(reader)


def _rounds(rows, n):
  """pbt.csv's rows in ready rounds of n (a program evaluates every member together)."""
  assert len(rows) % n == 0
  rounds = [rows[i:i + n] for i in range(0, len(rows), n)]
  for r in rounds:
    assert sorted(int(row["member"]) for row in r) == list(range(n))
    assert len({row["actor_steps"] for row in r}) == 1
  return rounds


@pytest.mark.isolated  # the resume's nodes are threads of the test process: run in a child
def test_a_population_program_runs_resumes_and_exports_its_best_member(tmp_path, capsys):
  logdir = str(tmp_path / "pop")
  code, out, err = run_cli(
      ["pbt", "--agent", "dqn", "--env", "gym:CartPole-v1", "--population", "2", "--steps",
       "600", "--ready-every", "150", "--mutate", "learning_rate", "--quantile", "0.5",
       "--seed", "1", "--eval-episodes", "1", "--launch", "local_mp", "--logdir", logdir,
       *SMALL_SET], capsys)
  assert code == 0, err
  assert "actorq pbt: training 2 dqn members on gym:CartPole-v1, 600 actor steps each" in out
  assert "(local_mp, seed 1, actors per member on cpu" in out
  info = json.load(open(os.path.join(logdir, pbt.PBT_JSON), encoding="utf-8"))
  assert info["train"]["launch"] == "local_mp" and info["train"]["num_actors"] == 1
  # The same columns as one process writes.
  fields, rows = _rows(logdir)
  values = [k for k in dqn_population.HYPERPARAMETERS if k != "actor_precision"]
  assert fields == ["member", "actor_steps", "learner_steps", "episode_return", *values,
                    "precision", "copied_from"]
  rounds = _rounds(rows, 2)
  assert len(rounds) >= 2  # ready every 300 summed steps (evaluator polls every second)
  assert int(rounds[-1][0]["actor_steps"]) >= 600  # the last round at the limit
  for r in rounds[:-1]:  # quantile 0.5 of 2: the worse member copied the better one
    worse, better = sorted(r, key=lambda row: float(row["episode_return"]))
    if worse["episode_return"] != better["episode_return"]:
      assert worse["copied_from"] == better["member"] and better["copied_from"] == ""
  assert all(row["copied_from"] == "" for row in rounds[-1])  # past the last steps
  assert all(int(row["learner_steps"]) > 0 for row in rounds[-1])
  assert {row["precision"] for row in rows} == {"fp32"}
  path, saved = checkpointing.restore_latest(os.path.join(logdir, "checkpoints"),
                                             checkpointing.validate_run)
  assert saved["actor_steps"] >= 1200 and saved["learner"]["rows"][-1]["member"] in (0, 1)
  first_rounds, first_learner_steps = len(rounds), saved["learner_steps"]

  # --resume (here with more steps, in threads: test_mt): the counter, learner, replay and
  # rounds go on from the checkpoint.
  result = pbt.run(dataclasses.replace(pbt.load_settings(logdir), resume=True, steps=900,
                                       launch="test_mt"))
  _, rows_after = _rows(logdir)
  assert rows_after[:len(rows)] == rows
  rounds_after = _rounds(rows_after, 2)
  assert len(rounds_after) > first_rounds
  assert int(rounds_after[-1][0]["actor_steps"]) >= 900
  _, resumed = checkpointing.restore_latest(os.path.join(logdir, "checkpoints"),
                                            checkpointing.validate_run)
  assert resumed["actor_steps"] >= 1800 and resumed["learner_steps"] > first_learner_steps
  assert result.learner_rounds == resumed["learner_steps"]

  # best/: the member with the best final evaluation, as a train run's directory.
  best = os.path.join(logdir, pbt.BEST_DIR)
  assert result.best_dir == best
  final = {int(row["member"]): row for row in rounds_after[-1]}
  assert float(final[result.best_member]["episode_return"]) == max(result.final_returns)
  run_json = json.load(open(os.path.join(best, "run.json"), encoding="utf-8"))
  assert run_json["config"]["learning_rate"] == float(final[result.best_member]["learning_rate"])
  code, out, err = run_cli(["eval", "--checkpoint", best, "--episodes", "1"], capsys)
  assert code == 0, err
  assert "returns:" in out
