"""Faults part-way through a run, per launch mode (issue 18).

Single process (`actorq train`): an environment that raises in `step` or `reset`, a
learner whose loss turns NaN, and a full disk each stop the run with one line naming the
cause (exit status 1), leave the newest checkpoint as it was (readable), and `actorq
train --resume` continues from it to the end.

Every case resumes a copy of one finished 300-step run (its checkpoint at actor step
300) for 300 more steps with the fault armed, then resumes again without it.
"""
import errno
import os
import resource
import shutil
import subprocess
import sys
import time

import jax.numpy as jnp
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:  # faulty_envs: also what node processes import (PYTHONPATH)
  sys.path.insert(0, HERE)
import faulty_envs  # pylint: disable=wrong-import-position

from actorq.agents.dqn import learning as dqn_learning
from actorq.components import checkpointing
from actorq.launch import cli

SMALL = ["--set", "hidden_sizes=[16]", "--set", "min_replay_size=100", "--set", "batch_size=16"]
BASE_STEPS, STEPS = 300, 600
BASE_CHECKPOINT = "ckpt-000000000300.pkl"


def _run(argv, capsys):
  start = time.time()
  code = cli.main(argv)
  captured = capsys.readouterr()
  return code, captured.out, captured.err, time.time() - start


@pytest.fixture(scope="module")
def base_run(tmp_path_factory):
  """A finished 300-step run on the fault-injecting CartPole (no fault armed)."""
  logdir = tmp_path_factory.mktemp("faults") / "base"
  os.environ.pop("ACTORQ_FAULT", None)
  code = cli.main(["train", "--env", faulty_envs.ENV_ID, "--steps", str(BASE_STEPS),
                   "--eval-every", str(BASE_STEPS), "--eval-episodes", "1",
                   "--logdir", str(logdir), "--no-progress"] + SMALL)
  assert code == 0
  assert [os.path.basename(p) for p in checkpointing.list_checkpoints(
      str(logdir / "checkpoints"))] == [BASE_CHECKPOINT]
  return logdir


def _fail_then_resume(base, logdir, fault, monkeypatch, capsys, undo=lambda: None):
  """Resumes a copy of `base` in `logdir` with `fault` armed (it must fail), then without.
  Returns the failed run's stderr."""
  shutil.copytree(base, logdir)
  monkeypatch.setenv("ACTORQ_FAULT", fault)
  try:
    code, _, err, seconds = _run(["train", "--resume", str(logdir), "--steps", str(STEPS),
                                  "--no-progress"], capsys)
  finally:
    undo()
  assert code == cli.EXIT_RUN_FAILED, err
  assert seconds < 120
  assert err.count("\n") == 1 and err.startswith("actorq: stopped: ") and "Traceback" not in err
  assert err.endswith(f"; continue from the newest checkpoint with: actorq train --resume "
                      f"{logdir}\n")
  # The newest checkpoint is the one the run started from, and it is readable.
  ckpt_dir = str(logdir / "checkpoints")
  assert [os.path.basename(p) for p in checkpointing.list_checkpoints(ckpt_dir)] == [
      BASE_CHECKPOINT]
  path, state = checkpointing.restore_latest(ckpt_dir, checkpointing.validate_run)
  assert os.path.basename(path) == BASE_CHECKPOINT and state["actor_steps"] == BASE_STEPS
  # Without the fault, --resume continues from it to the end.
  monkeypatch.setenv("ACTORQ_FAULT", "")
  code, out, err2, _ = _run(["train", "--resume", str(logdir), "--steps", str(STEPS),
                             "--no-progress"], capsys)
  assert code == 0, err2
  assert f"resumed from {path} (actor step {BASE_STEPS})" in out
  assert f": {STEPS} actor steps, " in out
  return err


def test_environment_raising_in_step(base_run, tmp_path, monkeypatch, capsys):
  err = _fail_then_resume(base_run, tmp_path / "run", "step:150", monkeypatch, capsys)
  assert err.startswith(f"actorq: stopped: {faulty_envs.ENV_ID}: the environment's step() raised "
                        "RuntimeError: injected fault (at faulty_envs.py:")
  assert " in step) at actor step 450 (step " in err  # 300 restored + its 150th step


def test_environment_raising_in_reset(base_run, tmp_path, monkeypatch, capsys):
  err = _fail_then_resume(base_run, tmp_path / "run", "reset:3", monkeypatch, capsys)
  assert err.startswith(f"actorq: stopped: {faulty_envs.ENV_ID}: the environment's reset() "
                        "raised RuntimeError: injected fault (at faulty_envs.py:")
  assert " in reset) at the start of episode " in err


def test_a_loss_that_turns_nan(base_run, tmp_path, monkeypatch, capsys):
  """Every learner step of the resumed run computes a NaN loss (`dqn_loss` is looked up
  when the learner's update is traced): the first one stops the run, and the learner
  state it would have produced is not kept."""
  original = dqn_learning.dqn_loss
  monkeypatch.setattr(dqn_learning, "dqn_loss", lambda *a, **k: original(*a, **k) * jnp.nan)
  err = _fail_then_resume(base_run, tmp_path / "run", "", monkeypatch, capsys,
                          undo=lambda: monkeypatch.setattr(dqn_learning, "dqn_loss", original))
  assert "is not finite (loss=nan, gradient_norm=nan); the learner keeps its state from " \
         "before that step" in err
  assert err.startswith("actorq: stopped: learner step ")


def _mount_tmpfs(directory, size="8m"):
  directory.mkdir()
  try:
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs",
                           str(directory)], capture_output=True, timeout=10, check=False)
  except (OSError, subprocess.TimeoutExpired):
    return False
  return proc.returncode == 0


@pytest.mark.parametrize("disk", ["tmpfs", "file-size-limit"])
def test_a_full_disk(disk, base_run, tmp_path, monkeypatch, capsys):
  """tmpfs (where this process may mount one): the run directory is on an 8 MB tmpfs
  that another writer fills at the resumed run's 150th step (ENOSPC). file-size-limit
  (anywhere): from that step RLIMIT_FSIZE is 1 byte, so every write that grows a file
  fails (EFBIG). Either way a write of the run (a CSV row, an event file or the final
  checkpoint) fails."""
  if disk == "tmpfs":
    mount = tmp_path / "disk"
    if not _mount_tmpfs(mount):
      pytest.skip("cannot mount a tmpfs here (needs root); the file-size-limit case runs")
    logdir = mount / "run"
    fault, reason = f"fill:150:{mount}", os.strerror(errno.ENOSPC)
    undo = lambda: os.remove(mount / faulty_envs.BALLAST)
  else:
    logdir = tmp_path / "run"
    limits = resource.getrlimit(resource.RLIMIT_FSIZE)
    fault, reason = "fsize:150", os.strerror(errno.EFBIG)
    undo = lambda: resource.setrlimit(resource.RLIMIT_FSIZE, limits)
  try:
    err = _fail_then_resume(base_run, logdir, fault, monkeypatch, capsys, undo=undo)
  finally:
    if disk == "tmpfs":
      subprocess.run(["umount", "-l", str(mount)], check=False, timeout=30)
  # e.g. "cannot write TensorBoard events in <logdir>/tensorboard/train: ... No space left on
  # device" or "cannot write <logdir>/train.csv: File too large (<logdir>/train.csv)"
  assert err.startswith("actorq: stopped: cannot write ") and f" {logdir}/" in err, err
  assert reason in err, err
