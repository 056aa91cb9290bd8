"""Kill a training run (SIGKILL) after a periodic checkpoint, resume it, and compare
with an uninterrupted run of the same seed: counters, epsilon, optimizer state and the
replay table continue from the checkpoint, and the final learner step is the same."""
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import warnings

import jax
import optax
import pytest

from actorq import core
from actorq.agents.dqn.builder import DQNBuilder
from actorq.agents.dqn.config import DQNConfig
from actorq.components import config_io
from actorq.components.acting import actors
from actorq.components import checkpointing
from actorq.launch import experiment, local

pytestmark = pytest.mark.slow  # multi-process or several training runs

SMALL = {"hidden_sizes": [32, 32], "batch_size": 32, "min_replay_size": 400,
         "samples_per_insert": 8.0, "epsilon_decay_steps": 5000, "target_update_period": 50}
STEPS = 3000
KILL_AFTER_STEP = 1200  # a checkpoint at or beyond this many actor steps (learning has started)


def _builder():
  return DQNBuilder(config_io.from_dict(DQNConfig, SMALL))


def _adam_count(learner_state) -> int:
  """The optimizer's step count: Adam's, and the learning-rate schedule's if the config
  has one (both must agree: the schedule continues with the restored state)."""
  kinds = (optax.ScaleByAdamState, optax.ScaleByScheduleState)
  states = [s for s in jax.tree_util.tree_flatten(
      learner_state.opt_state, is_leaf=lambda x: isinstance(x, kinds))[0] if isinstance(s, kinds)]
  assert sum(isinstance(s, optax.ScaleByAdamState) for s in states) == 1
  counts = {int(s.count) for s in states}
  assert len(counts) == 1, counts
  return counts.pop()


def _steps(path):
  return int(os.path.basename(path)[5:17])


