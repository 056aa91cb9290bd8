"""Atomic, checksummed checkpoints of a run's state.

A checkpoint is one file `ckpt-<step>.pkl` in a directory: a header line with the
SHA-256 of the payload, then the pickled state (numpy arrays and plain Python). It is
written to a temporary file, fsynced and renamed into place, so a reader never sees a
half-written checkpoint; a truncated or corrupted file fails its checksum and
`restore_latest` falls back to the previous one. The newest `keep` are kept.
"""
from __future__ import annotations

import glob
import hashlib
import os
import pickle
import re
import tempfile
from typing import Any, List, Optional, Tuple

_PATTERN = re.compile(r"ckpt-(\d+)\.pkl$")
_MAGIC = b"ACTORQ-CKPT-1 "


class CheckpointError(RuntimeError):
  """No readable checkpoint where one was expected."""


def save(directory: str, state: Any, step: int, keep: int = 3) -> str:
  """Writes `state` as `directory/ckpt-<step>.pkl` atomically; returns its path.

  Args:
    directory: created if missing.
    state: picklable (convert device arrays with `jax.device_get` first).
    step: the ordering key (e.g. actor steps); a later save with the same step replaces it.
    keep: how many of the newest checkpoints to keep (>= 1).
  """
  if keep < 1:
    raise ValueError(f"keep must be >= 1, got {keep}")
  os.makedirs(directory, exist_ok=True)
  data = pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL)
  header = _MAGIC + hashlib.sha256(data).hexdigest().encode() + b" " + str(len(data)).encode() + b"\n"
  path = os.path.join(directory, f"ckpt-{int(step):012d}.pkl")
  fd, tmp = tempfile.mkstemp(prefix=".ckpt-", suffix=".tmp", dir=directory)
  try:
    with os.fdopen(fd, "wb") as f:
      f.write(header)
      f.write(data)
      f.flush()
      os.fsync(f.fileno())
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)
  except BaseException:
    if os.path.exists(tmp):
      os.remove(tmp)
    raise
  dir_fd = os.open(directory, os.O_RDONLY)
  try:
    os.fsync(dir_fd)
  finally:
    os.close(dir_fd)
  for old in list_checkpoints(directory)[:-keep]:
    os.remove(old)
  return path


def list_checkpoints(directory: str) -> List[str]:
  """Checkpoint paths in `directory`, oldest first."""
  paths = [p for p in glob.glob(os.path.join(directory, "ckpt-*.pkl")) if _PATTERN.search(p)]
  return sorted(paths, key=lambda p: int(_PATTERN.search(p).group(1)))


def load(path: str) -> Any:
  """Reads one checkpoint.

  Raises:
    CheckpointError: if the file is truncated, corrupted or not a checkpoint.
  """
  with open(path, "rb") as f:
    header = f.readline()
    data = f.read()
  parts = header.rstrip(b"\n").split(b" ")
  if not header.startswith(_MAGIC) or len(parts) != 3:
    raise CheckpointError(f"{path} is not an actorq checkpoint")
  digest, size = parts[1].decode(), int(parts[2])
  if len(data) != size or hashlib.sha256(data).hexdigest() != digest:
    raise CheckpointError(f"{path} is truncated or corrupted ({len(data)} of {size} bytes)")
  return pickle.loads(data)


def restore_latest(directory: str) -> Tuple[Optional[str], Any]:
  """The newest readable checkpoint in `directory` as `(path, state)`; `(None, None)` if none.

  Unreadable newer checkpoints are skipped (and reported through `warnings`).
  """
  import warnings
  for path in reversed(list_checkpoints(directory)):
    try:
      return path, load(path)
    except (CheckpointError, pickle.UnpicklingError, EOFError) as e:
      warnings.warn(f"skipping unreadable checkpoint: {e}")
  return None, None
