"""The file format of a checkpoint, read below the launch floor: a header line
``ACTORQ-CKPT-1 <sha256 of the payload> <payload bytes>`` then the pickled state.

`components.checkpointing` writes and manages checkpoints (atomic writes, keeping the newest
K, the Reverb half of a run checkpoint); this module is what an agent that reads another
run's state (QDagger's teacher, `agents/qdagger`) needs without importing the launch floor.
"""
from __future__ import annotations

import glob
import hashlib
import os
import pickle
import re
from typing import Any, List

MAGIC = b"ACTORQ-CKPT-1 "
PATTERN = re.compile(r"ckpt-(\d+)\.pkl$")


def list_paths(directory: str) -> List[str]:
  """Checkpoint paths ``ckpt-<step>.pkl`` in `directory`, oldest (lowest step) first."""
  paths = [p for p in glob.glob(os.path.join(directory, "ckpt-*.pkl")) if PATTERN.search(p)]
  return sorted(paths, key=lambda p: int(PATTERN.search(p).group(1)))


def read(path: str) -> Any:
  """The state in the checkpoint file `path`, its checksum verified.

  Raises:
    ValueError: not an actorq checkpoint, or truncated or corrupted (naming the path).
    OSError: unreadable.
  """
  with open(path, "rb") as f:
    header = f.readline()
    data = f.read()
  parts = header.rstrip(b"\n").split(b" ")
  if not header.startswith(MAGIC) or len(parts) != 3:
    raise ValueError(f"{path} is not an actorq checkpoint")
  digest, size = parts[1].decode(), int(parts[2])
  if len(data) != size or hashlib.sha256(data).hexdigest() != digest:
    raise ValueError(f"{path} is truncated or corrupted ({len(data)} of {size} bytes)")
  return pickle.loads(data)
