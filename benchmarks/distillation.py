"""QDagger students vs the same small network from scratch: actor steps to the teacher's
return, int8 actors, paired by seed (issue 55).

    .venv/bin/python benchmarks/distillation.py --teacher runs/teacher --out OUT \\
        --seeds 0-9 --student-set hidden_sizes=[64,64] --actor-precision int8

The teacher is a run directory (a DQN run). For each seed, two single-process runs with the
student's config (`--student-set`, `--actor-precision`): `qdagger` (distilled from the
teacher, `agents/qdagger`) and `dqn` (the same network and precision from scratch). Each is
evaluated greedily (at the actors' precision) every `--eval-every` actor steps and stops at
its first evaluation >= `--target` (default: the teacher's final evaluation return) or at
`--max-steps` (default: a quarter of the teacher's actor steps, the issue's budget).
Results go to `<out>/runs.json` after every run (a rerun skips the runs already there) and
`<out>/table.md`.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from typing import Any, Dict

from actorq.benchmarks import warm_start
from actorq.components import atomic
from actorq.launch import run_dir

ARMS = ("qdagger", "dqn")


def table(data: Dict[str, Any]) -> str:
  """The markdown summary of `runs.json`'s contents."""
  s, rows = data["settings"], data["runs"]
  cap = s["max_steps"]
  lines = [f"# QDagger student vs scratch: steps to the teacher's return {s['target']:g}", "",
           "    " + data["command"], "",
           f"Teacher: `{s['teacher']}` ({s['teacher_steps']} actor steps, hidden sizes "
           f"{s['teacher_hidden']}, final greedy return {s['teacher_return']:g}). Students: "
           f"{', '.join(s['student_set'])}, actors {s['actor_precision']}; greedy evaluation "
           f"at the actors' precision every {s['eval_every']} steps, {s['eval_episodes']} "
           f"episodes; runs stop at their first evaluation >= {s['target']:g} or at {cap} "
           f"steps (then '>{cap}'). Commit {data['commit']}, {data['machine']}.", "",
           "| seed | qdagger (distilled) | dqn (scratch) |", "|---|---|---|"]
  steps = {arm: [] for arm in ARMS}
  for seed in sorted({r["seed"] for r in rows}):
    arm = {r["arm"]: r for r in rows if r["seed"] == seed}
    cells = []
    for name in ARMS:
      if name not in arm:
        cells.append("not run")
        continue
      step = arm[name]["steps_to_target"]
      steps[name].append(step)
      cells.append(f">{cap}" if step is None else str(step))
    lines.append(f"| {seed} | " + " | ".join(cells) + " |")
  lines.append("")
  for name in ARMS:
    got = steps[name]
    if got:
      reached = [x for x in got if x is not None]
      median = statistics.median([x if x is not None else cap for x in got])
      lines.append(f"- {name}: reached the teacher's return within {cap} steps on "
                   f"{len(reached)}/{len(got)} seeds; median steps {'>' if median >= cap and len(reached) < len(got) else ''}{median:g} "
                   f"(unreached counted as {cap}).")
  return "\n".join(lines) + "\n"


def main(argv=None) -> int:
  p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  p.add_argument("--teacher", required=True)
  p.add_argument("--out", required=True)
  p.add_argument("--seeds", default="0-9")
  p.add_argument("--student-set", action="append", default=[], metavar="KEY=VALUE")
  p.add_argument("--actor-precision", default="int8")
  p.add_argument("--max-steps", type=int, default=None)
  p.add_argument("--eval-every", type=int, default=1_000)
  p.add_argument("--eval-episodes", type=int, default=10)
  p.add_argument("--target", type=float, default=None)
  p.add_argument("--arms", default=",".join(ARMS))
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
           "commit": warm_start.commit(), "machine": warm_start.machine(), "runs": []})
  data["settings"] = {"teacher": args.teacher, "teacher_steps": teacher_steps,
                      "teacher_hidden": info["config"]["hidden_sizes"],
                      "teacher_return": teacher_return, "target": target, "max_steps": cap,
                      "student_set": args.student_set, "actor_precision": args.actor_precision,
                      "eval_every": args.eval_every, "eval_episodes": args.eval_episodes}
  for seed in warm_start._seeds(args.seeds):  # pylint: disable=protected-access
    for arm in args.arms.split(","):
      if any(r["seed"] == seed and r["arm"] == arm for r in data["runs"]):
        continue
      sets = list(args.student_set) + ([f"teacher={os.path.abspath(args.teacher)}"]
                                       if arm == "qdagger" else [])
      spec = warm_start.spec_for(arm, info["env"], seed, cap, args.eval_every,
                                 args.eval_episodes, sets, actor_precision=args.actor_precision)
      row = {"seed": seed, "arm": arm, **warm_start.run_to_target(spec, target)}
      data["runs"].append(row)
      print(json.dumps(row), flush=True)
      with atomic.atomic_write(path) as f:
        json.dump(data, f, indent=1)
  with atomic.atomic_write(os.path.join(args.out, "table.md")) as f:
    f.write(table(data))
  print(table(data))
  return 0


if __name__ == "__main__":
  sys.exit(main())
