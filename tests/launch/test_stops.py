"""Every interruption leaves a resumable run and a true message (issue 42, cases B9, B11).

A fault-injection test: SIGINT or SIGTERM, once or twice, is injected at each phase of a
short run (`components/fault_points.py`: `ACTORQ_FAULT_INJECT=phase[@n]:SIGNAL,...`):
start-up, acting, evaluation, the middle of a checkpoint write, the checkpoint written at
the stop; for `actorq train` single-process and `--launch local_mp`, and for
`actorq sweep` (whose children must be stopped, checkpointed, reaped and resumed). In
each case: the exit status is 128 + the signal, no traceback, no process left running,
what the run says about its checkpoint is true, and the newest readable checkpoint
resumes to the end.
"""
import csv
import os
import signal
import subprocess
import sys
import threading
import time

import psutil
import pytest

from actorq.cli import main as cli, train as train_cmd
from actorq.components import checkpointing
from actorq.components import processes

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
STEPS = 400
SMALL = ["--set", "hidden_sizes=[16]", "--set", "min_replay_size=64", "--set", "batch_size=16",
         "--eval-episodes", "1", "--no-progress"]


def _env(inject=""):
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", JAX_PLATFORMS="cpu")
  env.pop("ACTORQ_FAULT_INJECT", None)
  if inject:
    env["ACTORQ_FAULT_INJECT"] = inject
  return env


def _actorq(argv, inject="", timeout=240):
  """`actorq ARGV` in a child with `inject` armed: (exit status, stderr, pids it started)."""
  proc = subprocess.Popen([sys.executable, "-m", "actorq.cli.main"] + argv, cwd=ROOT,
                          env=_env(inject), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          text=True)
  seen = set()
  try:
    deadline = time.time() + timeout
    while proc.poll() is None and time.time() < deadline:
      try:
        seen.update(p.pid for p in psutil.Process(proc.pid).children(recursive=True))
      except psutil.Error:
        pass
      time.sleep(0.2)
    err = proc.communicate(timeout=max(deadline - time.time(), 1))[1]
  finally:
    if proc.poll() is None:
      proc.kill()
  return proc.returncode, err, seen


def _alive(pids):
  out = []
  for pid in pids:
    try:
      if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
        out.append(pid)
    except psutil.NoSuchProcess:
      pass
  return out


def _checkpoint_steps(logdir):
  return [checkpointing.load(p)["actor_steps"]
          for p in checkpointing.list_checkpoints(str(logdir / "checkpoints"))]


def _check_stop(code, err, signum, logdir):
  """Exit 128 + signum, no traceback, and the stop message true: the checkpoint it says was
  saved exists and is readable (else none was written at the stop). Returns the saved
  checkpoint's actor step, or None."""
  assert code == 128 + signum, err
  said = "actorq: interrupted" if signum == signal.SIGINT else f"stopped by signal {signum}"
  assert "Traceback" not in err and said in err, err
  if "checkpoint saved (" in err:
    name = err.split("checkpoint saved (")[1].split(")")[0]
    state = checkpointing.load(str(logdir / "checkpoints" / name))
    assert f"actorq train --resume {logdir}" in err
    return state["actor_steps"]
  if _checkpoint_steps(logdir):
    assert "no checkpoint was written at the stop; continue from the newest earlier" in err
  else:
    assert "stopped before the first checkpoint, nothing to resume" in err, err
  return None


def _resume_to_the_end(logdir, extra=()):
  code = cli.main(["train", "--resume", str(logdir), "--no-progress"] + list(extra))
  assert code == 0
  assert _checkpoint_steps(logdir)[-1] == STEPS
  with open(logdir / "eval.csv", newline="", encoding="utf-8") as f:
    assert [row["actor_steps"] for row in csv.DictReader(f)][-1] == str(STEPS)


# (phase, ACTORQ_FAULT_INJECT, signal, the actor step of the stop checkpoint or None)
SINGLE = [
    pytest.param("start-up", "startup:SIGTERM", signal.SIGTERM, 0, marks=pytest.mark.slow),
    # B9: a second signal in the middle of the stop checkpoint's write.
    pytest.param("acting, then again mid-checkpoint (B9)", "acting@150:SIGINT,checkpoint:SIGINT",
                 signal.SIGINT, 150),
    pytest.param("acting, then again before the stop checkpoint",
                 "acting@150:SIGTERM,stop_checkpoint:SIGTERM", signal.SIGTERM, 150,
                 marks=pytest.mark.slow),
    pytest.param("evaluation", "evaluation:SIGTERM", signal.SIGTERM, 200,
                 marks=pytest.mark.slow),
    pytest.param("mid-write of a periodic checkpoint", "checkpoint:SIGINT", signal.SIGINT, None,
                 marks=pytest.mark.slow),
]


