"""Named points where a test may signal this process (fault injection, issue 42).

A command reaches `point(phase)` at the moments a stop must be survivable: start-up,
acting, evaluation, checkpoint writing, the checkpoint written on a stop, export, a
sweep's child. When the environment variable `ACTORQ_FAULT_INJECT` is set, e.g.

    ACTORQ_FAULT_INJECT="acting@300:SIGINT,stop_checkpoint:SIGINT"

the n-th time (`@n`, default 1) this process reaches `phase` it sends itself the signal,
as a user's Ctrl-C or a scheduler's SIGTERM would arrive there; entries are separated by
commas, and each fires once. Unset (the normal case), `point` is one dict lookup.

Phases reached: `startup` (train: after run.json, before the first step), `acting` (every
actor step of a single-process run), `evaluation` (each evaluation, before its first
episode), `checkpoint` (inside each checkpoint write, after part of the file is written),
`stop_checkpoint` (the checkpoint a stopped single-process run writes), `launch_poll`
(each poll of a distributed launcher), `export_write` (export, before its files are
replaced), `sweep_child` (a sweep, after it started a child run).
"""
from __future__ import annotations

import os
import signal
from typing import Dict, List, Tuple

ENV = "ACTORQ_FAULT_INJECT"


def parse(text: str) -> Dict[str, List[Tuple[int, int]]]:
  """`phase[@n]:SIGNAL,...` as {phase: [(n, signum), ...]}.

  Raises:
    ValueError: an entry without ':', a bad count or an unknown signal name.
  """
  plan: Dict[str, List[Tuple[int, int]]] = {}
  for entry in filter(None, (e.strip() for e in text.split(","))):
    where, sep, name = entry.partition(":")
    if not sep:
      raise ValueError(f"{ENV}: {entry!r} is not phase[@n]:SIGNAL")
    phase, _, nth = where.partition("@")
    try:
      n = int(nth) if nth else 1
      signum = int(getattr(signal, name)) if name.startswith("SIG") else int(name)
    except (ValueError, AttributeError):
      raise ValueError(f"{ENV}: {entry!r}: n must be an integer and SIGNAL a name like "
                       "SIGINT or a number") from None
    plan.setdefault(phase, []).append((n, signum))
  return plan


_PLAN = parse(os.environ.get(ENV, ""))
_SEEN: Dict[str, int] = {}


def point(phase: str) -> None:
  """Sends this process the signal planned for the current visit of `phase`, if any."""
  if phase not in _PLAN:
    return
  _SEEN[phase] = _SEEN.get(phase, 0) + 1
  for n, signum in _PLAN[phase]:
    if n == _SEEN[phase]:
      os.kill(os.getpid(), signum)
