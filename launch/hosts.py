"""`hosts` launches: a distributed program's nodes placed on several machines.

    actorq train --launch hosts --hosts gpu1,cpu1,cpu2 [--start ssh|srun|print|TEMPLATE]

The launcher (`launch.distributed.launch(dp, "hosts")`) binds every node to a static
``host:port`` (ports `port_base`, `port_base + 1`, ... in program order), writes the
program once (`encode_program`: a one-line JSON header, then the node functions
pickled with cloudpickle) to ``<logdir>/program.actorq`` and starts, per host with
nodes, one host runner ``actorq node --program - --host I`` through the start command
(`HostsConfig.start`), the program arriving on its standard input. The host runner
(`run_host`) starts each of its host's nodes as ``actorq node --program - --task N``
(`run_task`) and supervises them, each with the environment overrides the launcher
wrote for it (`node_environment`: CPU only and one thread for every node but the learner,
as under `local_mp`). With ``--start print`` the launcher prints the
commands (with the file's path) for the user's scheduler to run, and supervises the
program over Courier only.

Placement (`place`): replay, counter, learner and the step limiter on the first host,
actors and the evaluator round-robin over the others (all on the one host if only one).

Stopping: no launcher can signal nodes on other machines, so the stop goes through the
counter node (`distributed_nodes.CounterNode`): every node and the launcher poll
`heartbeat` about once a second, a failing or early-ending node requests the stop
itself, and the counter requests it when a participant falls silent (its host died);
see `StopPoll` and `watch_program` for the other side.

Nothing here imports Launchpad, TF or JAX at module level: a host runner stays light.
"""
from __future__ import annotations

import dataclasses
import faulthandler
import json
import os
import re
import shlex
import signal
import socket
import string
import sys
import threading
import time
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from actorq.components import atomic
from actorq.components import processes
from actorq.launch import elastic

DEFAULT_PORT_BASE = 29150
FORMAT = "actorq-program/1"
PROGRAM_FILE = "program.actorq"
PARENT_PID_ENV = "ACTORQ_PARENT_PID"
LAUNCHER = "launcher"  # the launcher's participant title
STACK_DUMP_AFTER_S = 6.0  # a node not ended this long after its stop prints its stacks
# Groups on the first host; every other group is spread over the remaining hosts.
HEAD_GROUPS = ("replay", "counter", "learner", "limiter")
START_PRESETS = {
    "ssh": "ssh -o BatchMode=yes {host}",
    # A job step on one node of the allocation, beside the launcher's own step.
    "srun": "srun --nodes=1 --ntasks=1 --nodelist={host} --overlap",
    "print": None,
}
_HOST_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_FIELDS = {"host", "index"}


class ProgramFileError(ValueError):
  """Not a program file written by `encode_program` (or a truncated one)."""


def check_host(name: str) -> str:
  """A host name or IPv4 address (letters, digits, `.`, `_`, `-`).

  Raises:
    ValueError: anything else (spaces, shell characters, an empty name).
  """
  if not isinstance(name, str) or not _HOST_NAME.fullmatch(name):
    raise ValueError(f"bad host name {name!r}: use letters, digits, '.', '_' and '-'")
  return name


