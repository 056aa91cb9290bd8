"""Resuming a distributed run: a program run to N actor steps writes a checkpoint at its
clean finish; a resumed program (same logdir) continues its counter, learner, replay and
actors from that checkpoint up to 3N (2N more steps: an actor that starts late beside a
busy neighbour still steps)."""
import csv
import os
import subprocess
import sys

import pytest

from actorq.agents.dqn import builder as dqn_builder
from actorq.agents.dqn import config as dqn_config
from actorq.components import checkpointing
from actorq.launch import distributed, distributed_nodes, experiment

pytestmark = pytest.mark.slow  # multi-process or several training runs

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
N = 600


def _rows(path):
  with open(path, encoding="utf-8") as f:
    return list(csv.DictReader(f))


def _program(builder, logdir, num_steps, resume=False):
  return distributed.make_program(experiment.ExperimentConfig(
      builder, "gym:CartPole-v1", num_steps=num_steps, logdir=str(logdir), eval_every=10**6,
      eval_episodes=1, checkpoint_every=None, resume=resume), num_actors=2)


def _launch(dp):
  polls = []

  def on_poll(counts):
    size = dp.replay.dereference().server_info()["priority_table"].current_size
    polls.append((dict(counts), int(size)))

  result = distributed.launch(dp, "test_mt", on_poll=on_poll)
  assert (result.exit_code, result.reason) == (0, "finished"), result.detail
  return result, polls


@pytest.mark.isolated  # Launchpad nodes as threads of the test process: run in a child
def test_resumed_program_continues_counter_learner_replay_and_actors(tmp_path):
  builder = dqn_builder.DQNBuilder(dqn_config.DQNConfig(
      hidden_sizes=(32,), min_replay_size=100, variable_update_period=5))
  assert builder.replay_table_name() == "priority_table"

  first, polls1 = _launch(_program(builder, tmp_path, N))
  assert first.checkpoint is not None
  path1, ckpt1 = checkpointing.restore_latest(str(tmp_path / "checkpoints"),
                                              checkpointing.validate_run)
  assert path1 == first.checkpoint
  assert ckpt1["actor_steps"] >= N and ckpt1["learner_steps"] > 0
  assert ckpt1["counter"]["counts"]["learner_steps"] == ckpt1["learner_steps"]
  assert "limit_reached" not in ckpt1["counter"]["counts"]
  assert int(ckpt1["learner"].steps) == ckpt1["learner_steps"]
  assert ckpt1["actor_num_steps"] == ckpt1["actor_steps"] // 2
  actor_rows1 = {i: len(_rows(tmp_path / f"actor_{i}.csv")) for i in range(2)}
  size1 = polls1[-1][1]  # replay items at the last poll (<= those at the checkpoint)
  assert size1 >= 100

  dp = _program(builder, tmp_path, 3 * N, resume=True)
  assert dp.resumed_from == path1
  assert dp.resumed_counts["actor_steps"] == ckpt1["actor_steps"]
  assert dp.resumed_counts["learner_steps"] == ckpt1["learner_steps"]
  second, polls2 = _launch(dp)

  # The counter started from the checkpoint's totals (the limiter counted on from them),
  # and the replay table from its Reverb checkpoint.
  counts0, size0 = polls2[0]
  assert counts0["actor_steps"] >= ckpt1["actor_steps"]
  assert counts0["learner_steps"] >= ckpt1["learner_steps"]
  assert counts0.get("limit_reached", 0) == 0
  assert size0 >= size1
  assert second.counts["actor_steps"] >= 3 * N

  _, ckpt2 = checkpointing.restore_latest(str(tmp_path / "checkpoints"),
                                          checkpointing.validate_run)
  assert ckpt2["actor_steps"] >= 3 * N
  assert ckpt2["learner_steps"] > ckpt1["learner_steps"]
  # Every actor stepped on from its own count at the checkpoint (the counter's per-actor
  # totals). The learner restored its state: every policy the resumed actors acted with is
  # at least the checkpoint's version, and each actor's step count (its epsilon schedule)
  # went on from its share of the checkpoint's actor steps. Those two are read from the
  # episodes an actor finished after resuming; an actor that starts late beside a busy
  # neighbour may get too few of the resumed steps to finish one (actors start
  # unsynchronised, as in Acme), so they are checked on each actor that finished one, and
  # at least one must have: every actor node gets the same `initial_steps` (the
  # checkpoint's actor steps // num_actors, `distributed.make_program`) and pulls from the
  # same learner, so one actor's rows exercise what every actor's would.
  with_episodes = 0
  for i in range(2):
    key = distributed_nodes.actor_steps_key(i)
    assert second.counts[key] > ckpt1["counter"]["counts"][key] > 0, i
    resumed_rows = _rows(tmp_path / f"actor_{i}.csv")[actor_rows1[i]:]
    if not resumed_rows:
      continue
    with_episodes += 1
    assert min(int(r["policy_version"]) for r in resumed_rows) >= ckpt1["learner_steps"]
    assert int(resumed_rows[0]["actor_steps"]) > ckpt1["actor_steps"] // 2
  assert with_episodes >= 1, "no actor finished an episode after resuming"


def test_cli_resume_of_a_run_without_checkpoints_is_a_usage_error(tmp_path):
  (tmp_path / "run.json").write_text(
      '{"agent": "dqn", "env": "gym:CartPole-v1", "seed": 0, "config": {}, '
      '"train": {"steps": 100, "launch": "local_mt", "num_actors": 2}}')
  proc = subprocess.run(
      [sys.executable, "-c", "import sys; from actorq.cli import main; sys.exit(main.main())",
       "train", "--launch", "local_mt", "--resume", str(tmp_path), "--no-progress"],
      cwd=ROOT, capture_output=True, text=True, timeout=120,
      env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
  assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
  assert "no readable checkpoint" in proc.stderr
  assert "supported with --launch local only" not in proc.stderr
