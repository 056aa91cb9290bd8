"""Faults part-way through a run, per launch mode (issue 18).

Single process (`actorq train`): an environment that raises in `step` or `reset`, a
learner whose loss turns NaN, and a full disk each stop the run with one line naming the
cause (exit status 1), leave the newest checkpoint as it was (readable), and `actorq
train --resume` continues from it to the end.

Every case resumes a copy of one finished 300-step run (its checkpoint at actor step
300) for 300 more steps with the fault armed, then resumes again without it.

Distributed (`--launch local_mt` / `local_mp`): an actor node whose environment raises
ends the program (exit 1) with one line naming the environment, the actor and the
exception, the checkpoint it resumed from untouched; an actor that stops answering (its
environment's step never returns) is noticed within `actor_stall_s` and the whole
program is gone within the stop grace period after that (both launch types).
"""
import errno
import os
import resource
import shutil
import subprocess
import sys
import textwrap
import time

import jax.numpy as jnp
import numpy as np
import psutil
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:  # faulty_envs: also what node processes import (PYTHONPATH)
  sys.path.insert(0, HERE)
import faulty_envs  # pylint: disable=wrong-import-position

from actorq.agents.dqn import learning as dqn_learning
from actorq.cli import main as cli
from actorq.components import checkpointing
from actorq.components import processes
from actorq.launch import distributed

ROOT = os.path.dirname(os.path.dirname(HERE))

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


def _fail_then_resume(base, logdir, fault, monkeypatch, capsys, undo=lambda: None,
                      checkpointed=True):
  """Resumes a copy of `base` in `logdir` with `fault` armed (it must fail), then without.
  `checkpointed`: the failed run wrote a checkpoint of its last good state (not when the
  fault is the disk itself). Returns the failed run's stderr."""
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
  # The fault left the run's state as it was before the failing step (the environment
  # raised, or the learner refused a non-finite step), so the run checkpointed that last
  # good state beside the one it started from; both are readable. A full disk allows no
  # new checkpoint: the one the run started from is the newest.
  ckpt_dir = str(logdir / "checkpoints")
  names = [os.path.basename(p) for p in checkpointing.list_checkpoints(ckpt_dir)]
  assert names[0] == BASE_CHECKPOINT and len(names) == (2 if checkpointed else 1), names
  path, state = checkpointing.restore_latest(ckpt_dir, checkpointing.validate_run)
  assert os.path.basename(path) == names[-1]
  assert (state["actor_steps"] > BASE_STEPS) if checkpointed else (
      state["actor_steps"] == BASE_STEPS)
  assert all(np.isfinite(np.asarray(v)).all() for layer in state["policy_params"].values()
             for v in layer.values())
  # Without the fault, --resume continues from it to the end.
  monkeypatch.setenv("ACTORQ_FAULT", "")
  code, out, err2, _ = _run(["train", "--resume", str(logdir), "--steps", str(STEPS),
                             "--no-progress"], capsys)
  assert code == 0, err2
  assert f"resumed from {path} (actor step {state['actor_steps']})" in out
  assert f": {STEPS} actor steps, " in out
  return err


@pytest.mark.slow
def test_environment_raising_in_step(base_run, tmp_path, monkeypatch, capsys):
  err = _fail_then_resume(base_run, tmp_path / "run", "step:150", monkeypatch, capsys)
  assert err.startswith(f"actorq: stopped: {faulty_envs.ENV_ID}: the environment's step() raised "
                        "RuntimeError: injected fault (at faulty_envs.py:")
  assert " in step) at actor step 450 (step " in err  # 300 restored + its 150th step


@pytest.mark.slow
def test_environment_raising_in_reset(base_run, tmp_path, monkeypatch, capsys):
  err = _fail_then_resume(base_run, tmp_path / "run", "reset:3", monkeypatch, capsys)
  assert err.startswith(f"actorq: stopped: {faulty_envs.ENV_ID}: the environment's reset() "
                        "raised RuntimeError: injected fault (at faulty_envs.py:")
  assert " in reset) at the start of episode " in err