@pytest.mark.parametrize("phase,inject,signum,at", SINGLE, ids=[p.values[0] for p in SINGLE])
def test_train_single_process_stopped_at_each_phase_resumes(phase, inject, signum, at,
                                                            tmp_path):
  del phase  # (acting once: test_preemption's SIGTERM case)
  logdir = tmp_path / "run"
  extra = ["--checkpoint-every", "0.002"] if inject.startswith("checkpoint") else []
  code, err, started = _actorq(["train", "--steps", str(STEPS), "--eval-every", "200",
                                "--logdir", str(logdir)] + SMALL + extra, inject)
  assert not _alive(started)
  saved = _check_stop(code, err, signum, logdir)
  if "," in inject:
    assert "while the stop checkpoint was written: ignored" in err
  if at is not None:
    assert saved == at, err
  else:  # the periodic checkpoint was torn; the stop's own checkpoint is whole
    assert saved is not None and saved > 0, err
  assert not [n for n in os.listdir(logdir / "checkpoints") if ".tmp-" in n]
  _resume_to_the_end(logdir)


def test_the_stop_message_names_the_checkpoint_that_exists(tmp_path):
  logdir = str(tmp_path)
  assert train_cmd.stop_message(logdir, None) == (
      "actorq: stopped before the first checkpoint, nothing to resume; start again with "
      f"the same flags and --overwrite (--logdir {logdir})")
  path = checkpointing.save(str(tmp_path / "checkpoints"), {"actor_steps": 5}, step=5)
  assert train_cmd.stop_message(logdir, None) == (
      "actorq: no checkpoint was written at the stop; continue from the newest earlier one "
      f"with: actorq train --resume {logdir}")
  assert train_cmd.stop_message(logdir, path) == (
      "actorq: checkpoint saved (ckpt-000000000005.pkl); continue with: actorq train "
      f"--resume {logdir}")


@pytest.mark.slow
@pytest.mark.parametrize("inject,signum", [("launch_poll@1:SIGTERM", signal.SIGTERM),
                                           ("launch_poll@10:SIGINT", signal.SIGINT)],
                         ids=["start-up", "acting"])
def test_train_local_mp_stopped_leaves_nothing_running_and_tells_the_truth(inject, signum,
                                                                          tmp_path):
  logdir = tmp_path / "run"
  code, err, started = _actorq(
      ["train", "--launch", "local_mp", "--num-actors", "1", "--steps", "100000",
       "--eval-every", "100000", "--logdir", str(logdir)] + SMALL, inject)
  assert started, "the launcher started no node process"
  assert not _alive(started), err
  assert code == 128 + signum and "Traceback" not in err, err
  steps = _checkpoint_steps(logdir)
  if "checkpoint saved (" in err:
    name = err.split("checkpoint saved (")[1].split(")")[0]
    assert checkpointing.load(str(logdir / "checkpoints" / name))["actor_steps"] == steps[-1]
  elif steps:
    assert "continue from the newest earlier one" in err, err
  else:
    assert "stopped before the first checkpoint, nothing to resume" in err, err


def _sweep_argv(logdir, steps):
  return ["sweep", "--precisions", "fp32", "--seeds", "0", "--steps", str(steps),
          "--eval-every", str(steps), "--eval-episodes", "1", "--logdir", str(logdir),
          "--set", "hidden_sizes=[16]", "--set", "min_replay_size=64",
          "--set", "batch_size=16"]


def _episodes(path):
  return max(len(path.read_text().splitlines()) - 1, 0) if path.exists() else 0


