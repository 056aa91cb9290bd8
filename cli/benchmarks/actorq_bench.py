"""`python -m actorq.benchmarks.actorq_bench`:
the benchmark's flags, parsed here, and the calls of its functions with typed
arguments (argparse lives in cli/)."""
from __future__ import annotations

import argparse
import sys

from actorq.benchmarks.actorq_bench import _child_main


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description="child process of 'actorq bench'")
  parser.add_argument("--child", required=True)
  parser.add_argument("--out", required=True)
  args = parser.parse_args(argv)
  return _child_main(args.child, args.out)


if __name__ == "__main__":
  sys.exit(main())