@pytest.mark.slow
def test_a_loss_that_turns_nan(base_run, tmp_path, monkeypatch, capsys):
  """Every learner step of the resumed run computes a NaN loss (`dqn_td_errors`, behind
  the uniform and the prioritized loss alike, is looked up when the learner's update is
  traced): the first one stops the run, and the learner state it would have produced is
  not kept."""
  original = dqn_learning.dqn_td_errors
  monkeypatch.setattr(dqn_learning, "dqn_td_errors",
                      lambda *a, **k: original(*a, **k) * jnp.nan)
  err = _fail_then_resume(base_run, tmp_path / "run", "", monkeypatch, capsys,
                          undo=lambda: monkeypatch.setattr(dqn_learning, "dqn_td_errors",
                                                           original))
  assert "is not finite (loss=nan, gradient_norm=nan" in err  # (prioritized: mean_abs_td=nan)
  assert "; the learner keeps its state from before that step" in err
  assert err.startswith("actorq: stopped: learner step ")


def _mount_tmpfs(directory, size="8m"):
  directory.mkdir()
  try:
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs",
                           str(directory)], capture_output=True, timeout=10, check=False)
  except (OSError, subprocess.TimeoutExpired):
    return False
  return proc.returncode == 0


@pytest.mark.slow
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
    err = _fail_then_resume(base_run, logdir, fault, monkeypatch, capsys, undo=undo,
                            checkpointed=False)
  finally:
    if disk == "tmpfs":
      subprocess.run(["umount", "-l", str(mount)], check=False, timeout=30)
  # e.g. "cannot write TensorBoard events in <logdir>/tensorboard/train: ... No space left on
  # device" or "cannot write <logdir>/train.csv: File too large (<logdir>/train.csv)"
  assert err.startswith("actorq: stopped: cannot write ") and f" {logdir}/" in err, err
  assert reason in err, err


def _node_env(**extra):
  path = os.pathsep.join([HERE] + [p for p in [os.environ.get("PYTHONPATH")] if p])
  return dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", JAX_PLATFORMS="cpu", PYTHONPATH=path,
              **extra)


@pytest.mark.slow
def test_local_mt_an_actor_whose_environment_raises(base_run, tmp_path, capsys):
  """The 300-step single-process run resumed as a Launchpad program (threads, one actor)
  whose environment raises at the actor's 200th step: exit 1 within the stop grace
  period, one error line naming the environment, the actor and the exception; the
  checkpoint it started from is untouched and a single-process --resume continues."""
  logdir = tmp_path / "run"
  shutil.copytree(base_run, logdir)
  mark = tmp_path / "fault_at"
  proc = subprocess.run(
      [sys.executable, "-m", "actorq.cli.main", "train", "--resume", str(logdir), "--launch",
       "local_mt", "--num-actors", "1", "--steps", "100000", "--no-progress"],
      cwd=ROOT, env=_node_env(ACTORQ_FAULT="step:200", ACTORQ_FAULT_MARK=str(mark)),
      capture_output=True, text=True, timeout=300, check=False)
  ended = time.time()
  assert proc.returncode == distributed.EXIT_FAILED, proc.stdout[-2000:] + proc.stderr[-2000:]
  assert ended - float(mark.read_text()) < 40  # detected at once, stopped within the grace
  errors = [line for line in proc.stderr.splitlines() if line.startswith("actorq: stopped: ")]
  assert len(errors) == 1, proc.stderr[-3000:]
  assert errors[0].startswith(
      f"actorq: stopped: a node failed: EnvironmentFailure: {faulty_envs.ENV_ID} (actor 0): the "
      "environment's step() raised RuntimeError: injected fault (at faulty_envs.py:")
  assert " in step) at actor step " in errors[0]
  assert "actorq: failed in " in proc.stdout and "Traceback" not in proc.stderr
  ckpt_dir = str(logdir / "checkpoints")
  assert [os.path.basename(p) for p in checkpointing.list_checkpoints(ckpt_dir)] == [
      BASE_CHECKPOINT]
  code, out, err, _ = _run(["train", "--resume", str(logdir), "--steps", str(STEPS),
                            "--no-progress"], capsys)
  assert code == 0, err
  assert f"(actor step {BASE_STEPS})" in out and f": {STEPS} actor steps, " in out


