"""`python -m actorq.benchmarks.peer_sb3`:
the benchmark's flags, parsed here, and the calls of its functions with typed
arguments (argparse lives in cli/)."""
from __future__ import annotations

from typing import Any
from typing import Dict
from typing import List
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

from actorq.components import atomic
from actorq.benchmarks import peer_sb3 as benchmark
from actorq.benchmarks.peer_sb3 import (
    EVAL_EPISODES, EVAL_EVERY, ONE_THREAD_ENV, TARGET, SB3_CHILD, actorq_child, run_actorq,
    summarize)


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=benchmark.__doc__.splitlines()[0])
  parser.add_argument("--sb3-python", required=False)
  parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
  parser.add_argument("--steps", type=int, default=50_000)
  parser.add_argument("--core", type=int, default=1)
  parser.add_argument("--out", default=None)
  parser.add_argument("--child-actorq", nargs=3, default=None, help=argparse.SUPPRESS)
  args = parser.parse_args(argv)
  if args.child_actorq:
    seed, steps, out = args.child_actorq
    run_actorq(int(seed), int(steps), out)
    return 0
  if not args.sb3_python:
    parser.error("--sb3-python is required (a Python where stable_baselines3 imports)")
  env = {**os.environ, **ONE_THREAD_ENV}
  results: Dict[str, List[Dict[str, Any]]] = {"actorq": [], "sb3": []}
  with tempfile.TemporaryDirectory() as tmp:
    script = os.path.join(tmp, "sb3_child.py")
    with open(script, "w", encoding="utf-8") as f:
      f.write(SB3_CHILD)
    for i, seed in enumerate(args.seeds):
      order = ["actorq", "sb3"] if i % 2 == 0 else ["sb3", "actorq"]
      for who in order:
        out = os.path.join(tmp, f"{who}-{seed}.json")
        child = (actorq_child(seed, args.steps, out) if who == "actorq" else
                 [args.sb3_python, script, str(seed), str(args.steps), str(EVAL_EVERY),
                  str(EVAL_EPISODES), out])
        t0 = time.time()
        subprocess.run(["taskset", "-c", str(args.core)] + child, env=env, check=True,
                       stdout=subprocess.DEVNULL)
        with open(out, encoding="utf-8") as f:
          run = json.load(f)
        run.update(seed=seed, process_seconds=time.time() - t0)
        reached = [r for r in run["rows"] if r["episode_return"] >= TARGET]
        run["first_step_at_target"] = reached[0]["actor_steps"] if reached else None
        run["steps_per_second"] = args.steps / run["train_seconds"]
        results[who].append(run)
        print(f"{who} seed {seed}: {run['steps_per_second']:.0f} actor steps/s, first >= "
              f"{TARGET:.0f} at {run['first_step_at_target']}, evaluations "
              f"{[round(r['episode_return']) for r in run['rows']]}", flush=True)
  summary = summarize(results)
  print(f"\nmedian actor steps/s (one core, evaluation excluded): actorq "
        f"{summary['actorq']['median_steps_per_second']:.0f}, SB3 "
        f"{summary['sb3']['median_steps_per_second']:.0f} (actorq/SB3 "
        f"{summary['ratio_of_medians']:.2f}x; paired by seed "
        f"{', '.join(f'{r:.2f}x' for r in summary['paired_ratios'])}, median "
        f"{summary['median_paired_ratio']:.2f}x)")
  print(f"median seconds of training to the first greedy evaluation >= {TARGET:.0f}: actorq "
        f"{summary['actorq']['median_seconds_to_target']:.0f}, SB3 "
        f"{summary['sb3']['median_seconds_to_target']:.0f}")
  if args.out:
    os.makedirs(args.out, exist_ok=True)
    atomic.write_json(os.path.join(args.out, "peer_sb3.json"),
                   {"settings": vars(args), "runs": results, "summary": summary})
  return 0


if __name__ == "__main__":
  sys.exit(main())
