"""Loggers for a run directory: one CSV per label (acme's CSVLogger), throttled.

`make_logger_factory(logdir)` returns `logger_fn(label, time_delta=0.0)`; the CSV is
`logdir/<label>.csv`, opened in append mode (so a resumed run continues its files),
flushed on every row.
"""
from __future__ import annotations

import os
from typing import Callable, Dict, Optional

from acme.utils import loggers


class _Closing(loggers.Dispatcher):
  def __init__(self, to, files):
    super().__init__(to)
    self._files = files

  def close(self):
    super().close()
    for f in self._files:
      if not f.closed:
        f.close()


def make_logger_factory(logdir: Optional[str], extra_fn: Optional[Callable] = None):
  """Returns `logger_fn(label, time_delta=0.0) -> acme Logger`.

  `logdir=None` gives no-op loggers. `extra_fn(label)` may add more loggers (e.g.
  TensorBoard) to each label's dispatcher.
  """
  cache: Dict[str, loggers.Logger] = {}

  def logger_fn(label: str, time_delta: float = 0.0) -> loggers.Logger:
    if logdir is None:
      return loggers.NoOpLogger()
    if label in cache:
      return cache[label]
    f = open(os.path.join(logdir, f"{label}.csv"), "a", encoding="utf-8")
    to = [loggers.CSVLogger(f, flush_every=1)]
    if extra_fn is not None:
      to.extend(extra_fn(label))
    logger = _Closing(to, [f])
    logger = loggers.NoneFilter(logger)
    if time_delta > 0:
      logger = loggers.TimeFilter(logger, time_delta)
    cache[label] = logger
    return logger

  return logger_fn
