"""`python -m actorq.benchmarks.learner_interference`:
the benchmark's flags, parsed here, and the calls of its functions with typed
arguments (argparse lives in cli/)."""
from __future__ import annotations

from typing import Optional
from typing import Sequence
import argparse
import statistics
import sys

from actorq.components import atomic
from actorq.benchmarks import learner_interference as benchmark
from actorq.benchmarks.learner_interference import MODES, measure, neighbour


def main(argv: Optional[Sequence[str]] = None) -> int:
  parser = argparse.ArgumentParser(description=benchmark.__doc__.splitlines()[0])
  parser.add_argument("--rounds", type=int, default=2)
  parser.add_argument("--steps", type=int, default=15, help="learner steps per block")
  parser.add_argument("--rate", type=float, default=40.0, help="neighbour steps per second")
  parser.add_argument("--out", default=None, help="write the blocks as JSON here")
  parser.add_argument("--neighbour", choices=MODES, default=None, help=argparse.SUPPRESS)
  parser.add_argument("--cpu-s", type=float, default=0.004, help=argparse.SUPPRESS)
  args = parser.parse_args(argv)
  if args.neighbour is not None:
    neighbour(args.neighbour, args.rate, args.cpu_s)
    return 0
  if args.rounds < 1 or args.steps < 1 or not args.rate > 0:
    print("learner_interference: --rounds and --steps must be >= 1, --rate > 0", file=sys.stderr)
    return 2
  blocks = measure(args.rounds, args.steps, args.rate)
  alone = statistics.fmean(b["wall_ms"] for b in blocks["alone"])
  for mode, rows in blocks.items():
    wall = statistics.fmean(b["wall_ms"] for b in rows)
    print(f"{mode}: learner step {wall:.1f} ms = {wall / alone:.3f}x alone "
          f"(CPU {statistics.fmean(b['cpu_ms'] for b in rows):.1f} ms)")
  if args.out:
    atomic.write_json(args.out, {"rate": args.rate, "steps": args.steps, "blocks": blocks})
  return 0


if __name__ == "__main__":
  sys.exit(main())
