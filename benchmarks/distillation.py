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

import statistics
import sys
from typing import Any, Dict


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


if __name__ == "__main__":  # its flags live in cli/
  from actorq.cli.benchmarks import distillation as command_line
  sys.exit(command_line.main())
