"""What a resume may change, and what it keeps (issue 56): a changed actor precision is
refused in one line (B13); a changed train setting (an extended --steps) is recorded in
run.json, so a later plain --resume ends at the new total (B13); a resumed run's training
environments are never seeded like its evaluation environment (B14)."""
import json
import os
import shutil
import signal

import pytest

from actorq.agents.dqn.builder import DQNBuilder
from actorq.agents.dqn.config import DQNConfig
from actorq.components import fault_points
from actorq.components.envs import environments, seeding
from actorq.components.envs import single_agent
from actorq.launch import experiment
from actorq.components import checkpointing
from actorq.testing.cli import run_cli, snapshot

FIXTURE = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures",
                       "run_7a30947_dqn")  # a 400-step DQN run (hidden [16]), see its test


@pytest.fixture(name="old_run")
def _old_run(tmp_path):
  run = tmp_path / "run"
  shutil.copytree(FIXTURE, run)
  return run


def test_b13_a_resume_that_changes_the_actor_precision_is_refused(old_run, capsys):
  before = snapshot(old_run)
  code, _, err = run_cli(["train", "--resume", str(old_run), "--steps", "600",
                          "--actor-precision", "int8", "--no-progress"], capsys)
  assert code == 2
  assert err == (f"actorq: error: --actor-precision int8 differs from the resumed run's fp32 "
                 f"(its run.json); a run keeps its actors' precision: evaluate it at another "
                 f"with 'actorq eval --checkpoint {old_run} --precision P', or start a new "
                 "run\n")
  assert snapshot(old_run) == before
  # The run's own precision, given again, is no change.
  code, _, err = run_cli(["train", "--resume", str(old_run), "--actor-precision", "fp32",
                          "--no-progress"], capsys)
  assert code == 0, err


@pytest.mark.slow
def test_b13_an_extended_steps_is_recorded_and_a_plain_resume_ends_there(old_run, monkeypatch,
                                                                        capsys):
  """--steps 500 on the 400-step run, stopped by SIGTERM at step 450 (checkpoint), then a
  plain --resume: it ends at 500, the total the stopped resume was given."""
  monkeypatch.setattr(fault_points, "_PLAN", {"acting": [(50, signal.SIGTERM)]})
  monkeypatch.setattr(fault_points, "_SEEN", {})
  code, out, err = run_cli(["train", "--resume", str(old_run), "--steps", "500",
                            "--no-progress"], capsys)
  assert code == 128 + signal.SIGTERM, err
  assert f"actorq: --resume: run.json now records steps 400 -> 500\n" in out
  with open(old_run / "run.json") as f:
    assert json.load(f)["train"] == {"steps": 500, "eval_every": 200, "eval_episodes": 2}
  assert checkpointing.step_of(checkpointing.list_checkpoints(str(old_run / "checkpoints"))[-1]) \
      == 450
  monkeypatch.setattr(fault_points, "_PLAN", {})
  code, out, err = run_cli(["train", "--resume", str(old_run), "--no-progress"], capsys)
  assert code == 0, err
  assert "run.json now records" not in out and "500 actor steps" in out, out
  assert checkpointing.step_of(checkpointing.list_checkpoints(str(old_run / "checkpoints"))[-1]) \
      == 500


def test_b14_training_seeds_never_meet_the_evaluation_seeds():
  """Every training seed (a fresh run's, actor i's, a run resumed at any actor step, each
  with its vector rows) lies outside the evaluation window [seed + EVAL_SEED_OFFSET, seed +
  EVAL_SEED_OFFSET + EVAL_SEED_ROWS), and different offsets never share a seed."""
  seed, window = 7, range(7 + seeding.EVAL_SEED_OFFSET,
                          7 + seeding.EVAL_SEED_OFFSET + seeding.EVAL_SEED_ROWS)
  offsets = sorted(set(range(0, 31_000, 3)) | set(range(4_990, 5_010)) |
                   set(range(9_990, 10_010)) | set(range(19_990, 20_010)))
  for rows in (1, 2, 4, 64, seeding.EVAL_SEED_OFFSET - seeding.EVAL_SEED_ROWS):
    firsts = [seeding.training_seed(seed, o, rows) for o in offsets]
    assert len(set(firsts)) == len(firsts)
    for first in firsts:
      assert not set(range(first, first + rows)) & set(window), (rows, first)
  assert [seeding.training_seed(seed, o) for o in (0, 1, 2)] == [7, 8, 9]  # unchanged


def test_b14_a_run_resumed_at_step_10000_does_not_train_on_the_evaluation_start_states(
    monkeypatch):
  """What `local.run` (and a distributed actor) makes for a run resumed at actor step
  10,000: its training environment's seed is not the evaluation environment's."""
  seeds = []
  real = environments.make_environment
  monkeypatch.setattr(environments, "make_environment",
                      lambda env_id, seed=0, **kw: seeds.append(seed) or real(env_id, seed, **kw))
  config = experiment.ExperimentConfig(DQNBuilder(DQNConfig()), "gym:CartPole-v1", 20_000,
                                       seed=3)
  single_agent.make_training_environment(config, config.seed + 10_000).close()
  single_agent.make_training_environment(config, config.seed + 1 + 9_999).close()  # actor 0
  assert seeds and all(s != config.seed + seeding.EVAL_SEED_OFFSET for s in seeds), seeds