@dataclasses.dataclass(frozen=True)
class HostsConfig:
  """Where a program's nodes run and how their host runners are started.

  Attributes:
    hosts: host names or addresses, reachable from every host; the first runs
      replay, counter, learner and limiter.
    port_base: the first TCP port; node k with an address listens on `port_base + k`
      on its host (6 ports for 2 actors), in [1024, 65535].
    start: ``ssh``, ``srun``, ``print`` (print the commands, start nothing) or a
      command template with ``{host}`` and/or ``{index}`` (e.g. ``ip netns exec
      ns{index}``) to which the host runner's command line is appended.
    python: the Python interpreter on the hosts (with actorq installed).

  Raises:
    ValueError: no hosts, a bad host name, a port range outside [1024, 65535], or a
      start that is neither a preset nor a template.
  """
  hosts: Tuple[str, ...]
  port_base: int = DEFAULT_PORT_BASE
  start: str = "ssh"
  python: str = sys.executable

  def __post_init__(self):
    object.__setattr__(self, "hosts", tuple(self.hosts))
    if not self.hosts:
      raise ValueError("no hosts given")
    for host in self.hosts:
      check_host(host)
    if (isinstance(self.port_base, bool) or not isinstance(self.port_base, int)
        or not 1024 <= self.port_base <= 65535):
      raise ValueError(f"port base must be an integer in [1024, 65535], got {self.port_base!r}")
    if self.start not in START_PRESETS:
      try:
        fields = {f for _, f, _, _ in string.Formatter().parse(self.start) if f is not None}
        argv = shlex.split(self.start)
      except ValueError as e:
        raise ValueError(f"start command {self.start!r} is not valid: {e}") from None
      if not argv or not fields or not fields <= _FIELDS:
        raise ValueError(f"start must be one of {', '.join(START_PRESETS)} or a command "
                         f"template with {{host}} and/or {{index}}, got {self.start!r}")
    if not self.python or any(c.isspace() for c in self.python):
      raise ValueError(f"python must be a path without spaces, got {self.python!r}")

  def start_argv(self, index: int) -> Optional[List[str]]:
    """The start command for host `index` (None for ``print``)."""
    template = START_PRESETS.get(self.start, self.start)
    if template is None:
      return None
    return [word.format(host=self.hosts[index], index=index) for word in shlex.split(template)]

  def runner_argv(self, index: int, program: str = "-") -> List[str]:
    """The host runner's command line (without the start command)."""
    return [self.python, "-m", "actorq.cli.main", "node", "--program", program,
            "--host", str(index)]


def parse_host_list(text: str) -> Tuple[str, ...]:
  """``"a,b,c"`` -> ``("a", "b", "c")``. Raises ValueError: an empty or bad name."""
  names = tuple(part.strip() for part in text.split(","))
  if not names or any(not n for n in names):
    raise ValueError(f"--hosts takes comma-separated host names, got {text!r}")
  for name in names:
    check_host(name)
  return names


def read_hosts_file(path: str) -> Tuple[str, ...]:
  """One host per line; blank lines and ``#`` comments are skipped.

  Raises:
    ValueError: the file cannot be read, holds no host, or a bad name (with its line).
  """
  try:
    with open(path, encoding="utf-8") as f:
      lines = f.read().splitlines()
  except OSError as e:
    raise ValueError(f"cannot read hosts file {path}: {e.strerror}") from None
  hosts = []
  for number, line in enumerate(lines, 1):
    name = line.split("#", 1)[0].strip()
    if not name:
      continue
    try:
      hosts.append(check_host(name))
    except ValueError as e:
      raise ValueError(f"{path}:{number}: {e}") from None
  if not hosts:
    raise ValueError(f"hosts file {path} names no host")
  return tuple(hosts)


def _split_top(text: str) -> List[str]:
  """Splits at commas outside brackets."""
  parts, depth, current = [], 0, ""
  for c in text:
    if c == "[":
      depth += 1
    elif c == "]":
      depth -= 1
      if depth < 0:
        raise ValueError(f"unbalanced ']' in node list {text!r}")
    if c == "," and depth == 0:
      parts.append(current)
      current = ""
    else:
      current += c
  if depth:
    raise ValueError(f"unbalanced '[' in node list {text!r}")
  parts.append(current)
  return parts


def _expand_range(body: str, text: str) -> List[str]:
  out = []
  for item in body.split(","):
    if re.fullmatch(r"\d+", item):
      out.append(item)
      continue
    m = re.fullmatch(r"(\d+)-(\d+)", item)
    if not m or int(m.group(1)) > int(m.group(2)):
      raise ValueError(f"bad range {item!r} in node list {text!r}")
    width = len(m.group(1))  # SLURM keeps the zero padding of the lower bound
    out.extend(str(i).zfill(width) for i in range(int(m.group(1)), int(m.group(2)) + 1))
  return out


