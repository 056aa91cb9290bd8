"""How a run stops on a signal: SIGTERM (what SLURM, Kubernetes and `timeout` send) is
handled like Ctrl-C, a checkpoint is written first, and a second signal during that write
is recorded and dropped. Every runner uses these alike (`launch.local`, `launch.anakin`,
`launch.pbt`, `actorq train`/`pbt`/`sweep`, the benchmarks); `actorq` exits 128 + the
signal's number on `Preempted`. Light: imports no JAX."""
from __future__ import annotations

import contextlib
import os
import sys
import threading
import signal
from typing import Callable, Iterator, Optional

from actorq import core
from actorq.components import fault_points, processes


class Preempted(KeyboardInterrupt):
  """SIGTERM (what SLURM, Kubernetes and `timeout` send) during a run: handled like
  Ctrl-C (a checkpoint is written first). `signum` is the signal's number."""

  def __init__(self, signum: int):
    super().__init__(f"signal {signum}")
    self.signum = int(signum)


def stopped_by(signum: int, checkpoint_path: Optional[str] = None) -> KeyboardInterrupt:
  """The stop a run raises for signal `signum` after its stop checkpoint (`checkpoint_path`,
  None without one, set on it): KeyboardInterrupt for SIGINT (Ctrl-C), else `Preempted`."""
  stop = KeyboardInterrupt() if signum == signal.SIGINT else Preempted(signum)
  stop.checkpoint_path = checkpoint_path
  return stop


def stop_with_parent(environ=os.environ) -> None:
  """In `actorq train` started by another actorq process with `core.STOP_WITH_PARENT_ENV`
  set to its pid: SIGTERM this process (a stop with a checkpoint) once that parent is gone
  (`processes.watch_launcher`'s watchdog, checked every second). The variable is removed
  from `environ` first, so this run's own children (local_mp nodes) do not inherit it."""
  value = environ.pop(core.STOP_WITH_PARENT_ENV, None)
  if value:
    processes.watch_launcher(int(value))


@contextlib.contextmanager
def preemptible() -> Iterator[None]:
  """Within it, SIGTERM raises `Preempted` in the main thread (elsewhere: no change).
  The previous handler comes back on exit."""
  if threading.current_thread() is not threading.main_thread():
    yield
    return

  def handle(signum, frame):
    del frame
    raise Preempted(signum)

  previous = signal.signal(signal.SIGTERM, handle)
  try:
    yield
  finally:
    signal.signal(signal.SIGTERM, previous)


def checkpoint_at_stop(stop: KeyboardInterrupt, save: Optional[Callable[[], str]]) -> None:
  """On Ctrl-C or SIGTERM: sets `stop.checkpoint_path` to the checkpoint `save()` writes
  (None without `save`, i.e. without a logdir). It keeps the progress made since the last
  checkpoint. A second Ctrl-C or SIGTERM while it is written is recorded and dropped (the
  run is stopping already), so the write is never torn and the caller learns which
  checkpoint exists (case B9)."""
  stop.checkpoint_path = None
  if save is None:
    return
  with processes.Signals() as again:
    fault_points.point("stop_checkpoint")
    stop.checkpoint_path = save()
  if again.received is not None:
    print(f"actorq: signal {again.received} while the stop checkpoint was written: "
          "ignored, the run stops now", file=sys.stderr, flush=True)
