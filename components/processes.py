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
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

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
    self._log_dir = log_dir
    self._lock = threading.Lock()
    self._commands: List[Command] = []
    self._pumps: Dict[str, threading.Thread] = {}  # title -> its current child's output pump
    for command in commands:
      self.procs.append(self._start(command, {}, "w"))
      self.titles.append(command.title)
      self._commands.append(command)

  def _start(self, command: Command, env: Mapping[str, str], mode: str) -> subprocess.Popen:
    proc = subprocess.Popen(
        list(command.argv), env={**os.environ, **command.env, **env}, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL if command.stdin is None else subprocess.PIPE,
        start_new_session=True)
    path = (None if self._log_dir is None
            else os.path.join(self._log_dir, command.title.replace("/", "_") + ".log"))
    self._pumps[command.title] = self._thread(self._pump, proc, command.title, path,
                                              self._lock, mode)
    if command.stdin is not None:
      # A child reads its input only once it has started (seconds, for a node): a
      # thread writes it so that a large program does not hold up the next start.
      self._thread(self._feed, proc, command.stdin)
    return proc

  def restart(self, title: str, env: Mapping[str, str]) -> None:
    """Starts child `title` (which has exited) again with the same command and `env` on
    top of its own; its output is appended to its log file. What is left of the old
    child's process group (processes it started) is killed first.

    Raises:
      ValueError: `title` is unknown or still running.
    """
    k = self.titles.index(title)
    old = self.procs[k]
    if old.poll() is None:
      raise ValueError(f"{title} is still running")
    try:
      os.killpg(old.pid, signal.SIGKILL)  # its own session: the group is its pid
    except (ProcessLookupError, PermissionError):
      pass
    self.errors.pop(title, None)
    self.procs[k] = self._start(self._commands[k], env, "a")

  def _thread(self, target, *args):
    t = threading.Thread(target=target, args=args, daemon=True)
    t.start()
    self._threads.append(t)
    return t

  @staticmethod
  def _feed(proc, data: bytes):
    try:
      proc.stdin.write(data)
      proc.stdin.close()
    except (BrokenPipeError, OSError, ValueError):
      pass  # the child ended first; its exit code says why

  def _pump(self, proc, title, path, lock, mode="w"):
    out = open(path, mode, encoding="utf-8", errors="replace") if path else None
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
      return self.problem(title, code)
    return None

  def last_error(self, title: str) -> Optional[str]:
    """The last exception line child `title` printed (None if none), once its output up
    to its exit has been read (its pump ends at EOF; waited for at most 1 s)."""
    self._pumps[title].join(timeout=1.0)
    return self.errors.get(title)

  def problem(self, title: str, code: int) -> str:
    """Why the program must end when child `title` exited with `code`: one line, with the
    child's last exception line if it printed one."""
    if not code:
      return f"node {title} exited early"
    cause = self.last_error(title)
    return f"node {title} exited with code {code}" + (f": {cause}" if cause else "")

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


class ChildGroup:
  """Child processes started in sessions of their own (a terminal's Ctrl-C reaches the
  parent alone) and stopped together: `stop(signum)` forwards the signal to each running
  child once and refuses to start new ones. Thread-safe (a sweep starts its children from
  worker threads); the caller waits for and reaps each child (issue 42)."""

  def __init__(self):
    self._lock = threading.Lock()
    self._procs: Dict[int, subprocess.Popen] = {}
    self.stopping: Optional[int] = None  # the signal forwarded, once stopped

  def start(self, argv: Sequence[str], **popen_kwargs) -> Optional[subprocess.Popen]:
    """`subprocess.Popen(argv, start_new_session=True, **popen_kwargs)`; None once
    stopping."""
    with self._lock:
      if self.stopping is not None:
        return None
      proc = subprocess.Popen(list(argv), start_new_session=True, **popen_kwargs)
      self._procs[proc.pid] = proc
      return proc

  def finished(self, proc: subprocess.Popen) -> None:
    """Forgets `proc` (it has been waited for)."""
    with self._lock:
      self._procs.pop(proc.pid, None)

  def stop(self, signum: int) -> None:
    """Forwards `signum` to every running child (once) and starts no new one."""
    with self._lock:
      if self.stopping is not None:
        return
      self.stopping = int(signum)
      for proc in self._procs.values():
        if proc.poll() is None:
          try:
            proc.send_signal(signum)
          except ProcessLookupError:
            pass


def run_child(argv: Sequence[str], **popen_kwargs) -> Tuple[int, Optional[int]]:
  """Runs `argv` to its end as a `ChildGroup` of one and forwards the first SIGINT or
  SIGTERM this process receives meanwhile to it, once; the child is always waited for,
  so none is left running (issue 42). Signals are watched in the main thread only
  (elsewhere: a plain wait).

  Returns:
    (the child's exit status, the signal forwarded or None).
  """
  group = ChildGroup()
  with Signals() as sigs:
    proc = group.start(argv, **popen_kwargs)
    while True:
      try:
        code = proc.wait(timeout=0.2)
        break
      except subprocess.TimeoutExpired:
        pass
      if sigs.received is not None:
        group.stop(sigs.received)
  return code, group.stopping


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