def expand_nodelist(text: str) -> List[str]:
  """A SLURM node list (``SLURM_JOB_NODELIST``) as host names, in order:
  ``"gpu01,cpu[01-03,07],r[1-2]n[1-2]"`` -> gpu01, cpu01, cpu02, cpu03, cpu07, r1n1,
  r1n2, r2n1, r2n2 (zero padding kept).

  Raises:
    ValueError: unbalanced brackets, a bad range or host name.
  """
  hosts: List[str] = []
  for part in _split_top(text.strip()):
    pieces = re.split(r"\[([^\]]*)\]", part)
    names = [""]
    for i, piece in enumerate(pieces):
      options = _expand_range(piece, text) if i % 2 else [piece]
      names = [n + o for n in names for o in options]
    for name in names:
      hosts.append(check_host(name))
  return hosts


def slurm_hosts(environ: Mapping[str, str] = os.environ) -> Optional[Tuple[str, ...]]:
  """The hosts of the SLURM allocation this runs in (`SLURM_JOB_NODELIST`), or None."""
  text = environ.get("SLURM_JOB_NODELIST") or environ.get("SLURM_NODELIST")
  return tuple(expand_nodelist(text)) if text else None


def place(groups: Mapping[str, int], num_hosts: int) -> Dict[str, int]:
  """Node title (``group/i``) -> host index, for groups (label -> node count) in order:
  `HEAD_GROUPS` on host 0, every other node round-robin over hosts 1..num_hosts-1
  (host 0 if it is the only one).

  Raises:
    ValueError: `num_hosts` < 1.
  """
  if num_hosts < 1:
    raise ValueError(f"num_hosts must be >= 1, got {num_hosts}")
  others = list(range(1, num_hosts)) or [0]
  out, k = {}, 0
  for label, count in groups.items():
    for i in range(count):
      if label in HEAD_GROUPS:
        out[f"{label}/{i}"] = 0
      else:
        out[f"{label}/{i}"] = others[k % len(others)]
        k += 1
  return out


# ---------------------------------------------------------------------------------------
# The program file: a JSON header line, then the node functions (cloudpickle).


def encode_program(header: Dict[str, Any], functions: Sequence[Any]) -> bytes:
  """The program file's bytes: `header` (with ``format`` set) as one JSON line, then
  `functions` (task N's entry point at index N) pickled with cloudpickle."""
  import cloudpickle  # pylint: disable=g-import-not-at-top
  from launchpad.launch import serialization  # pylint: disable=g-import-not-at-top
  serialization.enable_lru_cache_pickling_once()
  head = json.dumps({**header, "format": FORMAT}, sort_keys=True).encode("utf-8")
  return head + b"\n" + cloudpickle.dumps(list(functions))


def decode_header(data: bytes) -> Dict[str, Any]:
  """The header of a program file's bytes.

  Raises:
    ProgramFileError: not a program file of this format.
  """
  head, sep, _ = data.partition(b"\n")
  try:
    header = json.loads(head.decode("utf-8")) if sep else None
  except (UnicodeDecodeError, ValueError):
    header = None
  if not isinstance(header, dict) or header.get("format") != FORMAT:
    raise ProgramFileError(f"not an actorq program file (format {FORMAT})")
  return header


def decode_functions(data: bytes) -> List[Any]:
  """The node functions of a program file's bytes (unpickles: trusted files only)."""
  import pickle  # pylint: disable=g-import-not-at-top
  import cloudpickle  # pylint: disable=g-import-not-at-top
  _, _, payload = data.partition(b"\n")
  try:
    return cloudpickle.loads(payload)
  except (EOFError, ValueError, pickle.UnpicklingError) as e:  # truncated or corrupt
    raise ProgramFileError(f"the program file's node functions cannot be read: {e}") from None


def write_program(path: str, data: bytes) -> str:
  """Writes `data` to `path` atomically, readable by its owner only; returns the path."""
  with atomic.atomic_write(path, "wb", permissions=0o600) as f:
    f.write(data)
  return path


def host_tasks(header: Dict[str, Any], index: int) -> List[int]:
  """The task numbers placed on host `index`."""
  return [k for k, task in enumerate(header["tasks"]) if task["host"] == index]


# ---------------------------------------------------------------------------------------
# Host side: `actorq node --host I` and `actorq node --task N`.


