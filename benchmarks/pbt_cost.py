"""Population cost: wall-clock and CPU seconds of PBT populations against one agent at the
same actor steps per member, side by side in one process (issue 43; Flajolet et al. 2022
report a population of 8 at little more than one agent's cost once its updates are
vmapped).

Rows, each `--steps` actor steps per member, `--min-replay-size` items before learning,
one final evaluation of `--eval-episodes` episodes, no exploit (ready once, at the end):
  * one agent, `local.run` (what `actorq train` runs), evaluation every `--steps`;
  * the population machinery (`launch.pbt._Run`) at N = 1 (one member, its learner and
    actor split measured the same way as the populations');
  * populations of each `--populations` size (`launch.pbt.run`, fp32 members).
Columns: wall seconds, process CPU seconds (all threads: `time.process_time`), their
ratios to the one agent, and for the machinery rows the split: acting (the batched
inference + action selection), environment (vector env + adders), learning, of which
replay (sampling, stacking, priorities) and update (the vmapped step), evaluation.

    python benchmarks/pbt_cost.py [--agent dqn] [--env gym:CartPole-v1] [--steps 1000]
                                  [--populations 8,16] [--min-replay-size 200]
                                  [--eval-episodes 1] [--seed 0] [--json FILE]
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import time
from typing import Any, Dict, List

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from actorq.launch import experiment  # pylint: disable=g-import-not-at-top
from actorq.launch import local, pbt  # pylint: disable=g-import-not-at-top
from actorq.launch import spec as spec_lib  # pylint: disable=g-import-not-at-top

PARTS = ("act", "environment", "learn", "replay", "update", "evaluate")


def _timed(fn):
  wall, cpu = time.time(), time.process_time()
  out = fn()
  return out, time.time() - wall, time.process_time() - cpu


def measure(agent: str, env_id: str, steps: int, populations: List[int], min_replay_size: int,
            eval_episodes: int, seed: int) -> List[Dict[str, Any]]:
  """The rows of the module docstring, as dicts (name, members, wall_s, cpu_s, split)."""
  config = {"min_replay_size": min_replay_size}
  rows = []

  def one_agent():
    builder = spec_lib.make_builder(agent, config)
    return local.run(experiment.ExperimentConfig(
        builder=builder, env_id=env_id, num_steps=steps, seed=seed, eval_every=steps,
        eval_episodes=eval_episodes, checkpoint_every=None))

  _, wall, cpu = _timed(one_agent)
  rows.append({"name": "one agent (local.run)", "members": 1, "wall_s": wall, "cpu_s": cpu})

  def settings(n):
    return pbt.PBTSettings(agent=agent, env_id=env_id, population=n, steps=steps,
                           ready_every=steps, seed=seed, eval_episodes=eval_episodes,
                           config=config)

  def machinery_of_one():
    # `check` refuses N = 1 (PBT needs two members); `_Run` itself runs one.
    run = pbt._Run(dataclasses.replace(settings(2), population=1),  # pylint: disable=protected-access
                   pbt.check(settings(2)))
    run.run()
    return run.timings

  timings, wall, cpu = _timed(machinery_of_one)
  rows.append({"name": "population machinery, N = 1", "members": 1, "wall_s": wall,
               "cpu_s": cpu, **{f"{k}_s": timings[k] for k in PARTS}})
  for n in populations:
    result, wall, cpu = _timed(lambda n=n: pbt.run(settings(n)))
    rows.append({"name": f"population of {n}", "members": n, "wall_s": wall, "cpu_s": cpu,
                 **{f"{k}_s": result.timings[k] for k in PARTS}})
  base_wall, base_cpu = rows[0]["wall_s"], rows[0]["cpu_s"]
  for row in rows:
    row["wall_x"], row["cpu_x"] = row["wall_s"] / base_wall, row["cpu_s"] / base_cpu
  return rows


def table(rows: List[Dict[str, Any]]) -> str:
  lines = [f"{'run':32s} {'wall s':>8s} {'x1':>6s} {'CPU s':>8s} {'x1':>6s}   "
           + " ".join(f"{p:>11s}" for p in PARTS)]
  for r in rows:
    split = " ".join(f"{r[p + '_s']:11.1f}" if p + "_s" in r else f"{'-':>11s}" for p in PARTS)
    lines.append(f"{r['name']:32s} {r['wall_s']:8.1f} {r['wall_x']:6.2f} {r['cpu_s']:8.1f} "
                 f"{r['cpu_x']:6.2f}   {split}")
  return "\n".join(lines)


def main():
  p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  p.add_argument("--agent", default="dqn")
  p.add_argument("--env", default="gym:CartPole-v1")
  p.add_argument("--steps", type=int, default=1000, help="actor steps per member")
  p.add_argument("--populations", default="8,16")
  p.add_argument("--min-replay-size", type=int, default=200)
  p.add_argument("--eval-episodes", type=int, default=1)
  p.add_argument("--seed", type=int, default=0)
  p.add_argument("--json", default=None, help="also write the rows to this JSON file")
  args = p.parse_args()
  rows = measure(args.agent, args.env, args.steps,
                 [int(x) for x in args.populations.split(",")], args.min_replay_size,
                 args.eval_episodes, args.seed)
  print(table(rows))
  if args.json:
    with open(args.json, "w", encoding="utf-8") as f:
      json.dump({"args": vars(args), "rows": rows}, f, indent=1)


if __name__ == "__main__":
  main()