@pytest.fixture(scope="module")
def killed_run(tmp_path_factory):
  """A CLI run SIGKILLed once it has >= 2 checkpoints, the newest past KILL_AFTER_STEP."""
  root = tmp_path_factory.mktemp("resume")
  config = root / "small.json"
  config.write_text(json.dumps(SMALL))
  logdir = root / "run"
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", JAX_PLATFORMS="cpu")
  proc = subprocess.Popen(
      [sys.executable, "-m", "actorq.cli.main", "train", "--config", str(config),
       "--steps", str(STEPS), "--seed", "3", "--logdir", str(logdir), "--eval-every", "100000",
       "--eval-episodes", "1", "--checkpoint-every", "0.005", "--no-progress"],
      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
  ckpt_dir = str(logdir / "checkpoints")
  deadline = time.time() + 300
  try:
    while time.time() < deadline and proc.poll() is None:
      found = checkpointing.list_checkpoints(ckpt_dir) if os.path.isdir(ckpt_dir) else []
      if len(found) >= 2 and _steps(found[-1]) >= KILL_AFTER_STEP:
        break
      time.sleep(0.05)
    assert proc.poll() is None, "the run ended before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
  finally:
    proc.kill()
    proc.wait()
  found = checkpointing.list_checkpoints(ckpt_dir)
  assert _steps(found[-1]) < STEPS  # killed, not finished
  return logdir


@pytest.fixture(scope="module")
def uninterrupted():
  return local.run(experiment.ExperimentConfig(
      _builder(), "gym:CartPole-v1", STEPS, seed=3, logdir=None, eval_every=100_000,
      eval_episodes=1))


def test_resume_continues_counters_epsilon_optimizer_and_replay(killed_run, uninterrupted, tmp_path):
  logdir = tmp_path / "run"
  shutil.copytree(killed_run, logdir)
  ckpt_path, ckpt = checkpointing.restore_latest(str(logdir / "checkpoints"),
                                                 checkpointing.validate_run)
  assert ckpt["actor_steps"] >= KILL_AFTER_STEP and ckpt["learner_steps"] > 0
  assert ckpt["learning_started"] and ckpt["replay_state"]["tables"]["priority_table"]
  assert _adam_count(ckpt["learner"]) == ckpt["learner_steps"]

  builder = _builder()
  first = []
  result = local.run(experiment.ExperimentConfig(
      builder, "gym:CartPole-v1", STEPS, seed=3, logdir=str(logdir), eval_every=100_000,
      eval_episodes=1, checkpoint_every=None,
      resume=True), progress=lambda c: first.append(dict(c)) if not first else None)
  assert result.resumed_from == ckpt_path
  assert result.resumed_actor_steps == ckpt["actor_steps"]
  # Counters continue from the checkpoint, not from zero.
  c = first[0]
  assert c["actor_steps"] == ckpt["actor_steps"] + 1
  assert c["episodes"] >= ckpt["episodes"]
  assert c["actor_num_steps"] == ckpt["actor_num_steps"] + 1
  # Epsilon (a function of the actor's step count) continues: well below its start.
  cfg = builder.config
  epsilon = actors.linear_schedule(cfg.epsilon_start, cfg.epsilon_end, cfg.epsilon_decay_steps)
  assert epsilon(c["actor_num_steps"] - 1) == pytest.approx(
      cfg.epsilon_start - (cfg.epsilon_start - cfg.epsilon_end) * ckpt["actor_num_steps"] / 5000)
  assert epsilon(c["actor_num_steps"] - 1) < 0.8
  # The learner-steps-owed schedule continues (and the restored table can be sampled
  # right away: these steps ran before any new transition could fill it to min size).
  assert c["learner_steps"] == builder.learner_steps_owed(core.ReplayProgress(
      c["actor_steps"] - ckpt["learning_start_step"], 0))
  assert c["learner_steps"] >= ckpt["learner_steps"]
  # Same totals as the uninterrupted run.
  assert result.actor_steps == uninterrupted.actor_steps == STEPS
  assert result.learner_steps == uninterrupted.learner_steps
  assert result.learner_steps == builder.learner_steps_owed(core.ReplayProgress(
      STEPS - ckpt["learning_start_step"], 0))
  # The optimizer state continued too: Adam's step count equals the final learner step.
  _, final = checkpointing.restore_latest(str(logdir / "checkpoints"))
  assert final["actor_steps"] == STEPS
  assert _adam_count(final["learner"]) == final["learner_steps"] == result.learner_steps


def test_cli_resume_keeps_the_runs_steps_and_evaluation_settings(killed_run):
  from actorq.cli import main as cli
  from actorq.launch import spec as spec_lib
  args = cli.build_parser().parse_args(["train", "--resume", str(killed_run)])
  s = spec_lib.RunSpec.from_args(args)
  assert (s.steps, s.eval_every, s.eval_episodes, s.seed) == (STEPS, 100_000, 1, 3)
  args = cli.build_parser().parse_args(["train", "--resume", str(killed_run),
                                        "--eval-episodes", "4", "--steps", "5000"])
  s = spec_lib.RunSpec.from_args(args)
  assert (s.steps, s.eval_every, s.eval_episodes) == (5000, 100_000, 4)
  assert args.steps == 5000 and args.eval_every is None and args.seed == 0  # args unchanged


def test_a_truncated_newest_checkpoint_falls_back_to_the_previous(killed_run, tmp_path):
  logdir = tmp_path / "run"
  shutil.copytree(killed_run, logdir)
  found = checkpointing.list_checkpoints(str(logdir / "checkpoints"))
  newest, previous = found[-1], found[-2]
  with open(newest, "r+b") as f:
    f.truncate(os.path.getsize(newest) // 2)
  previous_steps = checkpointing.load(previous)["actor_steps"]
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    result = local.run(experiment.ExperimentConfig(
        _builder(), "gym:CartPole-v1", previous_steps + 20, seed=3, logdir=str(logdir),
        eval_every=100_000, eval_episodes=1, checkpoint_every=None, resume=True))
  assert result.resumed_from == previous
  assert result.resumed_actor_steps == previous_steps
  assert result.actor_steps == previous_steps + 20
  assert any(os.path.basename(newest) in str(w.message) and "truncated" in str(w.message)
             for w in caught)
