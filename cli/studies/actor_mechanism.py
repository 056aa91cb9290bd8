"""`python -m actorq.studies.actor_mechanism`: the study's flags, parsed here, and the call of its
functions with typed arguments (argparse lives in cli/)."""
from __future__ import annotations

import argparse
import json
import sys

from actorq import core
from actorq.studies import actor_mechanism as study


def main(argv=None) -> int:
  p = argparse.ArgumentParser(prog="python -m actorq.studies.actor_mechanism",
                              description=study.__doc__.split("\n\n")[0])
  p.add_argument("--agent", default="dqn")
  p.add_argument("--env", default="gym:CartPole-v1")
  p.add_argument("--seed", type=int, default=0)
  p.add_argument("--steps", type=int, default=30_000)
  p.add_argument("--precision", default="int8")
  p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
  p.add_argument("--out", required=True)
  args = p.parse_args(argv)
  try:
    s = study.run(args.agent, args.env, args.seed, args.steps, args.precision, args.out, args.set)
  except core.UsageError as e:
    print(f"actor_mechanism: {e}", file=sys.stderr)
    return 2
  print(json.dumps({k: s[k] for k in ("precision", "seed", "steps", "mean_lag", "max_lag",
                                      "share_differ", "version_mismatch")}))
  return 0


if __name__ == "__main__":
  sys.exit(main())
