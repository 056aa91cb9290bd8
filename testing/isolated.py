"""Tests marked ``isolated`` run in a child pytest process: a native crash or a hang there
fails that one test, with the child's last output lines, instead of ending the pytest
process that runs the suite.

Why: a `local_mt`/`test_mt` Launchpad program runs every node as a thread of the test's
process, beside C++ libraries (gRPC/Courier, Reverb, TensorFlow, XLA, pygame/SDL). A
native abort there (issue 40's CI: MPE2 environments closed and built at once, see
`components.envs.multi_agent._LIFECYCLE_LOCK`) took a pytest-xdist worker down, and
pytest-xdist 3.8.0 under ``--dist loadfile`` may then wait forever for the replacement
worker (pytest-xdist#1327; pytest.ini's ``--max-worker-restart=0`` makes such a crash end
the run instead), so one crash hung CI instead of failing one test.

How (`tests/conftest.py` takes the hooks from here):

  * `pytest_runtest_protocol`: for an ``isolated`` test, runs ``python -m pytest`` on it
    and on the file's later ``isolated`` tests (one child per file where a file's tests
    all run in this process: ``-n 0``, ``--dist loadfile`` or ``loadscope``; else one
    child per test), then replays the child's reports (setup, call, teardown, captured output,
    durations) as this test's: pass, fail, skip and the failure text are as in-process.
  * The child writes each report as one JSON line (`pytest_report_to_serializable`) as
    soon as it is made, so a crash keeps what came before. A test the child started and
    did not finish fails with how the child ended (a signal by name, or the exit code)
    and the last `TAIL_LINES` lines of its output: faulthandler's stacks, and native
    messages (abseil, glibc), which reach the output file because the child captures
    at the ``sys`` level only (``--capture=sys``; fd-level capture loses them in a crash).
    The tests after it in the batch run in a fresh child. A child killed by a signal (or
    ending with an exit code other than pytest's 0 and 1) after its last test's reports
    gives that test a teardown error saying so. A failed test's report names
    the file holding the child's whole output; the child's folder (that file, its tests'
    ``tmp_path``) is removed when all its tests passed.
  * A test that runs longer than `TEST_TIMEOUT_S` in the child: pytest's faulthandler
    dumps every thread's stack and ends the child (``faulthandler_timeout``,
    ``faulthandler_exit_on_timeout``); the parent kills the child's process group
    `KILL_AFTER_S` later if it is still there.

Under ``--pdb`` the marked tests run in this process, as before (the debugger needs them
here).
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from typing import Dict, List

import pytest

MARKER = "isolated"
# Set in the child: the file its reports go to (one JSON object a line).
CHILD_ENV = "ACTORQ_ISOLATED_REPORTS"
TEST_TIMEOUT_S = 900.0  # one test in the child, seconds
KILL_AFTER_S = 60.0     # past TEST_TIMEOUT_S without a new report: the parent kills the child
TAIL_LINES = 80         # of the child's output, in a crash's failure text
# Units xdist never splits across workers: a child may run the file's later tests too.
_WHOLE_FILE_DIST = ("no", "loadfile", "loadscope")
# (In the parent) nodeid -> the reports of a marked test its batch's child ran, until replayed.
_DONE = pytest.StashKey[Dict[str, list]]()


class _ReportWriter:
  """(In the child) writes each test's start and reports to `path`, one JSON line each."""

  def __init__(self, config: pytest.Config, path: str):
    self._config = config
    self._file = open(path, "a", encoding="utf-8")  # pylint: disable=consider-using-with

  def _write(self, obj) -> None:
    self._file.write(json.dumps(obj) + "\n")
    self._file.flush()

  def pytest_runtest_logstart(self, nodeid, location):  # pylint: disable=unused-argument
    self._write({"start": nodeid})

  def pytest_runtest_logreport(self, report):
    self._write({"report": self._config.hook.pytest_report_to_serializable(
        config=self._config, report=report)})

  def pytest_unconfigure(self, config):  # pylint: disable=unused-argument
    self._file.close()


def pytest_configure(config: pytest.Config) -> None:
  config.addinivalue_line(
      "markers", f"{MARKER}: runs in a child pytest process (actorq.testing.isolated): a "
      "native crash or hang fails this test only")
  path = os.environ.get(CHILD_ENV)
  if path:
    config.pluginmanager.register(_ReportWriter(config, path), "actorq-isolated-writer")


def _is_isolated(item) -> bool:
  return item.get_closest_marker(MARKER) is not None


def _batch(item, done: Dict[str, list]) -> List[pytest.Item]:
  """`item` and, where the scheduler keeps a file on one worker, the file's later
  isolated tests not yet run."""
  batch = [item]
  if getattr(item.config.option, "dist", "no") not in _WHOLE_FILE_DIST:
    return batch
  items = item.session.items
  for other in items[items.index(item) + 1:]:
    if other.path != item.path:
      break
    if _is_isolated(other) and other.nodeid not in done:
      batch.append(other)
  return batch


def _signal_name(code: int) -> str:
  try:
    return signal.Signals(-code).name
  except ValueError:
    return f"signal {-code}"


def _tail(path: str) -> str:
  with open(path, encoding="utf-8", errors="replace") as f:
    lines = f.read().splitlines()
  return "\n".join(lines[-TAIL_LINES:])


