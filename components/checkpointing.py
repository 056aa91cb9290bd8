"""Atomic, checksummed checkpoints of a run's state.

A checkpoint is one file `ckpt-<step>.pkl` in a directory: a header line with the
SHA-256 of the payload, then the pickled state (numpy arrays and plain Python). It is
written to a temporary file, fsynced and renamed into place, so a reader never sees a
half-written checkpoint; a truncated or corrupted file fails its checksum and
`restore_latest` falls back to the previous one. The newest `keep` are kept.

A run checkpoint (`save_run`) also holds the Reverb tables, written by Reverb's own
checkpointer (`reverb.Client.checkpoint()`, which marks a finished checkpoint with a
DONE file) into a staging folder and then renamed to `replay-<step>` beside
`ckpt-<step>.pkl`; the pickle is written last, so a checkpoint exists only once both
halves do. Reverb's checkpointer keeps only its newest checkpoint, hence the rename.
`reverb_checkpointer(directory, replay_name)` gives the checkpointer a resumed server
starts with: it loads that `replay-<step>` (Reverb's fallback checkpoint) into the
tables and writes later checkpoints to the (emptied) staging folder.
"""
from __future__ import annotations

import hashlib
import os
import pickle
import re
import shutil
import warnings
from typing import Any, Callable, List, Optional, Tuple

from actorq import core
from actorq.components import atomic, checkpoint_file, fault_points

_PATTERN = checkpoint_file.PATTERN
_MAGIC = checkpoint_file.MAGIC
_REPLAY_PATTERN = re.compile(r"replay-(\d+)$")
REPLAY_STAGING = ".reverb-staging"


class CheckpointError(RuntimeError):
  """No readable checkpoint where one was expected."""


def _write_failed(what: str, error: BaseException) -> core.RunDirectoryError:
  return core.RunDirectoryError.writing(what, error, "the checkpoints written before are kept")


def save(directory: str, state: Any, step: int, keep: int = 3) -> str:
  """Writes `state` as `directory/ckpt-<step>.pkl` atomically; returns its path.

  Args:
    directory: created if missing.
    state: picklable (convert device arrays with `jax.device_get` first).
    step: the ordering key (e.g. actor steps); a later save with the same step replaces it.
    keep: how many of the newest checkpoints to keep (>= 1).

  Raises:
    core.RunDirectoryError: the file cannot be written (a full disk, ...); no partial
      file is left and the older checkpoints are untouched.
    KeyboardInterrupt: a signal during the write (Ctrl-C, `Preempted`) likewise leaves
      no partial file and the older checkpoints untouched.
  """
  if keep < 1:
    raise ValueError(f"keep must be >= 1, got {keep}")
  data = pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL)
  header = _MAGIC + hashlib.sha256(data).hexdigest().encode() + b" " + str(len(data)).encode() + b"\n"
  path = os.path.join(directory, f"ckpt-{int(step):012d}.pkl")
  try:
    os.makedirs(directory, exist_ok=True)
    with atomic.atomic_write(path, "wb", permissions=0o644, durable=True) as f:
      f.write(header)
      fault_points.point("checkpoint")  # a test's signal lands mid-write here
      f.write(data)
  except OSError as e:  # the temporary file is already removed
    raise _write_failed(path, e) from e
  for old in list_checkpoints(directory)[:-keep]:
    os.remove(old)
  return path


def list_checkpoints(directory: str) -> List[str]:
  """Checkpoint paths in `directory`, oldest first."""
  return checkpoint_file.list_paths(directory)


def load(path: str) -> Any:
  """Reads one checkpoint (`components.checkpoint_file.read`).

  Raises:
    CheckpointError: if the file is truncated, corrupted or not a checkpoint.
  """
  try:
    return checkpoint_file.read(path)
  except ValueError as e:
    raise CheckpointError(str(e)) from None


def checksum(path: str) -> str:
  """The SHA-256 (hex) of a checkpoint's payload, from its header line (what `load`
  verifies); reading it does not unpickle anything.

  Raises:
    CheckpointError: not an actorq checkpoint.
    OSError: unreadable.
  """
  with open(path, "rb") as f:
    parts = f.readline().rstrip(b"\n").split(b" ")
  if len(parts) != 3 or parts[0] + b" " != _MAGIC:
    raise CheckpointError(f"{path} is not an actorq checkpoint")
  return parts[1].decode()


