"""`python -m actorq.benchmarks.warm_start`: the benchmark's flags, parsed here, and the calls
of its functions with typed arguments (argparse lives in cli/)."""
from __future__ import annotations

import argparse
import json
import os
import sys

from actorq.benchmarks import warm_start as benchmark
from actorq.cli import main as cli
from actorq.components import provenance
from actorq.launch import local
from actorq.agents import warm_start


def main(argv=None) -> int:
  p = argparse.ArgumentParser(description=benchmark.__doc__.split("\n")[0])
  p.add_argument("--out", required=True)
  p.add_argument("--agent", default="dqn")
  p.add_argument("--env", default="gym:CartPole-v1")
  p.add_argument("--seeds", type=cli.seed_list("--seeds"), default="0-9")
  p.add_argument("--origin-seed", type=int, default=100)
  p.add_argument("--origin-steps", type=int, default=20_000)
  p.add_argument("--max-steps", type=int, default=50_000)
  p.add_argument("--eval-every", type=int, default=2_500)
  p.add_argument("--eval-episodes", type=int, default=10)
  p.add_argument("--target", type=float, default=475.0)
  p.add_argument("--init-keep", default=",".join(warm_start.DEFAULT_KEEP))
  p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
  p.add_argument("--table-only", action="store_true", help="rewrite table.md from runs.json")
  args = p.parse_args(argv)

  def spec(seed, steps, logdir):
    return benchmark.spec_for(args.agent, args.env, seed, steps, args.eval_every,
                              args.eval_episodes, args.set, logdir)

  os.makedirs(args.out, exist_ok=True)
  path = os.path.join(args.out, "runs.json")
  data = (json.load(open(path, encoding="utf-8")) if os.path.exists(path) else
          {"command": " ".join([os.path.basename(sys.executable), "benchmarks/warm_start.py"]
                               + (argv if argv is not None else sys.argv[1:])),
           "commit": provenance.commit(), "machine": provenance.machine_line(), "runs": []})
  if not args.table_only:
    origin = os.path.join(args.out, "origin")
    if not os.path.exists(os.path.join(origin, "run.json")):
      local.run(spec(args.origin_seed, args.origin_steps, origin).build())
    data["settings"] = {"agent": args.agent, "env": args.env, "origin_seed": args.origin_seed,
                        "origin_steps": args.origin_steps, "max_steps": args.max_steps,
                        "eval_every": args.eval_every, "eval_episodes": args.eval_episodes,
                        "target": args.target, "keep": args.init_keep.split(","),
                        "set": args.set, "origin": os.path.relpath(origin)}
    for seed in args.seeds:
      run = spec(seed, args.max_steps, None)
      for arm in ("scratch", "warm"):
        if any(r["seed"] == seed and r["arm"] == arm for r in data["runs"]):
          continue
        init = None
        if arm == "warm":
          init = warm_start.resolve(origin, args.init_keep, agent=run.agent, env_id=run.env,
                                    seed=seed, config=run.make_builder().config,
                                    launch="local")
        benchmark.record(data, path, {"seed": seed, "arm": arm,
                                      **benchmark.run_to_target(run, args.target, init)})
  benchmark.write_table(args.out, benchmark.table(data))
  return 0


if __name__ == "__main__":
  sys.exit(main())
