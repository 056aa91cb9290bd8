"""Elastic actors: under `local_mp` and `hosts`, an actor or evaluator node whose process
dies is started again in its place, after a backoff, up to `max_restarts` times per node,
while the learner, replay and the other actors run on (RLlib's
`restart_failed_env_runners` / `max_num_env_runner_restarts`, IMPALA's replaceable actors).

    restarts = Restarts(max_restarts=3, logdir="runs/x")
    problem = restarts.exited("actor/1", -9, None)   # None: a restart is scheduled
    for title in restarts.due():                      # after its backoff (1, 2, 4, ... s)
      start_again(title, {RESTART_ENV: str(restarts.count(title))})

What is restarted (`restartable`): the groups in `RESTARTABLE_GROUPS` (actor, evaluator).
Replay, counter, learner and the step limiter are not: their failure stops the program, as
with `max_restarts=0` every node's does.

A restarted node is a new process of the same node function; it reads its restart number
from `RESTART_ENV` (`restart_number`) and an actor then acts on a fresh seed stream
(`restart_seed`): never its predecessor's environment episodes, nor another actor's. It
connects anew to replay, the variable source (the learner) and the counter, and its
exploration schedule continues from the run's summed actor steps (as a resumed actor's
does). The evaluator keeps its evaluation seed (every evaluation plays the same start
states by design, `single_agent.evaluate`).

Each restart is one line on the supervisor's output (node, cause: exit code or signal and
the node's last exception line, the restart number and backoff) and one row of
``<logdir>/restarts.csv`` (rewritten whole at each restart, `components.atomic`); the
run's summary line counts them (`summary`).

Imports nothing heavy (a `hosts` runner uses it).
"""
from __future__ import annotations

import csv
import dataclasses
import io
import os
import signal
import time
from typing import Dict, List, Mapping, Optional, Sequence

from actorq.components import atomic

RESTART_ENV = "ACTORQ_NODE_RESTART"  # a node process's restart number (absent or 0: first start)
RESTARTABLE_GROUPS = ("actor", "evaluator")
DEFAULT_MAX_RESTARTS = 3
BACKOFF_BASE_S = 1.0
BACKOFF_CAP_S = 30.0
RESTARTS_FILE = "restarts.csv"
# Counter keys (`hosts`): restarts of node group/i, and nodes dropped with their host.
RESTART_KEY_PREFIX = "restarts/"
DROPPED_KEY_PREFIX = "dropped/"
_FIELDS = ("wall_seconds", "node", "restart", "exit_code", "cause", "backoff_s")


def restartable(title: str) -> bool:
  """Whether node ``group/i`` is one of the groups a supervisor restarts."""
  return title.split("/", 1)[0] in RESTARTABLE_GROUPS


def restart_number(environ=os.environ) -> int:
  """This node process's restart number (0: its first start), from `RESTART_ENV`."""
  try:
    return max(0, int(environ.get(RESTART_ENV, "0")))
  except ValueError:
    return 0


def restart_seed(seed: int, restart: int) -> int:
  """The seed of restart `restart` of an actor first seeded `seed`: `seed` itself for
  restart 0, else a 31-bit seed drawn from numpy's `SeedSequence([seed, restart])`
  (O'Neill's PCG seeding: distinct entropy gives statistically independent streams),
  never `seed` itself. Actor seeds are small consecutive integers (`seed + 1 + i`), so a
  drawn one meets another actor's with probability ~N / 2**31."""
  if restart <= 0:
    return int(seed)
  import numpy as np  # pylint: disable=g-import-not-at-top
  entropy = [int(seed) % 2**64, int(restart)]
  while True:
    drawn = int(np.random.SeedSequence(entropy).generate_state(1)[0]) & 0x7FFFFFFF
    if drawn != int(seed):
      return drawn
    entropy.append(0)


def exit_cause(code: int) -> str:
  """``"signal SIGKILL"`` for a negative exit status (Popen's -signal), else
  ``"exit code N"``."""
  if code is not None and code < 0:
    try:
      return f"signal {signal.Signals(-code).name}"
    except ValueError:
      return f"signal {-code}"
  return f"exit code {code}"


def backoff_s(restart: int, base_s: float = BACKOFF_BASE_S, cap_s: float = BACKOFF_CAP_S) -> float:
  """Seconds before restart `restart` (1, 2, ...) starts: `base_s` * 2**(restart - 1),
  at most `cap_s`."""
  return float(min(cap_s, base_s * 2 ** max(0, restart - 1)))


@dataclasses.dataclass(frozen=True)
class Restart:
  """One restart: when (seconds since the supervisor started), which node, its restart
  number (1 for the first), the exit status of the process it replaces, the cause (exit
  code or signal, and the node's last exception line if it printed one) and the backoff."""
  wall_seconds: float
  node: str
  restart: int
  exit_code: int
  cause: str
  backoff_s: float