def port_open(address: str, timeout_s: float = 1.0) -> bool:
  """Whether ``host:port`` accepts a TCP connection within `timeout_s` seconds."""
  host, _, port = address.rpartition(":")
  try:
    socket.create_connection((host, int(port)), timeout=timeout_s).close()
    return True
  except OSError:
    return False


class StopPoll:
  """One poll of a `hosts` program's stop: `poll()` calls `heartbeat(title)` on a
  `CounterNode` client (`connect()` makes one whose calls time out) and returns the
  stop reason, None while the program runs, or a reason of its own once the counter
  node has not answered for `silent_after_s` seconds (`startup_timeout_s` before its
  first answer): its host is gone, and with it the program.

  Until the first answer no call is made before `reachable()` (a plain TCP connect to
  the counter's port) says the server listens: a gRPC channel to a server that is not
  up backs off exponentially (1, 1.6, 2.6, ... s, shared by every client of that
  address in the process), and a counter node starting 30 s after the first call would
  be reached ~10 s late.

  Attributes:
    answered: whether the counter node has answered at least once.
  """

  def __init__(self, connect, title: str, silent_after_s: float = 15.0,
               startup_timeout_s: float = 180.0, reachable=None):
    self._connect = connect
    self._client = None
    self._title = title
    self._silent_after_s = float(silent_after_s)
    self._startup_timeout_s = float(startup_timeout_s)
    self._reachable = reachable
    self._last_ok = time.monotonic()
    self.answered = False

  @property
  def client(self):
    """The counter client (made on first use), for other calls to the counter node."""
    if self._client is None:
      self._client = self._connect()
    return self._client

  def __call__(self) -> Optional[str]:
    try:
      if not (self.answered or self._reachable is None or self._reachable()):
        raise ConnectionError("the counter node's port does not accept connections")
      reason = self.client.heartbeat(self._title)
    except Exception as e:  # pylint: disable=broad-except
      limit = self._silent_after_s if self.answered else self._startup_timeout_s
      silent = time.monotonic() - self._last_ok
      if silent > limit:
        return f"the counter node did not answer for {silent:.0f} s ({type(e).__name__})"
      return None
    self._last_ok, self.answered = time.monotonic(), True
    return reason


def watch_program(poll: StopPoll, title: str, heartbeat_s: float = 1.0) -> None:
  """In a node process of a `hosts` launch: stop this node when the program stops.

  A daemon thread calls `poll` every `heartbeat_s` seconds and sends SIGTERM to this
  process (Launchpad's worker manager turns it into the stop event) when it gets a
  reason.
  """

  def watch():
    while True:
      reason = poll()
      if reason is not None:
        print(f"actorq: {title} stopping: {reason}", flush=True)
        os.kill(os.getpid(), signal.SIGTERM)
        return
      time.sleep(heartbeat_s)

  threading.Thread(target=watch, name="program-watch", daemon=True).start()


def stop_poll(header: Dict[str, Any], title: str):
  """`title`'s poll of the program's stop (`StopPoll`) on the counter
  node named in a program header; its Courier calls time out after at most 5 s."""
  import courier  # pylint: disable=g-import-not-at-top
  address, timeout_s = header["counter"], min(5.0, header["silent_after_s"] / 3)
  return StopPoll(
      lambda: courier.Client(address, call_timeout=timeout_s), title,
      header["silent_after_s"], header["startup_timeout_s"],
      reachable=lambda: port_open(address, timeout_s))


def node_environment(task: Dict[str, Any], environ: Mapping[str, str] = os.environ
                     ) -> Dict[str, str]:
  """A task's environment overrides from its program header entry (the launcher's
  `placement.node_env`: CPU only, thread counts), with an ``XLA_FLAGS`` override appended
  to this host's own ``XLA_FLAGS`` rather than replacing it, a ``PYTHONPATH`` (where the
  launcher imported a ``module:Builder`` agent from) put before this host's own, and the
  host runner's pid."""
  env = {str(k): str(v) for k, v in task.get("env", {}).items()}
  if "XLA_FLAGS" in env:
    own = environ.get("XLA_FLAGS", "").split()
    env["XLA_FLAGS"] = " ".join(own + [f for f in env["XLA_FLAGS"].split() if f not in own])
  if "PYTHONPATH" in env and environ.get("PYTHONPATH"):
    env["PYTHONPATH"] = f"{env['PYTHONPATH']}{os.pathsep}{environ['PYTHONPATH']}"
  env[PARENT_PID_ENV] = str(os.getpid())
  return env


