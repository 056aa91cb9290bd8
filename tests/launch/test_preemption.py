"""Single-process runs stop cleanly: SIGTERM writes a checkpoint and exits 143 (like Ctrl-C),
and a non-finite reward stops the run with one line naming the reward, the actor step and
the environment, after a checkpoint of the last good state (case B3); both resume."""
import os
import signal
import subprocess
import sys
import time

import pytest
import gymnasium
import numpy as np

from actorq.cli import main as cli
from actorq.components import checkpointing

pytestmark = pytest.mark.slow  # multi-process or several training runs

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SMALL = ["--set", "hidden_sizes=[16]", "--set", "min_replay_size=100", "--eval-episodes", "1"]


class NaNRewardCartPole(gymnasium.Wrapper):
  """CartPole whose reward is NaN once, at global step `at` (1-based)."""

  def __init__(self, at: int = 400):
    super().__init__(gymnasium.make("CartPole-v1"))
    self._at, self._t = at, 0

  def step(self, action):
    obs, reward, terminated, truncated, info = self.env.step(action)
    self._t += 1
    return obs, (float("nan") if self._t == self._at else reward), terminated, truncated, info


gymnasium.register("NaNRewardCartPole-v0", entry_point=NaNRewardCartPole)


def test_a_nan_reward_stops_the_run_naming_it_and_keeps_the_last_good_state(tmp_path, capsys):
  logdir = tmp_path / "run"
  code = cli.main(["train", "--env", "gym:NaNRewardCartPole-v0", "--steps", "1500",
                   "--eval-every", "1500", "--logdir", str(logdir), "--no-progress"] + SMALL)
  err = capsys.readouterr().err.strip().splitlines()
  assert code == 1
  line = [l for l in err if l.startswith("actorq: stopped:")]
  assert len(line) == 1, err
  assert "column 'reward': non-finite value nan" in line[0]
  assert "environment gym:NaNRewardCartPole-v0, actor step 400" in line[0]
  path, state = checkpointing.restore_latest(str(logdir / "checkpoints"),
                                             checkpointing.validate_run)
  assert state["actor_steps"] == 399  # the last good step
  params = state["policy_params"]
  assert all(np.isfinite(np.asarray(v)).all() for layer in params.values()
             for v in layer.values())


def _episodes(logdir) -> int:
  path = logdir / "train.csv"
  return max(len(path.read_text().splitlines()) - 1, 0) if path.exists() else 0


def test_sigterm_checkpoints_exits_143_and_resumes(tmp_path):
  logdir = tmp_path / "run"
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", JAX_PLATFORMS="cpu")
  proc = subprocess.Popen(
      [sys.executable, "-m", "actorq.cli.main", "train", "--steps", "1000000",
       "--eval-every", "1000000", "--logdir", str(logdir), "--no-progress",
       "--checkpoint-every", "1000"] + SMALL,
      cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
  try:
    deadline = time.time() + 180
    while time.time() < deadline and _episodes(logdir) < 20:  # > 100 steps: learning
      assert proc.poll() is None, proc.stderr.read()
      time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    code = proc.wait(timeout=60)
  finally:
    if proc.poll() is None:
      proc.kill()
  err = proc.stderr.read()
  assert code == 128 + signal.SIGTERM, err
  assert "stopped by signal 15" in err and "Traceback" not in err
  path, state = checkpointing.restore_latest(str(logdir / "checkpoints"),
                                             checkpointing.validate_run)
  assert path is not None and state["actor_steps"] > 0 and state["learner_steps"] > 0
  steps = state["actor_steps"] + 50
  code = cli.main(["train", "--resume", str(logdir), "--steps", str(steps), "--no-progress"])
  assert code == 0
  _, final = checkpointing.restore_latest(str(logdir / "checkpoints"))
  assert final["actor_steps"] == steps and final["learner_steps"] > state["learner_steps"]
