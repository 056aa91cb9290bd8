"""`python -m actorq.benchmarks.learner_step`:
the benchmark's flags, parsed here, and the calls of its functions with typed
arguments (argparse lives in cli/)."""
from __future__ import annotations

import json
import sys

from actorq.components import atomic
from actorq.benchmarks import learner_step as benchmark
from actorq.benchmarks.learner_step import measure
from actorq.cli.benchmarks import child_parser


def main(argv=None) -> int:
  args = child_parser(benchmark.__doc__.splitlines()[0], "--job").parse_args(argv)
  with open(args.job, encoding="utf-8") as f:
    job = json.load(f)
  try:
    result = measure(job["agent"], job["env"], job["overrides"], job["seed"], job["steps"])
  except Exception as e:  # pylint: disable=broad-except
    result = {"error": f"{type(e).__name__}: {e}".splitlines()[0]}
  atomic.write_json(args.out, result)
  return 0


if __name__ == "__main__":
  sys.exit(main())