def run_host(data: bytes, index: int, echo: bool = True) -> int:
  """Runs the nodes of host `index`, each as ``actorq node --program - --task N`` (a
  child of this process, which it stops itself when this runner dies), until all have
  ended. An actor or evaluator node that dies is restarted (`elastic.Restarts`, the
  header's ``max_actor_restarts`` per node, rows in ``<logdir>/restarts_host_<index>.csv``)
  after telling the counter node (`CounterNode.restarting`).

  Returns:
    0 when every node ended cleanly; 1 when one failed and was not restarted (the others
    are stopped: a node that fails requests the program's stop itself, one that was
    killed cannot, so this runner does); 128 + signal when this runner was signalled (its
    nodes are stopped first).
  """
  header = decode_header(data)
  tasks = host_tasks(header, index)
  logdir = header.get("logdir")
  commands = [processes.Command(
      header["tasks"][k]["title"],
      [sys.executable, "-m", "actorq.cli.main", "node", "--program", "-", "--task", str(k)],
      node_environment(header["tasks"][k]), data) for k in tasks]
  grace = float(header["stop_grace_s"])
  restarts = elastic.Restarts(int(header.get("max_actor_restarts", 0)), logdir,
                              prefix=f"host {index}: ", filename=f"restarts_host_{index}.csv")
  counter = []  # the counter node's client, made at the first restart

  def tell_counter(method, *args):
    if not counter:
      counter.append(stop_poll(header, f"host/{index}").client)
    return getattr(counter[0], method)(*args)

  with processes.Signals((signal.SIGINT, signal.SIGTERM, signal.SIGHUP)) as sigs:
    procs = processes.NodeProcesses(
        commands, None if logdir is None else os.path.join(logdir, "logs"), echo=echo)
    while True:
      if sigs.received is not None:
        procs.stop(grace)
        return 128 + sigs.received
      for title in restarts.due():
        try:
          procs.restart(title, {elastic.RESTART_ENV: str(restarts.count(title))})
        except OSError as e:  # e.g. no memory or no process slot for it
          problem = f"node {title} could not be restarted: {e}"
          print(f"actorq: host {index}: {problem}; stopping this host's nodes", flush=True)
          try:
            tell_counter("request_stop", f"host {index}: {problem}")
          except Exception:  # pylint: disable=broad-except
            pass  # the launcher still sees this runner exit
          procs.stop(grace)
          return 1
      codes = procs.exit_codes()
      for title, code in codes.items():
        if code in (None, 0) or restarts.pending(title):
          continue
        problem = None
        if elastic.restartable(title) and restarts.max_restarts:
          problem = restarts.exited(title, code, procs.last_error(title))
          if problem is None:
            # From now the counter node waits up to its start-up timeout for the node's
            # next poll (the backoff included), instead of taking its silence for death.
            try:
              stopping = tell_counter("restarting", title)
            except Exception as e:  # pylint: disable=broad-except
              stopping = f"the counter node did not answer ({type(e).__name__})"
            if stopping is None:
              continue
            print(f"actorq: host {index}: {title} not restarted: {stopping}", flush=True)
            procs.stop(grace)
            return 1
          try:  # the node did not request the stop itself (it expected a restart)
            tell_counter("request_stop", f"host {index}: {problem}")
          except Exception:  # pylint: disable=broad-except
            pass  # the launcher still sees this runner exit
        print(f"actorq: host {index}: {problem or f'node {title} exited with code {code}'}; "
              "stopping this host's nodes", flush=True)
        procs.stop(grace)
        return 1
      if all(c == 0 for c in codes.values()):
        return 0
      time.sleep(0.2)


