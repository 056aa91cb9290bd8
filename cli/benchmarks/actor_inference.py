"""`python -m actorq.benchmarks.actor_inference`:
the benchmark's flags, parsed here, and the calls of its functions with typed
arguments (argparse lives in cli/)."""
from __future__ import annotations

import argparse
import sys

from actorq.components import atomic
from actorq.benchmarks import actor_inference as benchmark
from actorq.benchmarks.actor_inference import run


def main(argv=None):
  parser = argparse.ArgumentParser(description=benchmark.__doc__.splitlines()[0])
  parser.add_argument("--quick", action="store_true", help="fewer repeats")
  parser.add_argument("--json", metavar="FILE", help="write the figures as JSON")
  args = parser.parse_args(argv)
  results = run(args.quick)
  r = results["mlp_3x2048"]
  print(f"\ntargets: payload <= 0.27x (3x2048: {r['payload_ratio']:.3f}x), "
        f"refresh <= 50 ms at 3x2048 ({r['refresh_ms']:.1f} ms)")
  if args.json:
    atomic.write_json(args.json, results, indent=2)
  return 0


if __name__ == "__main__":
  sys.exit(main())