_STALLED = textwrap.dedent("""
    import sys, time
    import faulty_envs
    from actorq.agents.dqn import builder as b, config as c
    from actorq.launch import distributed, experiment

    cfg = c.DQNConfig(hidden_sizes=(16,), min_replay_size=100, batch_size=16,
                      variable_update_period=5)
    config = experiment.ExperimentConfig(b.DQNBuilder(cfg), faulty_envs.ENV_ID,
                                         num_steps=10**7, logdir=sys.argv[1], eval_every=10**6,
                                         eval_episodes=1)
    options = distributed.DistributedOptions(actor_stall_s=10.0, stop_grace_s=5.0)
    dp = distributed.make_program(config, num_actors=2, options=options)
    result = distributed.launch(dp, sys.argv[2], echo=False)
    print(distributed.summary_line(result), flush=True)
    print("program ended at", repr(time.time()), flush=True)
    distributed.exit_now(result)
    sys.exit(result.exit_code)
""")


@pytest.mark.slow
@pytest.mark.parametrize("launch", ["local_mp", "local_mt"])
def test_an_actor_that_stops_answering(launch, tmp_path):
  """Actor 1 (seed 2) stops in its 100th environment step and never returns, while actor
  0 goes on: the launcher notices within actor_stall_s (10 s) of its last step, stops
  the program and exits 1 within the 5 s stop grace period. local_mp: the hung process
  is killed, no node process is left; local_mt: the hung thread cannot be killed, it is
  named as abandoned and the process ends anyway (`distributed.exit_now`)."""
  script = tmp_path / "stalled.py"
  script.write_text(_STALLED)
  mark = tmp_path / "hung_at"
  out_path, err_path = tmp_path / "stdout", tmp_path / "stderr"
  with open(out_path, "w") as out_file, open(err_path, "w") as err_file:
    proc = subprocess.Popen([sys.executable, str(script), str(tmp_path / "run"), launch],
                            cwd=ROOT, env=_node_env(ACTORQ_FAULT="seed:2:hang:100",
                                                    ACTORQ_FAULT_MARK=str(mark)),
                            stdout=out_file, stderr=err_file)
    nodes = []
    try:
      deadline = time.time() + 240
      while time.time() < deadline and proc.poll() is None and not mark.exists():
        nodes = psutil.Process(proc.pid).children(recursive=True) or nodes
        time.sleep(0.5)
      proc.wait(timeout=120)
    finally:
      if proc.poll() is None:
        for p in nodes + [psutil.Process(proc.pid)]:
          try:
            p.kill()
          except psutil.NoSuchProcess:
            pass
  out, err = out_path.read_text(), err_path.read_text()
  assert proc.returncode == distributed.EXIT_FAILED, out[-2000:] + err[-2000:]
  hung_at = float(mark.read_text())
  ended = float(out.split("program ended at ")[1].split()[0])
  assert 10.0 < ended - hung_at < 10.0 + 5.0 + 15.0  # stall limit + grace + polling, slack
  assert "actorq: failed in " in out
  assert "(actor/1 took no step in 1" in out and "it stopped answering; the limit is 10 s)" in out
  errors = [line for line in err.splitlines() if line.startswith("actorq: stopped: ")]
  assert len(errors) == 1 and errors[0].startswith("actorq: stopped: actor/1 took no step in ")
  if launch == "local_mp":
    assert len(nodes) >= 7  # one process per node was running
    alive = [p for p in nodes if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert alive == []
  else:
    assert "; node threads that did not stop within 5 s: actor" in out


def test_the_cause_of_a_node_process_exit_is_its_last_exception_line():
  """local_mp names a failed node's cause from its output: the `Type: message` line that
  ends a traceback (chained ones included), not log lines around it."""
  lines = [
      "I1201 02:28:38 log line\n", "Traceback (most recent call last):\n",
      '  File "x.py", line 3, in run\n', "    raise RuntimeError('a')\n",
      "RuntimeError: a\n", "\n",
      "The above exception was the direct cause of the following exception:\n", "\n",
      "Traceback (most recent call last):\n", '  File "y.py", line 9, in run\n',
      "actorq.core.EnvironmentFailure: gym:X (actor 0): the environment's step() raised\n",
      "W1201 after\n"]
  tracker = processes.ExceptionLines()
  found = [tracker.last for line in lines if tracker.feed(line)]
  assert found == ["RuntimeError: a", "actorq.core.EnvironmentFailure: gym:X (actor 0): the "
                                      "environment's step() raised"]
  assert tracker.last == found[-1]
