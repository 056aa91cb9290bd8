"""Running the `actorq` command line in-process from a test."""
from __future__ import annotations

import os
from typing import Dict, Sequence, Tuple

from actorq.cli import main as cli


def run_cli(argv: Sequence[str], capsys) -> Tuple[int, str, str]:
  """`actorq ARGV` in this process: (exit status, stdout, stderr).

  `capsys` is pytest's fixture; the parser's `SystemExit` (bad flags, exit 2) is caught
  and returned as the status like any other.
  """
  try:
    code = cli.main(list(argv))
  except SystemExit as e:
    code = e.code
  captured = capsys.readouterr()
  return code, captured.out, captured.err


def snapshot(path) -> Dict[str, Tuple[int, float]]:
  """Every file under `path` (relative name) with its size and modification time: equal
  before and after a command that must write nothing there."""
  out = {}
  for dirpath, _, files in os.walk(path):
    for name in files:
      full = os.path.join(dirpath, name)
      out[os.path.relpath(full, path)] = (os.path.getsize(full), os.path.getmtime(full))
  return out
