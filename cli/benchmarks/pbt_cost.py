"""`python -m actorq.benchmarks.pbt_cost`:
the benchmark's flags, parsed here, and the calls of its functions with typed
arguments (argparse lives in cli/)."""
from __future__ import annotations

import argparse
import sys

from actorq.components import atomic
from actorq.benchmarks import pbt_cost as benchmark
from actorq.benchmarks.pbt_cost import DEFAULT_CASES, cases_of, measure, table


def main():
  p = argparse.ArgumentParser(description=benchmark.__doc__.split("\n")[0])
  p.add_argument("--cases", default=DEFAULT_CASES,
                 help="comma-separated agent:env cases, measured in this order")
  p.add_argument("--agent", default=None, help="one case's agent (instead of --cases)")
  p.add_argument("--env", default=None, help="one case's environment (instead of --cases)")
  p.add_argument("--steps", type=int, default=1000, help="actor steps per member")
  p.add_argument("--populations", default="8,16")
  p.add_argument("--min-replay-size", type=int, default=200)
  p.add_argument("--eval-episodes", type=int, default=1)
  p.add_argument("--seed", type=int, default=0)
  p.add_argument("--json", default=None, help="also write the rows to this JSON file")
  args = p.parse_args()
  rows = []
  for agent, env_id in cases_of(args.cases, args.agent, args.env):
    rows += measure(agent, env_id, args.steps,
                    [int(x) for x in args.populations.split(",")], args.min_replay_size,
                    args.eval_episodes, args.seed)
  print(table(rows))
  if args.json:
    atomic.write_json(args.json, {"args": vars(args), "rows": rows})


if __name__ == "__main__":
  sys.exit(main())
