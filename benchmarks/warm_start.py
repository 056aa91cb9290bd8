"""Warm start vs scratch: actor steps to a greedy target return, paired by seed (issue 55).

    .venv/bin/python benchmarks/warm_start.py --out docs/results/warm_start_dqn_cartpole \\
        --seeds 0-9 --origin-seed 100 --origin-steps 20000 --max-steps 50000

One origin run (`--origin-seed`, `--origin-steps`, the agent's defaults plus `--set`) is
trained into `<out>/origin` (reused when its run.json is there). Then, for each seed, two
single-process runs with the same config and seed: from scratch, and warm-started from the
origin's final checkpoint (`agents.warm_start`, `--init-keep`). Each is evaluated greedily
every `--eval-every` actor steps (`--eval-episodes` episodes) and stops at its first
evaluation >= `--target` (or at `--max-steps`: not reached). Results are appended to
`<out>/runs.json` after every run (a rerun skips the pairs already there) and summarised in
`<out>/table.md`: per seed the steps to target of both arms, the medians, and whether the
warm median is at most half the scratch median (the issue's criterion, declared before the
run). Steps to target are evaluation steps: a multiple of `--eval-every`.
"""
from __future__ import annotations

import json
import os
import statistics
import sys
import time
from typing import Any, Dict, Optional

from actorq.components import atomic
from actorq.launch import local
from actorq.launch import spec as spec_lib


class _Reached(Exception):
  """Raised from the progress callback at the first evaluation at or above the target."""

  def __init__(self, step: int):
    super().__init__(step)
    self.step = step


def spec_for(agent: str, env: str, seed: int, steps: int, eval_every: int, eval_episodes: int,
             sets=(), logdir: Optional[str] = None,
             actor_precision: Optional[str] = None) -> spec_lib.RunSpec:
  """The spec `actorq train --agent --env --seed --steps --eval-every --eval-episodes
  [--logdir] [--actor-precision] --set ...` gives (no logdir: a run without files)."""
  return spec_lib.RunSpec.resolve(
      agent=agent, env=env, seed=seed, steps=steps, eval_every=eval_every,
      eval_episodes=eval_episodes, logdir=logdir, set=list(sets), dry_run=logdir is None,
      actor_precision=actor_precision)


def run_to_target(spec: spec_lib.RunSpec, target: float, init_from=None) -> Dict[str, Any]:
  """Runs `spec` in this process (no files) until its first greedy evaluation >= `target`
  or its steps: `{"steps_to_target": step or None, "wall_seconds", "final_returns"}`."""
  config = spec.build()
  config.init_from = init_from
  start = time.time()

  def progress(c):
    if c["actor_steps"] % spec.eval_every == 0 and c["eval_return"] >= target:
      raise _Reached(c["actor_steps"])

  try:
    result = local.run(config, progress=progress)
    step, returns = None, [r["episode_return"] for r in result.evaluations]
  except _Reached as reached:
    step, returns = reached.step, None
  return {"steps_to_target": step, "wall_seconds": round(time.time() - start, 1),
          "final_returns": returns}


def record(data: Dict[str, Any], path: str, row: Dict[str, Any]) -> None:
  """Appends one run's `row` to `data["runs"]`, prints it as a JSON line and rewrites
  `path` (runs.json: what a stopped benchmark continues from) whole."""
  data["runs"].append(row)
  print(json.dumps(row), flush=True)
  atomic.write_json(path, data)


def write_table(out: str, text: str) -> None:
  """Writes `text` to `out`/table.md whole and prints it."""
  with atomic.atomic_write(os.path.join(out, "table.md")) as f:
    f.write(text)
  print(text)


def _median(values):
  return statistics.median(values) if values else None


def table(data: Dict[str, Any]) -> str:
  """The markdown summary of `runs.json`'s contents."""
  s, rows = data["settings"], data["runs"]
  cap = s["max_steps"]
  lines = [f"# Warm start vs scratch: {s['agent']} on {s['env']}, steps to greedy {s['target']:g}",
           "", "    " + data["command"], "",
           f"Origin: seed {s['origin_seed']}, {s['origin_steps']} actor steps "
           f"(`{s['origin']}`); kept: {', '.join(s['keep'])}; evaluation every "
           f"{s['eval_every']} steps, {s['eval_episodes']} greedy episodes; runs stop at their "
           f"first evaluation >= {s['target']:g} or at {cap} steps (then counted as {cap}, "
           "marked '>'). Commit " + data["commit"] + ", " + data["machine"] + ".", "",
           "| seed | scratch | warm start | warm / scratch |", "|---|---|---|---|"]
  scratch, warm = [], []
  for seed in sorted({r["seed"] for r in rows}):
    arm = {r["arm"]: r for r in rows if r["seed"] == seed}
    if set(arm) != {"scratch", "warm"}:
      continue
    a, b = (arm[k]["steps_to_target"] for k in ("scratch", "warm"))
    a_n, b_n = a or cap, b or cap
    scratch.append(a_n)
    warm.append(b_n)
    lines.append(f"| {seed} | {'>' if a is None else ''}{a_n} | {'>' if b is None else ''}{b_n} "
                 f"| {b_n / a_n:.2f} |")
  if scratch:
    ms, mw = _median(scratch), _median(warm)
    lines += ["", f"Seeds: {len(scratch)}. Reached the target: scratch "
              f"{sum(r['steps_to_target'] is not None for r in rows if r['arm'] == 'scratch')}"
              f"/{len(scratch)}, warm {sum(r['steps_to_target'] is not None for r in rows if r['arm'] == 'warm')}"
              f"/{len(warm)}.", f"Median steps to target: scratch {ms:g}, warm {mw:g} "
              f"(ratio {mw / ms:.2f}); warm <= half of scratch on "
              f"{sum(w <= a / 2 for a, w in zip(scratch, warm))}/{len(scratch)} seeds.",
              f"Criterion declared before the run (issue 55): warm median <= half the scratch "
              f"median: **{'met' if mw <= ms / 2 else 'not met'}** over {len(scratch)} seeds."]
  return "\n".join(lines) + "\n"


if __name__ == "__main__":  # its flags live in cli/
  from actorq.cli.benchmarks import warm_start as command_line
  sys.exit(command_line.main())
