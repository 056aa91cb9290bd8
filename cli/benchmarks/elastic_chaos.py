"""`python -m actorq.benchmarks.elastic_chaos`: the benchmark's flags, parsed here, and the calls
of its functions with typed arguments (argparse lives in cli/)."""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time

from actorq.components import atomic
from actorq.benchmarks import elastic_chaos as benchmark
from actorq.cli import main as cli
from actorq.components import provenance
from actorq.launch import supervisors


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=benchmark.__doc__.split("\n\n")[0])
  defaults = benchmark.ChaosSettings()
  parser.add_argument("--seeds", type=cli.seed_list("--seeds"), default="0,1,2")
  parser.add_argument("--steps", type=int, default=defaults.steps)
  parser.add_argument("--eval-every", type=int, default=defaults.eval_every,
                      help="actor steps between evaluations (default: only at the limit)")
  parser.add_argument("--eval-episodes", type=int, default=defaults.eval_episodes)
  parser.add_argument("--num-actors", type=int, default=defaults.num_actors)
  parser.add_argument("--every", type=float, default=defaults.every,
                      help="seconds between kills")
  parser.add_argument("--max-restarts", type=int, default=defaults.max_restarts)
  parser.add_argument("--kill-until", type=float, default=defaults.kill_until,
                      help="no kill once this fraction of the steps is done (so that every "
                           "restart can finish before the run does)")
  parser.add_argument("--logdir", default=defaults.logdir)
  parser.add_argument("--json", default=None, help="write the rows and the summary here")
  parser.add_argument("--render", default=None, metavar="JSON",
                      help="print the markdown tables of a report written by --json and exit")
  args = parser.parse_args(argv)
  if args.render:
    with open(args.render, encoding="utf-8") as f:
      print(benchmark.render(json.load(f)), end="")
    return 0
  supervisors.register("local_mp_chaos", benchmark.ChaosProcesses, listed=False)
  settings = benchmark.ChaosSettings(**{f.name: getattr(args, f.name)
                                        for f in dataclasses.fields(benchmark.ChaosSettings)})
  os.makedirs(settings.logdir, exist_ok=True)
  rows = []
  for seed in args.seeds:
    for mode in ("none", "chaos"):
      rows.append(benchmark.run_one(seed, mode, settings))
      if rows[-1]["reason"] == "signal":  # the launcher was stopped: so is the benchmark
        return rows[-1]["exit"]
  report = {"command": " ".join(["benchmarks/elastic_chaos.py"] + list(argv or sys.argv[1:])),
            "machine": provenance.cpu_line(), "date": time.strftime("%Y-%m-%d"),
            "summary": benchmark.summarize(rows), "rows": rows}
  print(json.dumps(report["summary"], indent=1), flush=True)
  if args.json:
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    atomic.write_json(args.json, report)
  return 0 if report["summary"]["verdict"] == "pass" else 1


if __name__ == "__main__":
  sys.exit(main())
