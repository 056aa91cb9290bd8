"""`python -m actorq.benchmarks.replay_cost`:
the benchmark's flags, parsed here, and the calls of its functions with typed
arguments (argparse lives in cli/)."""
from __future__ import annotations

import argparse
import sys

from actorq.components import atomic
from actorq.benchmarks import replay_cost as benchmark
from actorq.benchmarks.replay_cost import measure, report


def main(argv=None):
  parser = argparse.ArgumentParser(description=benchmark.__doc__.splitlines()[0])
  parser.add_argument("--steps", type=int, default=2_000)
  parser.add_argument("--batches", type=int, default=200)
  parser.add_argument("--batch-size", type=int, default=256)
  parser.add_argument("--obs-dim", type=int, default=24)
  parser.add_argument("--num-envs", type=int, default=32,
                      help="rows per call of the batched adder (vectorized actors)")
  parser.add_argument("--repeats", type=int, default=3,
                      help="rounds of reverb then local (a loaded machine shifts both alike)")
  parser.add_argument("--json", default=None, help="also write the figures to this file")
  args = parser.parse_args(argv)
  results = {"reverb": [], "local": []}
  for _ in range(args.repeats):
    for path in ("reverb", "local"):
      results[path].append(measure(path, args.steps, args.batches, args.batch_size,
                                   args.obs_dim, args.num_envs))
  summary = report(results, args.steps, args.batches, args.batch_size, args.obs_dim,
                   args.num_envs, args.repeats)
  if args.json:
    atomic.write_json(args.json, {"settings": vars(args), "figures": summary}, indent=2)


if __name__ == "__main__":
  sys.exit(main())
