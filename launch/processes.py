"""Child processes of a launcher, each supervised: output logged and echoed, exit codes
known, stopped with SIGTERM and then SIGKILL of what is left of its process tree.

Used for the node processes of a `local_mp` launch, for the per-host runners a `hosts`
launcher starts (`ssh`, `srun`, ...), and by a host runner (`actorq node --host I`)
for the nodes placed on its host. Imports nothing heavy (no Launchpad, TF or JAX), so
that a host runner starts in well under a second.
"""
from __future__ import annotations

import dataclasses
import os
import re
import signal
import subprocess
import sys
import threading
import time
from typing import Dict, List, Mapping, Optional, Sequence

import psutil

_ABSL_INFO = re.compile(r"^I\d{4} ")  # absl INFO lines go to the node's log file only


@dataclasses.dataclass(frozen=True)
class Command:
  """One child process.

  Attributes:
    title: ``group/i`` (or ``host/i``): the log file's name and the echo prefix.
    argv: the command line.
    env: variables set on top of this process's environment.
    stdin: bytes written to the child's standard input (which is then closed);
      None: no input.
  """
  title: str
  argv: Sequence[str]
  env: Mapping[str, str] = dataclasses.field(default_factory=dict)
  stdin: Optional[bytes] = None


class ExceptionLines:
  """Finds the exception lines of Python tracebacks in a process's output: a traceback
  ends with its first unindented line after the frames, `Type: message`."""

  def __init__(self):
    self.last: Optional[str] = None
    self._in_traceback = False

  def feed(self, line: str) -> bool:
    """Reads one line; True when it is an exception line (then in `last`)."""
    if line.startswith("Traceback (most recent call last):"):
      self._in_traceback = True
    elif self._in_traceback and line.strip() and not line[0].isspace():
      self._in_traceback = False
      self.last = line.strip()
      return True
    return False


