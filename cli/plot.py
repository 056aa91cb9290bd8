"""`actorq plot`: learning curves of one or more runs in one PNG.

    actorq plot RUN_DIR [RUN_DIR ...] [--out FILE.png] [--wall-time]

Reads each run's `eval.csv` (greedy evaluation return vs actor steps, written by
`actorq train`) and overlays the runs: the mean return as a line, +-1 standard
deviation over the evaluation episodes as a band. `--wall-time` adds a second panel
against wall-clock seconds. A resumed run evaluates some steps twice (those after its
checkpoint and before the interruption); the later row wins.
"""
from __future__ import annotations

import os
import warnings

from actorq.cli import main as cli
from actorq.components import atomic
from actorq.components import run_dir as run_dir_lib
from actorq.launch import spec as spec_lib

EVAL_CSV = run_dir_lib.EVAL_CSV


def add_parser(subparsers):
  p = subparsers.add_parser("plot", help="learning curves of runs (eval return vs actor steps)")
  p.add_argument("runs", nargs="+", metavar="RUN_DIR", help="run directories of 'actorq train'")
  p.add_argument("--out", default=None, metavar="FILE.png",
                 help="output image (default: RUN_DIR/learning_curves.png for one run, "
                      "./learning_curves.png for several)")
  p.add_argument("--wall-time", action="store_true",
                 help="add a panel of eval return vs wall-clock seconds")
  p.add_argument("--title", default=None)
  return p


def run_label(run_dir: str) -> str:
  """`<dir name> (<agent>, <env>, <actor precision>)` where run.json says so."""
  label = os.path.basename(os.path.normpath(run_dir))
  try:
    with warnings.catch_warnings():  # a label needs no word on keys of other versions
      warnings.simplefilter("ignore")
      spec = spec_lib.RunSpec.load(run_dir)
  except cli.UsageError:
    return label
  precision = spec.config.get("actor_precision", "")
  return label + f" ({spec.agent}, {spec.env}{', ' + precision if precision else ''})"


def run(args) -> int:
  curves = []
  for run_dir in args.runs:
    path = os.path.join(run_dir, EVAL_CSV)
    if not os.path.isfile(path):
      raise cli.UsageError(f"{run_dir} has no {EVAL_CSV} (is it a run directory of 'actorq train'?)")
    columns = run_dir_lib.read_eval_columns(run_dir)
    if not columns.get("actor_steps"):
      raise cli.UsageError(f"{path} has no evaluation rows yet")
    curves.append((run_label(run_dir), columns))
  out = args.out or (os.path.join(args.runs[0], "learning_curves.png") if len(args.runs) == 1
                     else "learning_curves.png")
  if not out.lower().endswith(".png"):
    raise cli.UsageError(f"--out {out} must end in .png")
  out_dir = os.path.dirname(os.path.abspath(out))
  if not os.path.isdir(out_dir):
    raise cli.UsageError(f"--out {out}: directory {out_dir} does not exist")

  import matplotlib
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt
  import numpy as np

  panels = [("actor_steps", "actor steps")] + ([("wall_seconds", "wall-clock seconds")]
                                               if args.wall_time else [])
  fig, axes = plt.subplots(1, len(panels), figsize=(6.4 * len(panels), 4.2), squeeze=False)
  for ax, (x_key, x_label) in zip(axes[0], panels):
    for label, c in curves:
      x = np.asarray(c[x_key])
      y = np.asarray(c["episode_return"])
      std = np.nan_to_num(np.asarray(c.get("episode_return_std", [0.0] * len(y))))
      line, = ax.plot(x, y, marker="o", markersize=3, label=label)
      ax.fill_between(x, y - std, y + std, alpha=0.2, color=line.get_color(), linewidth=0)
    ax.set_xlabel(x_label)
    ax.set_ylabel("greedy evaluation return")
    ax.grid(alpha=0.3)
  axes[0][0].legend(fontsize=8, loc="best")
  fig.suptitle(args.title or "actorq learning curves", fontsize=10)
  fig.tight_layout()
  with atomic.atomic_write(out, "wb") as f:  # written whole
    fig.savefig(f, dpi=110, format="png")
  plt.close(fig)
  print(f"actorq: wrote {out}")
  for label, c in curves:
    returns = c["episode_return"]
    best = int(np.nanargmax(returns))
    print(f"  {label}: {len(returns)} evaluations to step {int(c['actor_steps'][-1])}; final "
          f"{returns[-1]:.1f}, best {returns[best]:.1f} at step {int(c['actor_steps'][best])}")
  return 0