@pytest.mark.slow
def test_b11_sigterm_to_a_sweep_stops_its_child_and_the_same_sweep_resumes_it(tmp_path):
  # The sweep forwards the SIGTERM at once (no watchdog here), within ~0.5 s of the 10th
  # episode (~250 steps); 5,000 steps take ~9 s on a quiet machine (800: ~1.5 s), so the
  # child is stopped long before the end, and the resume (the rest of the steps) is short.
  logdir, steps = tmp_path / "sweep", 5_000
  run = logdir / "fp32-s0"
  proc = subprocess.Popen([sys.executable, "-m", "actorq.cli.main"] + _sweep_argv(logdir, steps),
                          cwd=ROOT, env=_env(), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)
  started = set()
  try:
    deadline = time.time() + 180
    while time.time() < deadline and _episodes(run / "train.csv") < 10:  # past start-up
      assert proc.poll() is None, proc.communicate()
      started.update(p.pid for p in psutil.Process(proc.pid).children(recursive=True))
      time.sleep(0.2)
    started.update(p.pid for p in psutil.Process(proc.pid).children(recursive=True))
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=90)
  finally:
    if proc.poll() is None:
      proc.kill()
  assert proc.returncode == 128 + signal.SIGTERM, err
  assert started and not _alive(started), "a child of the sweep outlived it"
  assert "Traceback" not in err and "fp32-s0 checkpointed" in err, err
  stopped_at = _checkpoint_steps(run)
  assert len(stopped_at) == 1 and 0 < stopped_at[0] < steps
  assert not (logdir / "sweep.json").exists()
  # The same sweep again: the stopped seed continues from its checkpoint, in its directory.
  code, err, _ = _actorq(_sweep_argv(logdir, steps))
  assert code == 0, err
  log = (logdir / "logs" / "fp32-s0.log").read_text()
  assert f"(actor step {stopped_at[0]})" in log and "resumed from" in log, log[-2000:]
  assert _checkpoint_steps(run)[-1] == steps and (logdir / "sweep.json").is_file()
  del out


@pytest.mark.slow
def test_a_sweep_stopped_while_its_child_starts_starts_the_seed_again(tmp_path):
  logdir, steps = tmp_path / "sweep", 300
  code, err, started = _actorq(_sweep_argv(logdir, steps), "sweep_child:SIGTERM")
  assert code == 128 + signal.SIGTERM and "Traceback" not in err, err
  assert "fp32-s0 stopped before a checkpoint, will start again" in err, err
  assert not _alive(started)
  code, err, _ = _actorq(_sweep_argv(logdir, steps))
  assert code == 0, err
  assert _checkpoint_steps(logdir / "fp32-s0")[-1] == steps


CHILD = """
import signal, sys, time
signal.signal(signal.SIGTERM, lambda *a: sys.exit(143))
open(sys.argv[1], "w").close()
time.sleep(60)
"""


def test_run_child_forwards_a_stop_once_and_waits_for_the_child(tmp_path):
  # What `actorq bench` does with its job children (processes.run_child).
  ready = tmp_path / "ready"

  def stop_when_ready():
    deadline = time.time() + 60
    while not ready.exists() and time.time() < deadline:
      time.sleep(0.05)
    os.kill(os.getpid(), signal.SIGTERM)  # recorded by run_child, not fatal to pytest

  thread = threading.Thread(target=stop_when_ready)
  thread.start()
  start = time.time()
  code, forwarded = processes.run_child([sys.executable, "-c", CHILD, str(ready)])
  thread.join()
  assert (code, forwarded) == (143, signal.SIGTERM)
  assert time.time() - start < 30  # stopped by the forwarded signal, not its sleep


@pytest.mark.slow
def test_a_sweep_killed_with_sigkill_leaves_no_child_running(tmp_path):
  """SIGKILL cannot be caught, so the sweep cannot forward it; its `actorq train` child
  notices that its parent is gone (within about a second) and stops as on SIGTERM (a
  checkpoint, exit 143), which the same sweep resumes."""
  # Long enough that the child cannot finish in the second its watchdog may take to notice
  # (800 steps take ~1.5 s on a quiet machine); it is stopped long before the end.
  logdir, steps = tmp_path / "sweep", 50_000
  run = logdir / "fp32-s0"
  proc = subprocess.Popen([sys.executable, "-m", "actorq.cli.main"] + _sweep_argv(logdir, steps),
                          cwd=ROOT, env=_env(), stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL)
  started = set()
  try:
    deadline = time.time() + 180
    while time.time() < deadline and _episodes(run / "train.csv") < 10:  # past start-up
      assert proc.poll() is None
      started.update(p.pid for p in psutil.Process(proc.pid).children(recursive=True))
      time.sleep(0.2)
    started.update(p.pid for p in psutil.Process(proc.pid).children(recursive=True))
    proc.kill()
    proc.wait(timeout=10)
    deadline = time.time() + 60
    while time.time() < deadline and _alive(started):
      time.sleep(0.2)
  finally:
    for pid in _alive(started):
      os.kill(pid, signal.SIGKILL)
  assert started and not _alive(started), "the sweep's child outlived a SIGKILL of the sweep"
  stopped_at = _checkpoint_steps(run)
  assert len(stopped_at) == 1 and 0 < stopped_at[0] < steps  # it stopped with a checkpoint
  assert "actorq: checkpoint saved" in (logdir / "logs" / "fp32-s0.log").read_text()
  # (the same sweep run again resumes it, as after a SIGTERM: test_b11_... above)
