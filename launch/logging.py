"""Loggers for a run directory: one CSV per label (acme's CSVLogger) and TensorBoard
event files beside them, throttled.

`make_logger_factory(logdir)` returns `logger_fn(label, time_delta=0.0)`; the CSV is
`logdir/<label>.csv`, opened in append mode (so a resumed run continues its files),
flushed on every row (a write the directory refuses, e.g. on a full disk, raises
`actorq.core.RunDirectoryError` naming the file). The same rows go to TensorBoard event
files under `logdir/tensorboard/<label>/` (`tensorboard --logdir <logdir>/tensorboard`), one scalar
per numeric column with the CSV's column name, flushed on every row: acme's TF summary
logger writes nothing until it is closed (acme#230), so a crashed run would show none.
"""
from __future__ import annotations

import numbers
import os
import warnings
from typing import Callable, Dict, Optional

from acme.utils import loggers

from actorq import core

TENSORBOARD_DIR = "tensorboard"
# Columns used as the x axis (TensorBoard "step"), first present wins.
STEP_KEYS = ("actor_steps", "learner_steps", "steps")


class TensorBoardLogger(loggers.Logger):
  """Writes each row's numeric values as TensorBoard scalars, flushed per row.

  Args:
    directory: where the event file goes (created).
    step_keys: the row's step is its first present key of these (the key itself is
      written too); without any, the number of rows written so far.

  Non-numeric values (strings, None) are skipped; NaN is written as NaN.
  """

  def __init__(self, directory: str, step_keys=STEP_KEYS):
    import tensorflow as tf
    self._tf = tf
    self._directory = directory
    self._writer = tf.summary.create_file_writer(directory)
    self._step_keys = tuple(step_keys)
    self._rows = 0

  def write(self, data) -> None:
    step = next((int(data[k]) for k in self._step_keys
                 if isinstance(data.get(k), numbers.Real)), self._rows)
    self._rows += 1
    try:
      with self._writer.as_default():
        for key, value in data.items():
          if isinstance(value, bool) or not isinstance(value, numbers.Real):
            continue  # numpy scalars are numbers.Real too
          self._tf.summary.scalar(str(key), float(value), step=step)
      self._writer.flush()
    except self._tf.errors.OpError as e:  # e.g. a full disk under the event file
      raise core.RunDirectoryError.writing(f"TensorBoard events in {self._directory}",
                                           e) from e

  def close(self) -> None:
    self._writer.close()


class _Closing(loggers.Dispatcher):
  """One label's loggers. A write the run directory refuses (a full disk, a quota, a
  read-only mount) raises `core.RunDirectoryError` naming the file; `close()` never
  raises (a failure to close is a warning), so a launcher's cleanup after a failed run
  runs to its end."""

  def __init__(self, to, files, path):
    super().__init__(to)
    self._files = files
    self._path = path

  def write(self, data):
    try:
      super().write(data)
    except OSError as e:
      raise core.RunDirectoryError.writing(self._path, e) from e

  def close(self):
    try:
      super().close()
      for f in self._files:
        if not f.closed:
          f.close()
    except Exception as e:  # pylint: disable=broad-except
      warnings.warn(f"closing {self._path} failed: {e}")


def make_logger_factory(logdir: Optional[str], extra_fn: Optional[Callable] = None,
                        tensorboard: bool = True):
  """Returns `logger_fn(label, time_delta=0.0) -> acme Logger` (one per label; every one
made is closed by `logger_fn.close_all()`).

  `logdir=None` gives no-op loggers. `extra_fn(label)` may add more loggers to each
  label's dispatcher; `tensorboard` adds a `TensorBoardLogger` in
  `logdir/tensorboard/<label>`.
  """
  cache: Dict[str, loggers.Logger] = {}

  def logger_fn(label: str, time_delta: float = 0.0) -> loggers.Logger:
    if logdir is None:
      return loggers.NoOpLogger()
    if label in cache:
      return cache[label]
    path = os.path.join(logdir, f"{label}.csv")
    try:
      f = open(path, "a", encoding="utf-8")
    except OSError as e:
      raise core.RunDirectoryError.writing(path, e) from e
    to = [loggers.CSVLogger(f, flush_every=1)]
    if tensorboard:
      to.append(TensorBoardLogger(os.path.join(logdir, TENSORBOARD_DIR, label)))
    if extra_fn is not None:
      to.extend(extra_fn(label))
    logger = _Closing(to, [f], path)
    logger = loggers.NoneFilter(logger)
    if time_delta > 0:
      logger = loggers.TimeFilter(logger, time_delta)
    cache[label] = logger
    return logger

  def close_all() -> None:
    """Closes every logger made so far."""
    for logger in cache.values():
      logger.close()

  logger_fn.close_all = close_all
  return logger_fn
