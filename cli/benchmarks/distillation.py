"""`python -m actorq.benchmarks.distillation`: the benchmark's flags, parsed here, and the calls
of its functions with typed arguments (argparse lives in cli/)."""
from __future__ import annotations

import argparse
import json
import os
import sys

from actorq.benchmarks import distillation as benchmark
from actorq.benchmarks import warm_start
from actorq.cli import main as cli
from actorq.components import provenance, run_dir


def main(argv=None) -> int:
  p = argparse.ArgumentParser(description=benchmark.__doc__.split("\n")[0])
  p.add_argument("--teacher", required=True)
  p.add_argument("--out", required=True)
  p.add_argument("--seeds", type=cli.seed_list("--seeds"), default="0-9")
  p.add_argument("--student-set", action="append", default=[], metavar="KEY=VALUE")
  p.add_argument("--actor-precision", default="int8")
  p.add_argument("--max-steps", type=int, default=None)
  p.add_argument("--eval-every", type=int, default=1_000)
  p.add_argument("--eval-episodes", type=int, default=10)
  p.add_argument("--target", type=float, default=None)
  p.add_argument("--arms", default=",".join(benchmark.ARMS))
  args = p.parse_args(argv)
  info = run_dir.read_info(os.path.abspath(args.teacher))
  teacher_return = run_dir.read_eval_columns(args.teacher)["episode_return"][-1]
  teacher_steps = int(info["train"]["steps"])
  target = args.target if args.target is not None else teacher_return
  cap = args.max_steps or teacher_steps // 4
  os.makedirs(args.out, exist_ok=True)
  path = os.path.join(args.out, "runs.json")
  data = (json.load(open(path, encoding="utf-8")) if os.path.exists(path) else
          {"command": " ".join(["python", "benchmarks/distillation.py"]
                               + (argv if argv is not None else sys.argv[1:])),
           "commit": provenance.commit(), "machine": provenance.machine_line(), "runs": []})
  data["settings"] = {"teacher": args.teacher, "teacher_steps": teacher_steps,
                      "teacher_hidden": info["config"]["hidden_sizes"],
                      "teacher_return": teacher_return, "target": target, "max_steps": cap,
                      "student_set": args.student_set, "actor_precision": args.actor_precision,
                      "eval_every": args.eval_every, "eval_episodes": args.eval_episodes}
  for seed in args.seeds:
    for arm in args.arms.split(","):
      if any(r["seed"] == seed and r["arm"] == arm for r in data["runs"]):
        continue
      sets = list(args.student_set) + ([f"teacher={os.path.abspath(args.teacher)}"]
                                       if arm == "qdagger" else [])
      spec = warm_start.spec_for(arm, info["env"], seed, cap, args.eval_every,
                                 args.eval_episodes, sets, actor_precision=args.actor_precision)
      warm_start.record(data, path, {"seed": seed, "arm": arm,
                                     **warm_start.run_to_target(spec, target)})
  warm_start.write_table(args.out, benchmark.table(data))
  return 0


if __name__ == "__main__":
  sys.exit(main())
