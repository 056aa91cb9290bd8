"""`python -m actorq.benchmarks.distributed_bench`:
the benchmark's flags, parsed here, and the calls of its functions with typed
arguments (argparse lives in cli/)."""
from __future__ import annotations

import argparse
import sys

from actorq.benchmarks import distributed_bench as benchmark
from actorq.benchmarks.distributed_bench import _child_main


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=benchmark.__doc__.splitlines()[0])
  parser.add_argument("--child", required=True, help="job JSON (internal)")
  parser.add_argument("--out", required=True, help="result JSON (internal)")
  args = parser.parse_args(argv)
  return _child_main(args.child, args.out)


if __name__ == "__main__":
  sys.exit(main())