def _disarm_kill() -> None:
  """The node has ended: cancel the worker manager's hard kill. After SIGTERM it arms
  SIGALRM every second to count down to a kill, and once Python starts shutting down
  (which takes seconds with TF and JAX loaded) an alarm would end the process with
  -SIGALRM instead of its exit status."""
  signal.signal(signal.SIGALRM, signal.SIG_IGN)
  signal.alarm(0)


def _stop_requested(poll: StopPoll) -> bool:
  """Whether the counter node says the program's stop was requested (False when it
  does not answer: then nothing says this node's failure was part of a stop)."""
  try:
    return poll.client.stop_reason() is not None
  except Exception:  # pylint: disable=broad-except
    return False


def run_task(data: bytes, task: int) -> int:
  """Runs node `task` of the program in this process, as Launchpad's `process_entry`
  does (a worker manager turns SIGTERM into the node's stop event), with the program's
  stop: the node polls the counter node (`watch_program`), and
  requests the stop itself when it fails or ends without being asked to.

  Returns:
    0: ended cleanly (stopped on request, or the step limiter's finish); 1: failed or
    ended on its own.
  """
  header = decode_header(data)
  functions = decode_functions(data)
  from absl import flags  # pylint: disable=g-import-not-at-top
  from launchpad.launch import worker_manager  # pylint: disable=g-import-not-at-top
  if not flags.FLAGS.is_parsed():
    flags.FLAGS(sys.argv[:1], known_only=True)
  manager = worker_manager.WorkerManager(register_in_thread=True)
  stop = manager.stop_event()
  title = header["tasks"][task]["title"]
  is_counter = task == header["counter_task"]
  parent = os.environ.get(PARENT_PID_ENV)
  if parent:
    processes.watch_launcher(int(parent))
  poll = stop_poll(header, title)
  if not is_counter:
    watch_program(poll, title, header["heartbeat_s"])

  def request_stop(reason):
    print(f"actorq: {title}: {reason}", flush=True)
    try:
      poll.client.request_stop(f"{title}: {reason}")
    except Exception as e:  # pylint: disable=broad-except
      print(f"actorq: {title}: could not reach the counter node ({e!r})", flush=True)

  stopped_at = []  # when the stop event was set: how long the node then took is logged

  def note_stop():
    stop.wait()
    stopped_at.append(time.monotonic())
    # A node still running STACK_DUMP_AFTER_S after its stop (the worker manager kills it
    # at 10 s) prints every thread's stack to its log: where it hangs.
    faulthandler.dump_traceback_later(STACK_DUMP_AFTER_S, exit=False)

  threading.Thread(target=note_stop, name="stop-clock", daemon=True).start()
  # A node its host runner restarts (`elastic`) leaves the decision to the runner.
  restarted_by_runner = (elastic.restartable(title)
                         and int(header.get("max_actor_restarts", 0)) > 0)
  try:
    functions[task]()
  except BaseException as e:  # pylint: disable=broad-except
    faulthandler.cancel_dump_traceback_later()
    _disarm_kill()
    # The stop reaches the nodes up to a heartbeat apart: a node whose peer (the replay
    # node, say) has already stopped may fail on it before it hears the stop itself.
    # That is the program stopping, not this node failing.
    stopping = stop.is_set() or _stop_requested(poll)
    if stopping:
      print(f"actorq: {title} ended with {e!r} while stopping", flush=True)
    else:
      import traceback  # pylint: disable=g-import-not-at-top
      traceback.print_exc()
      if not restarted_by_runner:
        request_stop(f"failed: {e!r}")
      return 1
  else:
    faulthandler.cancel_dump_traceback_later()
    _disarm_kill()
    if not (stop.is_set() or is_counter or title.startswith("limiter/")):
      if restarted_by_runner:
        print(f"actorq: {title}: ended without a stop request", flush=True)
      else:
        request_stop("ended without a stop request")
      return 1
  if not is_counter:
    try:
      poll.client.leave(title)
    except Exception:  # pylint: disable=broad-except
      pass  # the counter node has already gone: nothing expects this node any more
  after = f" {time.monotonic() - stopped_at[0]:.1f} s after its stop" if stopped_at else ""
  print(f"actorq: {title} ended cleanly{after}", flush=True)
  return 0
