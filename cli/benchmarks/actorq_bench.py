"""`python -m actorq.benchmarks.actorq_bench`:
the benchmark's flags, parsed here, and the calls of its functions with typed
arguments (argparse lives in cli/)."""
from __future__ import annotations

import sys

from actorq.benchmarks.actorq_bench import child_main
from actorq.cli.benchmarks import child_parser


def main(argv=None) -> int:
  args = child_parser("child process of 'actorq bench'", "--child", helps=False).parse_args(argv)
  return child_main(args.child, args.out)


if __name__ == "__main__":
  sys.exit(main())