class NodeProcesses:
  """Starts `commands` as children of this process (each in its own session) and
  supervises them.

  Args:
    commands: what to start, in order.
    log_dir: each child's output goes to ``<log_dir>/<title with / as _>.log``
      (None: no files).
    echo: also echo each output line (absl INFO lines excepted) to this process's
      stdout, prefixed ``[title]``.

  Attributes:
    errors: title -> the last exception line of that child's output.
  """

  def __init__(self, commands: Sequence[Command], log_dir: Optional[str], echo: bool = True):
    self.procs: List[subprocess.Popen] = []
    self.titles: List[str] = []
    self.errors: Dict[str, str] = {}
    self._threads: List[threading.Thread] = []
    if log_dir is not None:
      os.makedirs(log_dir, exist_ok=True)
    self._echo = echo
    lock = threading.Lock()
    for command in commands:
      proc = subprocess.Popen(
          list(command.argv), env={**os.environ, **command.env}, stdout=subprocess.PIPE,
          stderr=subprocess.STDOUT,
          stdin=subprocess.DEVNULL if command.stdin is None else subprocess.PIPE,
          start_new_session=True)
      self.procs.append(proc)
      self.titles.append(command.title)
      path = (None if log_dir is None
              else os.path.join(log_dir, command.title.replace("/", "_") + ".log"))
      self._thread(self._pump, proc, command.title, path, lock)
      if command.stdin is not None:
        # A child reads its input only once it has started (seconds, for a node): a
        # thread writes it so that a large program does not hold up the next start.
        self._thread(self._feed, proc, command.stdin)

  def _thread(self, target, *args):
    t = threading.Thread(target=target, args=args, daemon=True)
    t.start()
    self._threads.append(t)

  @staticmethod
  def _feed(proc, data: bytes):
    try:
      proc.stdin.write(data)
      proc.stdin.close()
    except (BrokenPipeError, OSError, ValueError):
      pass  # the child ended first; its exit code says why

  def _pump(self, proc, title, path, lock):
    out = open(path, "w", encoding="utf-8", errors="replace") if path else None
    exceptions = ExceptionLines()
    try:
      for raw in iter(proc.stdout.readline, b""):
        line = raw.decode("utf-8", "replace")
        if exceptions.feed(line):
          self.errors[title] = exceptions.last
        if out is not None:
          out.write(line)
          out.flush()
        if self._echo and not _ABSL_INFO.match(line):
          with lock:
            try:
              sys.stdout.write(f"[{title}] {line}")
              sys.stdout.flush()
            except (OSError, ValueError):
              pass
    finally:
      if out is not None:
        out.close()

  def exit_codes(self) -> Dict[str, Optional[int]]:
    """Title -> exit code (None while running)."""
    return {title: proc.poll() for proc, title in zip(self.procs, self.titles)}

  def check(self, finish_title_prefix: Optional[str] = None) -> Optional[str]:
    """None while every child runs (a child whose title starts with
    `finish_title_prefix` may also have exited with 0); else why the program must end,
    with the child's last exception line if it printed one."""
    for title, code in self.exit_codes().items():
      if code is None:
        continue
      if code == 0 and finish_title_prefix and title.startswith(finish_title_prefix):
        continue
      if not code:
        return f"node {title} exited early"
      for t in self._threads:  # its output up to the exit (the pump ends at EOF)
        t.join(timeout=1.0)
      cause = self.errors.get(title)
      return f"node {title} exited with code {code}" + (f": {cause}" if cause else "")
    return None

  def running(self) -> bool:
    return any(p.poll() is None for p in self.procs)

  def cpu_seconds(self) -> Dict[str, float]:
    """Title -> CPU seconds (user + system, all threads) used so far by that child and
    the processes it started (`psutil`); a child that has exited is left out (its
    counters are gone with it)."""
    out = {}
    for proc, title in zip(self.procs, self.titles):
      if proc.poll() is not None:
        continue
      try:
        root = psutil.Process(proc.pid)
        tree = [root] + root.children(recursive=True)
      except psutil.NoSuchProcess:
        continue
      total = 0.0
      for p in tree:
        try:
          t = p.cpu_times()
          total += t.user + t.system
        except psutil.NoSuchProcess:
          pass
      out[title] = total
    return out

  def wait(self, timeout_s: float) -> bool:
    """Waits up to `timeout_s` seconds for every child to exit; True if all have."""
    deadline = time.time() + timeout_s
    while self.running() and time.time() < deadline:
      time.sleep(0.1)
    return not self.running()

  def stop(self, grace_s: float) -> None:
    """SIGTERM to every child, then SIGKILL to what is left of each tree after `grace_s`
    seconds (children a node started, and a node that ignored SIGTERM, go too)."""
    trees = {}
    for proc in self.procs:
      try:
        p = psutil.Process(proc.pid)
        trees[proc.pid] = [p] + p.children(recursive=True)
      except psutil.NoSuchProcess:
        trees[proc.pid] = []
      if proc.poll() is None:
        try:
          proc.send_signal(signal.SIGTERM)
        except ProcessLookupError:
          pass
    self.wait(grace_s)
    for proc in self.procs:
      for p in trees.get(proc.pid, []):
        try:
          if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
            p.kill()
        except psutil.NoSuchProcess:
          pass
      try:
        proc.wait(timeout=5)
      except subprocess.TimeoutExpired:
        pass
    for t in self._threads:
      t.join(timeout=2)


class Signals:
  """Records the first of `signals` this process receives while in the `with` block
  (`received`: its number, None until then) instead of dying of it; restores the old
  handlers on exit. A no-op outside the main thread, where handlers cannot be set."""

  def __init__(self, signals: Sequence[int] = (signal.SIGINT, signal.SIGTERM)):
    self.received: Optional[int] = None
    self._signals = tuple(signals)
    self._old = {}

  def __enter__(self) -> "Signals":
    if threading.current_thread() is threading.main_thread():
      for sig in self._signals:
        self._old[sig] = signal.signal(sig, self._handle)
    return self

  def _handle(self, signum, frame):
    del frame
    if self.received is None:
      self.received = signum

  def __exit__(self, *exc) -> None:
    for sig, old in self._old.items():
      signal.signal(sig, old)


def watch_launcher(launcher_pid: Optional[int]) -> None:
  """In a node process started by the launcher: stop this node if the launcher dies.

  A daemon thread checks the parent pid every second; when the launcher is gone
  (the node was orphaned, e.g. the launcher was SIGKILLed) it sends SIGTERM to
  this process, which Launchpad's worker manager turns into the stop event. No-op
  when the node runs inside the launcher's process (`local_mt`) or without a pid.
  """
  if launcher_pid is None or launcher_pid == os.getpid():
    return

  def watch():
    while True:
      time.sleep(1.0)
      if os.getppid() != launcher_pid:
        os.kill(os.getpid(), signal.SIGTERM)
        return

  threading.Thread(target=watch, name="launcher-watchdog", daemon=True).start()
