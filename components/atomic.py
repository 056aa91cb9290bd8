"""Atomic file writes: a reader sees the old file or the whole new one, never a part.

`atomic_write(path)` yields a file open on a temporary file beside `path` (same
directory, so the final `os.replace` is a rename on one filesystem, atomic on POSIX);
when the block ends normally the temporary file replaces `path`, and when it raises the
temporary file is removed and `path` is left as it was. With `durable=True` the data and
the directory entry are fsynced first (a checkpoint survives a power loss, not only a
crash of the process). Every file the project writes for a later reader goes through it:
run.json, configs, CSV reports, checkpoints, sweep caches, Launchpad program files.

`write_json(path, data)` writes a JSON file whole (its folder made first): run.json, reports,
a benchmark's job and result files.

`write_together({path: data, ...})` replaces files that belong together (an exported
model and its JSON): the old set or the whole new set, never a mix (case B10).
"""
from __future__ import annotations

import contextlib
import itertools
import json
import os
import shutil
import signal
import tempfile
import threading
from typing import IO, Iterator, Mapping, Optional, Union

from actorq import core

# A process-wide counter keeps temporary names unique across threads of one process (two
# writers of the same path each get their own file; the last rename wins whole).
_COUNTER = itertools.count()
_LOCK = threading.Lock()


def _temporary_name(path: str) -> str:
  with _LOCK:
    n = next(_COUNTER)
  directory, name = os.path.split(os.path.abspath(path))
  return os.path.join(directory, f".{name}.tmp-{os.getpid()}-{n}")


@contextlib.contextmanager
def atomic_write(path: str, mode: str = "w", *, encoding: Optional[str] = "utf-8",
                 newline: Optional[str] = None, permissions: int = 0o666,
                 durable: bool = False) -> Iterator[IO]:
  """Opens a temporary file that replaces `path` when the `with` block ends normally.

  Args:
    path: the file to write; its directory must exist.
    mode: "w" (text) or "wb" (bytes).
    encoding, newline: text mode only, as `open`.
    permissions: of the new file before the umask (0o666: as `open` makes files; 0o600:
      readable by its owner only).
    durable: fsync the file and its directory before returning.

  Raises:
    ValueError: a mode other than "w" or "wb".
    OSError: from creating, writing or renaming (the temporary file is removed and
      `path` keeps its old content); whatever the block raises, likewise.
  """
  if mode not in ("w", "wb"):
    raise ValueError(f"atomic_write mode must be 'w' or 'wb', got {mode!r}")
  tmp = _temporary_name(path)
  fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, permissions)
  try:
    if mode == "wb":
      f = os.fdopen(fd, "wb")
    else:
      f = os.fdopen(fd, "w", encoding=encoding, newline=newline)
    with f:
      yield f
      if durable:
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
  except BaseException:
    with contextlib.suppress(FileNotFoundError):
      os.remove(tmp)
    raise
  if durable:
    dir_fd = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY)
    try:
      os.fsync(dir_fd)
    finally:
      os.close(dir_fd)


def write_json(path: str, data, indent: Optional[int] = 1, **dump_kwargs) -> None:
  """Writes `data` as JSON to `path` whole (`atomic_write`: a reader never sees half a
  file), making its folder first; `dump_kwargs` go to `json.dump` (e.g. sort_keys).

  Raises:
    TypeError: a value JSON cannot hold (`path` keeps its old content).
    OSError: from making the folder or writing.
  """
  os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  with atomic_write(path) as f:
    json.dump(data, f, indent=indent, **dump_kwargs)


def ensure_writable_dir(path: str, flag: str = "--logdir") -> str:
  """Creates `path` if needed and proves it writable with a probe file (a name of its own,
  so runs started together on one directory do not remove each other's probe).

  Call it after every other check, so a bad command leaves nothing behind.

  Returns:
    the absolute path.
  Raises:
    core.UsageError: when it is not a directory or cannot be written.
  """
  path = os.path.abspath(path)
  if os.path.exists(path) and not os.path.isdir(path):
    raise core.UsageError(f"{flag} {path} exists and is not a directory")
  try:
    os.makedirs(path, exist_ok=True)
    fd, probe = tempfile.mkstemp(prefix=".actorq-write-probe-", dir=path)
    os.close(fd)
    os.remove(probe)
  except OSError as e:
    raise core.UsageError(f"{flag} {path} is not a writable directory ({e.strerror})") from None
  return path


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
  """Within it, SIGINT and SIGTERM wait (blocked in this thread, delivered on exit), so
  a short sequence of renames is not cut in the middle. Only in the main thread, where
  Python runs signal handlers; elsewhere no change."""
  if (threading.current_thread() is not threading.main_thread()
      or not hasattr(signal, "pthread_sigmask")):
    yield
    return
  previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
  try:
    yield
  finally:
    signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def write_together(contents: Mapping[str, Union[bytes, str]], *, durable: bool = False) -> None:
  """Replaces the files of `contents` (path -> bytes, or str written as UTF-8) as one:
  a reader finds the old files or all the new ones (case B10).

  Every new file is first written whole to a temporary file beside its path (a full
  disk fails here, and nothing is replaced); then, with SIGINT/SIGTERM held
  (`signals_held`), the temporary files are renamed into place in the given order. If a
  rename fails, the files already replaced get their previous content back (kept as a
  hard link, or a copy where links are not supported) and a file that did not exist is
  removed. Only a crash of the machine between two renames can leave a mix.

  Raises:
    OSError: from writing, linking or renaming; every path keeps its old content (or
      stays absent) and no temporary file is left.
  """
  staged = {}
  backups = {}
  try:
    for path, data in contents.items():
      tmp = _temporary_name(path)
      staged[path] = tmp
      fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
      with os.fdopen(fd, "wb") as f:
        f.write(data.encode("utf-8") if isinstance(data, str) else data)
        if durable:
          f.flush()
          os.fsync(f.fileno())
    for path in contents:
      if os.path.exists(path):
        backup = _temporary_name(path) + ".old"
        try:
          os.link(path, backup)
        except OSError:
          shutil.copy2(path, backup)
        backups[path] = backup
    replaced = []
    with signals_held():
      try:
        for path in contents:
          os.replace(staged[path], path)
          del staged[path]
          replaced.append(path)
      except BaseException:
        for path in reversed(replaced):
          with contextlib.suppress(OSError):
            if path in backups:
              os.replace(backups.pop(path), path)
            else:
              os.remove(path)
        raise
    if durable:
      for directory in {os.path.dirname(os.path.abspath(p)) for p in contents}:
        dir_fd = os.open(directory, os.O_RDONLY)
        try:
          os.fsync(dir_fd)
        finally:
          os.close(dir_fd)
  finally:
    for leftover in list(staged.values()) + list(backups.values()):
      with contextlib.suppress(FileNotFoundError):
        os.remove(leftover)