def _run_child(config: pytest.Config, nodeids: List[str], workdir: str):
  """Runs pytest on `nodeids` in a child; (its return code, the JSON objects it wrote,
  its output file). Kills the child's process group if no report came for
  TEST_TIMEOUT_S + KILL_AFTER_S seconds (returncode then -SIGKILL)."""
  reports = os.path.join(workdir, "reports.jsonl")
  output = os.path.join(workdir, "output.txt")
  cmd = [sys.executable, "-m", "pytest", *nodeids, "-n", "0", "-p", "no:cacheprovider",
         "--capture=sys", "-q", "--basetemp", os.path.join(workdir, "tmp"),
         "--rootdir", str(config.rootpath),
         "-o", f"faulthandler_timeout={TEST_TIMEOUT_S:g}",
         "-o", "faulthandler_exit_on_timeout=true"]
  if config.inipath is not None:
    cmd += ["-c", str(config.inipath)]
  env = dict(os.environ, **{CHILD_ENV: reports})
  env.pop("PYTEST_XDIST_WORKER", None)
  env.pop("PYTEST_XDIST_WORKER_COUNT", None)
  with open(output, "wb") as out:
    proc = subprocess.Popen(  # pylint: disable=consider-using-with
        cmd, cwd=str(config.rootpath), env=env, stdin=subprocess.DEVNULL, stdout=out,
        stderr=subprocess.STDOUT, start_new_session=True)
    try:
      last, size = time.monotonic(), -1
      while proc.poll() is None:
        time.sleep(0.2)
        now_size = os.path.getsize(reports) if os.path.exists(reports) else 0
        if now_size != size:
          last, size = time.monotonic(), now_size
        elif time.monotonic() - last > TEST_TIMEOUT_S + KILL_AFTER_S:
          os.killpg(proc.pid, signal.SIGKILL)
          proc.wait()
    finally:
      if proc.poll() is None:  # the parent itself was interrupted
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
  objects = []
  if os.path.exists(reports):
    with open(reports, encoding="utf-8") as f:
      for line in f:
        try:
          objects.append(json.loads(line))
        except json.JSONDecodeError:  # a line cut short by the crash
          break
  return proc.returncode, objects, output


def _ended(code: int) -> str:
  if code < 0:
    return f"was killed by {_signal_name(code)}"
  return f"exited with code {code}"


def _child_failure(item, when: str, which: str, how: str, output: str) -> pytest.TestReport:
  """A failed report of `item` at `when` ("call", "teardown"): the child pytest process
  `which` ("running", "that ran") this test `how` (ended), with its output's last lines."""
  text = (f"the child pytest process {which} this test (marker '{MARKER}', "
          f"actorq.testing.isolated) {how}; the last lines of its output ({output}):\n"
          f"{_tail(output)}")
  return pytest.TestReport(item.nodeid, item.location, {k: 1 for k in item.keywords},
                           "failed", text, when)


def _run_batch(item, done: Dict[str, list]) -> None:
  """Runs `_batch(item)` in one child; puts the reports of every test it finished, and of
  the one it did not finish (failed), into `done`. The child's folder (its output, its
  tests' `tmp_path`s) is removed when every test passed, else kept."""
  config = item.config
  batch = _batch(item, done)
  workdir = tempfile.mkdtemp(prefix="actorq-isolated-")
  code, objects, output = _run_child(config, [i.nodeid for i in batch], workdir)
  got: Dict[str, list] = {}
  started = []
  for obj in objects:
    if "start" in obj:
      started.append(obj["start"])
    else:
      report = config.hook.pytest_report_from_serializable(config=config, data=obj["report"])
      if isinstance(report.longrepr, list):  # a skip's (path, line, reason): JSON made it a list
        report.longrepr = tuple(report.longrepr)
      if report.failed:  # what reached fd 1/2 (native logs) is not in the captured sections
        report.sections.append(("isolated child", f"the child's whole output: {output}"))
      got.setdefault(report.nodeid, []).append(report)
  if code == 0 and all(any(r.when == "teardown" for r in got.get(i.nodeid, [])) for i in batch):
    shutil.rmtree(workdir, ignore_errors=True)  # all passed: nothing to look at (else kept)
  for other in batch:
    reports = got.get(other.nodeid, [])
    if any(r.when == "teardown" for r in reports):
      done[other.nodeid] = reports
      if other is batch[-1] and code not in (0, 1):  # a crash once the tests were done
        done[other.nodeid].append(_child_failure(
            other, "teardown", "that ran", f"{_ended(code)} after its last test", output))
      continue
    # The first test the child did not finish: it crashed or hung there (or, not started
    # at all, the child could not run it). The later ones go to a fresh child.
    when = "call" if not any(r.when == "call" for r in reports) else "teardown"
    what = ("in this test" if other.nodeid in started else "before this test started")
    done[other.nodeid] = reports + [
        _child_failure(other, when, "running", f"{_ended(code)} {what}", output)]
    return


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item, nextitem):  # pylint: disable=unused-argument
  """Runs an ``isolated`` test in a child (see the module docstring); None (pytest runs
  it here) for any other test, in the child itself, and under ``--pdb``."""
  if os.environ.get(CHILD_ENV) or not _is_isolated(item) or item.config.getoption("usepdb"):
    return None
  done = item.config.stash.setdefault(_DONE, {})
  if item.nodeid not in done:
    _run_batch(item, done)
  item.ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
  for report in done.pop(item.nodeid):
    item.ihook.pytest_runtest_logreport(report=report)
  # What pytest's own teardown of this item would do in this process: tear down the
  # nodes (a module and its module-scoped fixtures, set up here by an earlier in-process
  # test of the file) that `nextitem` does not share; else the next file's first test
  # finds them still set up ("previous item was not torn down properly").
  item.session._setupstate.teardown_exact(nextitem)  # pylint: disable=protected-access
  item.ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
  return True