class Restarts:
  """Which exited node processes are started again, and when (per node: at most
  `max_restarts` restarts, each after `backoff_s`); the record of every restart.

  Args:
    max_restarts: restarts allowed per restartable node (>= 0; 0: none, any node's exit
      stops the program).
    logdir: where the restarts are written, one row each (None: nowhere).
    filename: their file in `logdir` (``restarts.csv``; a `hosts` runner writes its own).
    prefix: put before each line printed (e.g. ``"host 1: "``).
    base_backoff_s: the first restart's backoff (doubling, at most `BACKOFF_CAP_S`).
    clock: seconds, monotonic (tests pass their own).

  Raises:
    ValueError: `max_restarts` is not an integer >= 0.
  """

  def __init__(self, max_restarts: int, logdir: Optional[str] = None, prefix: str = "",
               base_backoff_s: float = BACKOFF_BASE_S, filename: str = RESTARTS_FILE,
               clock=time.monotonic):
    if isinstance(max_restarts, bool) or not isinstance(max_restarts, int) or max_restarts < 0:
      raise ValueError(f"max_restarts must be an integer >= 0, got {max_restarts!r}")
    self.max_restarts = max_restarts
    self.events: List[Restart] = []
    self._path = None if logdir is None else os.path.join(logdir, filename)
    self._prefix = prefix
    self._base = float(base_backoff_s)
    self._clock = clock
    self._start = clock()
    self._pending: Dict[str, float] = {}  # title -> time.monotonic() it may start again

  def count(self, title: str) -> int:
    """Restarts of `title` so far (scheduled ones included)."""
    return sum(1 for e in self.events if e.node == title)

  def pending(self, title: str) -> bool:
    """Whether `title` has exited and waits for its restart."""
    return title in self._pending

  def exited(self, title: str, code: int, error: Optional[str] = None) -> Optional[str]:
    """Node `title`'s process ended with `code` while the program runs (`error`: its last
    exception line, if any). Schedules its restart and returns None; or returns the line
    that stops the program: the node is not restartable, or has used its restarts."""
    cause = exit_cause(code) + (f": {error}" if error else "")
    if not restartable(title) or self.max_restarts == 0:
      return f"node {title} " + (f"exited with {cause}" if code else "exited early")
    n = self.count(title) + 1
    if n > self.max_restarts:
      return (f"node {title} exited with {cause}, after {n - 1} restart"
              f"{'s' if n - 1 != 1 else ''} (the limit, --max-actor-restarts "
              f"{self.max_restarts})")
    wait = backoff_s(n, self._base)
    self.events.append(Restart(round(self._clock() - self._start, 3), title, n, int(code),
                               cause, wait))
    self._pending[title] = self._clock() + wait
    print(f"actorq: {self._prefix}node {title} exited with {cause}; restart {n} of "
          f"{self.max_restarts} in {wait:g} s", flush=True)
    self._write()
    return None

  def due(self) -> List[str]:
    """The nodes whose backoff is over (each returned once): start them now, with
    ``{RESTART_ENV: str(count(title))}`` in their environment."""
    now = self._clock()
    ready = [t for t, at in self._pending.items() if at <= now]
    for title in ready:
      del self._pending[title]
    return ready

  def summary(self) -> str:
    """``"2 restarts (actor/0 x1, actor/2 x1)"``; ``""`` when none."""
    return summarize(per_node([e.node for e in self.events]))

  def per_node(self) -> Dict[str, int]:
    """Node title -> its restarts so far, in the order of their first restart."""
    return per_node([e.node for e in self.events])

  def _write(self) -> None:
    if self._path is None:
      return
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=_FIELDS)
    writer.writeheader()
    for e in self.events:
      writer.writerow(dataclasses.asdict(e))
    try:
      os.makedirs(os.path.dirname(self._path), exist_ok=True)
      with atomic.atomic_write(self._path) as f:
        f.write(buffer.getvalue())
    except OSError as e:  # the run goes on; the line above said it all
      print(f"actorq: could not write {self._path}: {e}", flush=True)


def read_restarts(logdir: str, filename: str = RESTARTS_FILE) -> List[Dict[str, str]]:
  """The rows of ``<logdir>/restarts.csv`` (or `filename`; [] when there is none)."""
  path = os.path.join(logdir, filename)
  if not os.path.exists(path):
    return []
  with open(path, encoding="utf-8") as f:
    return list(csv.DictReader(f))


def per_node(titles: Sequence[str]) -> Dict[str, int]:
  """Node title -> how often it occurs in `titles`, in order of first occurrence."""
  out: Dict[str, int] = {}
  for t in titles:
    out[t] = out.get(t, 0) + 1
  return out


def from_counts(counts: Mapping[str, float]) -> Dict[str, int]:
  """Node title -> restarts, from a counter's totals (`hosts`: each host runner adds
  ``restarts/<group>/<i>`` there, `RESTART_KEY_PREFIX`)."""
  return {k[len(RESTART_KEY_PREFIX):]: int(v) for k, v in counts.items()
          if k.startswith(RESTART_KEY_PREFIX) and v}


def summarize(restarts: Mapping[str, int]) -> str:
  """``"2 restarts (actor/0 x1, actor/2 x1)"`` of node title -> restarts; ``""`` for none."""
  n = sum(restarts.values())
  if not n:
    return ""
  return (f"{n} restart{'s' if n != 1 else ''} ("
          + ", ".join(f"{t} x{k}" for t, k in restarts.items() if k) + ")")