def restore_latest(directory: str, validate: Optional[Callable[[str, Any], None]] = None
                   ) -> Tuple[Optional[str], Any]:
  """The newest readable checkpoint in `directory` as `(path, state)`; `(None, None)` if none.

  Unreadable newer checkpoints are skipped (and reported through `warnings`), as are
  those for which `validate(path, state)` raises `CheckpointError` (e.g. a run
  checkpoint whose replay folder is missing, see `validate_run`).
  """
  for path in reversed(list_checkpoints(directory)):
    try:
      state = load(path)
      if validate is not None:
        validate(path, state)
      return path, state
    except (CheckpointError, pickle.UnpicklingError, EOFError) as e:
      warnings.warn(f"skipping unreadable checkpoint: {e}")
  return None, None


def step_of(path: str, pattern=_PATTERN) -> int:
  """The step a checkpoint was saved at (`save`'s `step`: actor steps for runs), from its
  file name ``ckpt-<step>.pkl``."""
  return int(pattern.search(path).group(1))


def save_run(directory: str, state: dict, step: int, keep: int = 3, replay_client=None) -> str:
  """Saves a run checkpoint: the Reverb tables (if `replay_client`) and then `state`.

  The client's server must have been made with `reverb_checkpointer(directory, ...)`.
  `state["replay_checkpoint"]` is set to the replay folder's name (or None). Replay
  folders whose `ckpt-<step>.pkl` is gone are removed.

  Returns:
    the pickle's path.

  Raises:
    core.RunDirectoryError: a write failed (a full disk, ...); the checkpoints written
      before are untouched (a half-written replay folder is removed by the next
      `save_run` or `reverb_checkpointer`).
  """
  state = dict(state)
  state["replay_checkpoint"] = None
  if replay_client is not None:
    target = os.path.join(directory, f"replay-{int(step):012d}")
    try:
      # Reverb reports a failed write as whatever its status maps to (a full disk is an
      # IndexError naming the file and "No space left on device").
      written = replay_client.checkpoint()
    except Exception as e:  # pylint: disable=broad-except
      raise _write_failed(f"the replay checkpoint {target}", e) from e
    try:
      if os.path.exists(target):
        shutil.rmtree(target)
      os.replace(written, target)
    except OSError as e:
      raise _write_failed(target, e) from e
    state["replay_checkpoint"] = os.path.basename(target)
  path = save(directory, state, step, keep)
  steps = {step_of(p) for p in list_checkpoints(directory)}
  for name in os.listdir(directory):
    m = _REPLAY_PATTERN.match(name)
    if m and int(m.group(1)) not in steps:
      shutil.rmtree(os.path.join(directory, name), ignore_errors=True)
  return path


def validate_run(path: str, state: Any) -> None:
  """`restore_latest` validator: a run checkpoint must be a dict whose replay folder
  (if it names one) exists and holds Reverb's DONE marker.

  Raises:
    CheckpointError: otherwise.
  """
  if not isinstance(state, dict):
    raise CheckpointError(f"{path} does not hold a run checkpoint")
  name = state.get("replay_checkpoint")
  if name and not os.path.isfile(os.path.join(os.path.dirname(path), name, "DONE")):
    raise CheckpointError(f"{path}: its replay checkpoint {name} is missing or incomplete")


def reverb_checkpointer(directory: str, replay_name: Optional[str] = None):
  """Reverb's checkpointer for a run's server.

  Empties `directory/.reverb-staging` (a leftover there is a Reverb checkpoint whose
  run checkpoint was never written) and, if `replay_name`, makes
  `directory/<replay_name>` the checkpoint the server loads at start.
  """
  import reverb
  staging = os.path.join(directory, REPLAY_STAGING)
  if os.path.isdir(staging):
    shutil.rmtree(staging)
  os.makedirs(staging)
  fallback = os.path.join(os.path.abspath(directory), replay_name) if replay_name else None
  return reverb.checkpointers.DefaultCheckpointer(path=staging, fallback_checkpoint_path=fallback)


def params_checksum(params: Any) -> str:
  """SHA-256 (first 16 hex digits) of a params tree's leaves in tree order (bytes, dtype
  and shape): two runs that end with bit-identical parameters print the same value (the
  "learner parameters" line of `actorq train`/`pbt`, `RunResult.params_checksum`)."""
  import jax  # here, not above: writing and reading checkpoint files needs no JAX
  import numpy as np
  digest = hashlib.sha256()
  for leaf in jax.tree_util.tree_leaves(jax.device_get(params)):
    leaf = np.asarray(leaf)
    digest.update(f"{leaf.dtype}{leaf.shape}".encode())
    digest.update(np.ascontiguousarray(leaf).tobytes())
  return digest.hexdigest()[:16]
