"""`python -m actorq.studies.cross_eval`: the study's flags, parsed here, and the call of its
functions with typed arguments (argparse lives in cli/)."""
from __future__ import annotations

import argparse
import sys

from actorq import core
from actorq.launch import spec as spec_lib
from actorq.studies import cross_eval as study


def main(argv=None) -> int:
  p = argparse.ArgumentParser(prog="python -m actorq.studies.cross_eval",
                              description=study.__doc__.split("\n\n")[0])
  p.add_argument("run_dir")
  p.add_argument("--episodes", type=int, default=study.EPISODES)
  p.add_argument("--seed", type=int, default=study.SEED)
  args = p.parse_args(argv)
  if args.episodes < 1:
    print("--episodes must be >= 1", file=sys.stderr)
    return 2
  try:
    run, _, _ = spec_lib.load_run(args.run_dir)
  except core.UsageError as e:
    print(f"cross_eval: {e}", file=sys.stderr)
    return 2
  result = study.evaluate(args.run_dir, study.precisions_for(run.config["actor_precision"]),
                          args.episodes, args.seed)
  path = study.write(args.run_dir, result)
  print(f"{path}: " + ", ".join(f"{p} {m:.1f}" for p, m in result["mean"].items()))
  return 0


if __name__ == "__main__":
  sys.exit(main())
