"""Loggers for a run directory: one CSV per label (acme's CSVLogger) and TensorBoard
event files beside them, throttled; and, in a tracked run, W&B or MLflow (`components.tracking`).

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
import threading
import warnings
from typing import Callable, Dict, Optional, Tuple

from acme.utils import loggers

from actorq import core
from actorq.components import tracking

TENSORBOARD_DIR = "tensorboard"
# Columns used as the x axis (TensorBoard "step"), first present wins.
STEP_KEYS = ("actor_steps", "learner_steps", "steps")


def row_step(data, step_keys, rows: int) -> Tuple[Optional[str], int]:
  """`(key, step)` of a logged row: its first present numeric key of `step_keys`, else
  `(None, rows)` (the rows written so far)."""
  for key in step_keys:
    if isinstance(data.get(key), numbers.Real) and not isinstance(data.get(key), bool):
      return key, int(data[key])
  return None, rows


def scalars(data) -> Dict[str, float]:
  """The row's numeric values as floats (bools, strings and None left out; NaN kept)."""
  return {str(k): float(v) for k, v in data.items()
          if isinstance(v, numbers.Real) and not isinstance(v, bool)}


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
    _, step = row_step(data, self._step_keys, self._rows)
    self._rows += 1
    try:
      with self._writer.as_default():
        for key, value in scalars(data).items():  # numpy scalars are numbers.Real too
          self._tf.summary.scalar(key, value, step=step)
      self._writer.flush()
    except self._tf.errors.OpError as e:  # e.g. a full disk under the event file
      raise core.RunDirectoryError.writing(f"TensorBoard events in {self._directory}",
                                           e) from e

  def close(self) -> None:
    self._writer.close()


class _TrackedRun:
  """One process's tracker (`components.tracking`) of one run directory: opened at the first
  row any label writes, closed when the last label's logger closes."""

  def __init__(self, logdir: str, name: str, run_id: str):
    self._logdir, self._name, self._run_id = logdir, name, run_id
    self._tracker = None
    self._open_labels = 0
    self._lock = threading.Lock()

  def logger(self, label: str) -> "TrackerLogger":
    with self._lock:
      self._open_labels += 1
    return TrackerLogger(self, label)

  def write(self, label: str, data) -> None:
    step_key, step = row_step(data, STEP_KEYS, 0)
    with self._lock:
      if self._tracker is None:
        self._tracker = tracking.TRACKERS[self._name]()
        self._tracker.open(self._logdir, self._run_id)
      self._tracker.log(label, step_key, step, scalars(data))

  def close_label(self) -> None:
    with self._lock:
      self._open_labels -= 1
      if self._open_labels == 0 and self._tracker is not None:
        self._tracker.close()
        self._tracker = None


class TrackerLogger(loggers.Logger):
  """One label's rows to the run's tracker, as ``<label>/<column>`` scalars at the row's
  step (`row_step`); added by `make_logger_factory` when the run directory is tracked."""

  def __init__(self, run: _TrackedRun, label: str):
    self._run, self._label = run, label

  def write(self, data) -> None:
    self._run.write(self._label, data)

  def close(self) -> None:
    self._run.close_label()


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
  `logdir/tensorboard/<label>`. A tracked run directory (`tracking.read`: `actorq train
  --track wandb|mlflow` wrote its tracking.json) adds a `TrackerLogger` per label.
  """
  cache: Dict[str, loggers.Logger] = {}
  tracked = tracking.read(logdir)
  run = None if tracked is None else _TrackedRun(logdir, tracked["tracker"], tracked["run_id"])

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
    if run is not None:
      to.append(run.logger(label))
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
