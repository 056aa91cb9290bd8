"""`python -m actorq.studies.lifetime_library`: the study's flags, parsed here, the call of
its functions with typed settings, and its report files (argparse lives in cli/)."""
from __future__ import annotations

import argparse
import datetime
import os
import shlex
import sys
from typing import Any, Dict

from actorq import core
from actorq.components import provenance
from actorq.components import atomic
from actorq.studies import lifetime_library as study
from actorq.studies import tables

PROG = "python -m actorq.studies.lifetime_library"


def _seeds(text: str):
  if "-" in text and "," not in text:
    low, high = text.split("-", 1)
    return tuple(range(int(low), int(high) + 1))
  return tuple(int(s) for s in text.split(","))


def parse(argv=None) -> argparse.Namespace:
  d = study.LibrarySettings()
  p = argparse.ArgumentParser(prog=PROG, description=study.__doc__.split("\n\n")[0])
  p.add_argument("--out", required=True, help="report folder (results.json, table.md, "
                 "returns.png)")
  p.add_argument("--tasks", default=",".join(d.tasks),
                 help="comma-separated environment ids with arguments, variants of one "
                 "gymnax task (default: nine CartPole variants)")
  p.add_argument("--seeds", default="0-4", help="e.g. 0-4 or 0,3,7")
  p.add_argument("--steps-per-task", type=int, default=d.steps_per_task)
  p.add_argument("--eval-every", type=int, default=d.eval_every)
  p.add_argument("--eval-episodes", type=int, default=d.eval_episodes)
  p.add_argument("--capacity", type=int, default=d.capacity, help="K, the library's policies")
  p.add_argument("--exploration", type=float, default=d.exploration,
                 help="c of the UCB1 policy selection")
  p.add_argument("--probe-episodes", type=int, default=d.probe_episodes)
  p.add_argument("--target", type=float, default=d.target)
  p.add_argument("--agent", default=d.agent)
  p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
  p.add_argument("--methods", default=",".join(study.METHODS))
  return p.parse_args(argv)


def _cell(ci: Dict[str, float], digits: int = 0) -> str:
  return f"{ci['mean']:.{digits}f} [{ci['ci_low']:.{digits}f}, {ci['ci_high']:.{digits}f}]"


def table(result: Dict[str, Any]) -> str:
  """The report's Markdown tables: the sequence's means per method, then per task."""
  methods = result["methods"]
  s = result["settings"]
  n = len(s["seeds"])
  top = tables.markdown_table(
      ["method", "mean return over the sequence", "mean retained return",
       f"mean steps to {s['target']:.0f}", "tasks reached", "wall s"],
      [[m, _cell(r["mean_return"], 1), _cell(r["mean_retained_return"], 1),
        _cell(r["mean_steps_to_target"]), f"{r['tasks_reached']}/{n * len(s['tasks'])}",
        r["wall_seconds"]] for m, r in methods.items()])
  header = ["task"] + [f"{m}: steps to {s['target']:.0f} (reached)" for m in methods] + [
      f"{m}: end return" for m in methods]
  rows = []
  for t, env_id in enumerate(s["tasks"]):
    row = [f"{t + 1}. `{env_id.split(':', 1)[1]}`"]
    row += [f"{_cell(r['tasks'][t]['steps_to_target'])} ({r['tasks'][t]['reached']}/{n})"
            for r in methods.values()]
    row += [_cell(r["tasks"][t]["end_return"]) for r in methods.values()]
    rows.append(row)
  per_task = tables.markdown_table(header, rows)
  parts = [top, "", per_task]
  if "library" in methods:
    chosen = tables.markdown_table(
        ["task"] + [f"seed {x}" for x in s["seeds"]],
        [[t + 1] + methods["library"]["tasks"][t]["selected"] for t in range(len(s["tasks"]))])
    parts += ["", "Policy the library trained on each task (K = "
              f"{s['capacity']}):", "", chosen]
  return "\n".join(parts) + "\n"


def plot(result: Dict[str, Any], path: str) -> None:
  """Greedy return through the sequence (mean over seeds, each method), task borders."""
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  import numpy as np  # pylint: disable=g-import-not-at-top
  s = result["settings"]
  fig, ax = plt.subplots(figsize=(10, 4))
  for method, r in result["methods"].items():
    curves = np.asarray(r["per_seed"]["curves"])  # [S, T, E + 1]
    mean = curves.mean(axis=0)
    points = mean.shape[1]
    for t in range(mean.shape[0]):
      x = t * s["steps_per_task"] + np.arange(points) * s["eval_every"]
      ax.plot(x, mean[t], color={"library": "tab:green", "single": "tab:blue",
                                 "scratch": "tab:gray"}.get(method),
              label=method if t == 0 else None)
  for t in range(1, len(s["tasks"])):
    ax.axvline(t * s["steps_per_task"], color="k", lw=0.5, alpha=0.3)
  ax.axhline(s["target"], color="r", lw=0.5, ls="--")
  ax.set_xlabel("actor steps through the sequence (task borders marked)")
  ax.set_ylabel(f"greedy return (mean of {len(s['seeds'])} seeds)")
  ax.legend()
  fig.tight_layout()
  with atomic.atomic_write(path, mode="wb") as f:
    fig.savefig(f, format="png", dpi=100)
  plt.close(fig)


def main(argv=None) -> int:
  args = parse(argv)
  try:
    settings = study.LibrarySettings(
        tasks=tuple(t.strip() for t in args.tasks.split(",") if t.strip()),
        seeds=_seeds(args.seeds), steps_per_task=args.steps_per_task,
        eval_every=args.eval_every, eval_episodes=args.eval_episodes,
        capacity=args.capacity, exploration=args.exploration,
        probe_episodes=args.probe_episodes, target=args.target, agent=args.agent,
        assignments=tuple(args.set))
    methods = tuple(m.strip() for m in args.methods.split(","))
    result = study.run(settings, methods, log=lambda m: print(m, file=sys.stderr, flush=True))
  except (core.UsageError, ValueError) as e:
    print(f"lifetime_library: {e}", file=sys.stderr)
    return 2
  result["command"] = " ".join([PROG] + [shlex.quote(a) for a in
                                         (sys.argv[1:] if argv is None else argv)])
  result["commit"] = provenance.commit()
  result["machine"] = provenance.machine_line()
  result["date"] = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
  atomic.write_json(os.path.join(args.out, "results.json"), result)
  text = table(result)
  with atomic.atomic_write(os.path.join(args.out, "table.md")) as f:
    f.write(text)
  plot(result, os.path.join(args.out, "returns.png"))
  print(text)
  return 0


if __name__ == "__main__":
  sys.exit(main())
