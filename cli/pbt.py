"""`actorq pbt`: population-based training of N members of one agent, their updates jitted
and vmapped together, in one process or (`--launch local_mt|local_mp`) as a Launchpad
program (see `actorq.launch.pbt`, `actorq.agents.population.program`). The flags become a `RunSpec`
with a `population` section, run through `actorq.launch.run(spec)` as `actorq train`'s are.

    actorq pbt --agent dqn --env gym:CartPole-v1 --population 4 --steps 5000 \\
        --ready-every 1000 [--mutate learning_rate,discount,actor_precision] [--seed 0] \\
        [--num-envs 1] [--eval-episodes 5] [--quantile 0.25] [--resample-probability 0.25] \\
        [--set KEY=VALUE ...] [--logdir DIR]
    actorq pbt --resume DIR        # continue a stopped run from its newest checkpoint

Stops and faults are as in `actorq train`: Ctrl-C / SIGTERM from the first line on
checkpoint the population (in the loop) and exit 130 / 143 with one line naming the
checkpoint and `actorq pbt --resume DIR` (or that nothing is to resume: start again with
--overwrite); an environment that raises, or a loss that is not finite, is one line and
exit 1 after a checkpoint of the last whole state.

Bad input (a population below 2, --ready-every above --steps, an unknown or non-mutable
--mutate field, an agent without population support) is one line naming what is wrong
and what is allowed, exit status 2, and nothing written.
"""
from __future__ import annotations

import dataclasses
import os
import sys
from typing import Any, Dict, Sequence, Tuple

from actorq import core
from actorq.agents import population as population_agent
from actorq.cli import main as cli
from actorq.components import config_io
from actorq.components import checkpointing
from actorq.components import stops
from actorq.launch import pbt as pbt_lib
from actorq.components import run_dir
from actorq.launch import spec as spec_lib


# The flags that describe the run (pbt.json holds them; --resume takes them from there).
RUN_FLAGS = ("agent", "env", "population", "steps", "ready_every", "mutate", "seed",
             "num_envs", "eval_episodes", "set", "quantile", "resample_probability", "launch")
# How a population can be launched: in one process, or as a Launchpad program (one actor
# node acting for every member; `agents.population.program`).
LAUNCHES = ("local", "local_mt", "local_mp")


def add_parser(subparsers):
  p = subparsers.add_parser(
      "pbt", help="population-based training (Jaderberg et al. 2017) of N members, their "
                  "updates vmapped together, in one process or as a Launchpad program")
  p.add_argument("--agent", default=None,
                 help=f"agent with population support: {', '.join(population_agent.supported_agents())} "
                      f"(default: {spec_lib.DEFAULT_AGENT})")
  p.add_argument("--env", default=None,
                 help=f"environment id with a vector backend (default: {spec_lib.DEFAULT_ENV})")
  p.add_argument("--population", type=cli.positive_int("--population"), default=None,
                 metavar="N", help="members (>= 2; required without --resume)")
  p.add_argument("--steps", type=cli.positive_int("--steps"), default=None, metavar="S",
                 help="actor steps of each member (required without --resume)")
  p.add_argument("--ready-every", type=cli.positive_int("--ready-every"), default=None,
                 metavar="K", help="actor steps of a member between its evaluations and "
                                   "exploit/explore (<= --steps; required without --resume)")
  p.add_argument("--mutate", default=None, metavar="FIELD,...",
                 help="hyperparameters explore perturbs (x0.8/x1.2) or resamples (and draws "
                      "for members 1..N-1 at the start); "
                      + "; ".join(f"for {agent}: {', '.join(fields)}"
                                  for agent, fields in population_agent.mutable_fields().items())
                      + " (default: none, exploit only)")
  p.add_argument("--quantile", type=cli.number("--quantile"), default=None, metavar="Q",
                 help="fraction of the population in the top and in the bottom of the "
                      "truncation selection, in (0, 0.5] (default: "
                      f"{population_agent.config.DEFAULT_QUANTILE})")
  p.add_argument("--resample-probability", type=cli.number("--resample-probability"),
                 default=None, metavar="P",
                 help="chance that explore resamples a field instead of perturbing it, in "
                      "[0, 1] (default: "
                      f"{population_agent.config.DEFAULT_RESAMPLE_PROBABILITY})")
  p.add_argument("--seed", type=cli.seed("--seed"), default=None,
                 help="seeds everything of the run (default: 0)")
  p.add_argument("--num-envs", type=cli.positive_int("--num-envs"), default=None, metavar="B",
                 help="environments per member; the actors step N x B at once (default: 1)")
  p.add_argument("--eval-episodes", type=cli.positive_int("--eval-episodes"), default=None,
                 help="greedy episodes per evaluation; their mean return is the fitness "
                      "(default: 5)")
  p.add_argument("--set", action="append", default=None, metavar="KEY=VALUE",
                 help="set one config field of every member at the start (repeatable), as "
                      "in 'actorq train'")
  p.add_argument("--launch", default=None, choices=LAUNCHES,
                 help="local (default): one process, a function of the seed; local_mt / "
                      "local_mp: a Launchpad program (threads / a process per node) whose "
                      "evaluator evaluates every member every N x --ready-every summed actor "
                      "steps (not bit-reproducible; see docs/guides/pbt.md)")
  p.add_argument("--logdir", default=None,
                 help="run directory (default: runs/pbt-<agent>-<env>-<time>)")
  p.add_argument("--resume", default=None, metavar="DIR",
                 help="continue the population run in DIR from its newest checkpoint, with "
                      "the flags it was started with (its pbt.json)")
  p.add_argument("--overwrite", action="store_true",
                 help="start over in a --logdir that holds an earlier population run: its "
                      "pbt.json, population/, best/, CSV logs, tensorboard/, lineage.png "
                      "and a program's checkpoints/ and logs/ are removed first (without it "
                      "such a directory is refused; --resume continues it instead)")
  p.add_argument("--checkpoint-every", type=cli.positive_float("--checkpoint-every"),
                 default=pbt_lib.DEFAULT_CHECKPOINT_EVERY, metavar="MINUTES",
                 help="minutes between population checkpoints; one is also written at the "
                      "end and on Ctrl-C/SIGTERM (default: 10)")
  return p


def spec_from_args(args) -> spec_lib.RunSpec:
  """The run's `RunSpec` (its `population` section included) from the flags, or with
  --resume from the run's pbt.json (not yet checked: `pbt_lib.check`).

  Raises:
    cli.UsageError: a malformed --set, a missing --population/--steps/--ready-every, or
      --resume with a flag that describes the run.
  """
  if args.resume is not None:
    if args.overwrite:
      raise cli.UsageError("--overwrite starts a new run; --resume continues one: give one "
                           "of them")
    given = ["--" + f.replace("_", "-") for f in RUN_FLAGS if getattr(args, f) is not None]
    if given or args.logdir is not None:
      raise cli.UsageError(f"--resume {args.resume} continues the run with the flags it was "
                           f"started with (its {pbt_lib.PBT_JSON}); drop "
                           f"{', '.join(given or ['--logdir'])}")
    return dataclasses.replace(pbt_lib.load_settings(args.resume), resume=True,
                               checkpoint_every=args.checkpoint_every)
  missing = [f"--{f.replace('_', '-')}" for f in ("population", "steps", "ready_every")
             if getattr(args, f) is None]
  if missing:
    raise cli.UsageError(f"actorq pbt needs {', '.join(missing)} (or --resume DIR)")
  try:
    config = dict(config_io.parse_assignment(a) for a in args.set or [])
  except ValueError as e:
    raise cli.UsageError(str(e)) from None
  agent = args.agent or spec_lib.DEFAULT_AGENT
  env = args.env or spec_lib.DEFAULT_ENV
  mutate = tuple(f.strip() for f in (args.mutate or "").split(",") if f.strip())
  return pbt_lib.population_spec(
      agent, env, args.population, args.steps, args.ready_every, mutate=mutate,
      seed=0 if args.seed is None else args.seed, num_envs=args.num_envs or 1,
      eval_episodes=args.eval_episodes or pbt_lib.DEFAULT_EVAL_EPISODES, config=config,
      **{k: getattr(args, k) for k in ("quantile", "resample_probability")
         if getattr(args, k) is not None},
      logdir=args.logdir or run_dir.default_logdir("pbt", agent, env),
      checkpoint_every=args.checkpoint_every, launch=args.launch or "local",
      num_actors=None if args.launch in (None, "local") else 1)


def _start_line(s) -> None:
  p = s.population
  print(f"actorq pbt: {'resuming' if s.resume else 'training'} {p['size']} {s.agent} members "
        f"on {s.env}, {s.steps} actor steps each, ready every {s.eval_every} (seed "
        f"{s.seed}, mutating {','.join(p['mutate']) or 'nothing: exploit only'}); logs in "
        f"{s.logdir}", flush=True)


class _Report:
  """What the engine tells `actorq pbt` (`modes.Report`): its lines and warnings."""

  def say(self, line: str) -> None:
    print(line, flush=True)

  def warn(self, line: str) -> None:
    print(line, file=sys.stderr, flush=True)

  def steps(self, counts) -> None:
    del counts

  def poll(self, counts) -> None:
    del counts


def stop_message(logdir: str, saved: "str | None") -> str:
  """What a stopped population run (Ctrl-C, SIGTERM) says about its checkpoints,
  truthfully, as `actorq train` does (`cli.train.stop_message`): the checkpoint `saved` at
  the stop, else the newest earlier one, else that there is nothing to resume."""
  resume = f"actorq pbt --resume {logdir}"
  if saved:
    return f"actorq: checkpoint saved ({os.path.basename(saved)}); continue with: {resume}"
  if any(checkpointing.list_checkpoints(os.path.join(logdir, d))  # (a program's: checkpoints/)
         for d in (pbt_lib.POPULATION_DIR, run_dir.CHECKPOINTS)):
    return (f"actorq: no checkpoint was written at the stop; continue from the newest "
            f"earlier one with: {resume}")
  return (f"actorq: stopped before the first checkpoint, nothing to resume; start again "
          f"with the same flags and --overwrite (--logdir {logdir})")


def plot_lineage(rows: Sequence[Dict[str, Any]], path: str) -> None:
  """The lineage plot of a population run: each member's evaluation return against its
  actor steps (one line per member), every copy marked: a dotted arrow from the copied
  member's point at that time to the copying member's, and the copying member's point
  drawn as a cross. Written as a PNG to `path` (matplotlib, Agg).

  Args:
    rows: pbt.csv's rows (member, actor_steps, episode_return, copied_from).
  """
  import matplotlib  # pylint: disable=import-outside-toplevel (only when plotting)
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel
  fig, ax = plt.subplots(figsize=(8, 4.5))
  members = sorted({int(r["member"]) for r in rows})
  colors = {m: plt.cm.tab10(i % 10) for i, m in enumerate(members)}
  latest: Dict[int, Tuple[int, float]] = {}
  for m in members:
    mine = [r for r in rows if int(r["member"]) == m]
    ax.plot([r["actor_steps"] for r in mine], [r["episode_return"] for r in mine],
            "-o", ms=3, color=colors[m], label=f"member {m}")
  for r in rows:  # in the order they were written: a copy reads its source's latest point
    m = int(r["member"])
    latest[m] = (r["actor_steps"], r["episode_return"])
    if r["copied_from"] != "":
      src = int(r["copied_from"])
      if src in latest:
        ax.annotate("", xy=latest[m], xytext=latest[src],
                    arrowprops={"arrowstyle": "->", "linestyle": ":", "color": colors[src]})
      ax.plot(*latest[m], "x", ms=9, color=colors[m])
  ax.set_xlabel("actor steps of the member")
  ax.set_ylabel("evaluation return")
  ax.set_title("PBT lineage (x: the member copied the arrow's source, then explored)")
  ax.legend(fontsize=8)
  fig.tight_layout()
  fig.savefig(path, dpi=100)
  plt.close(fig)


def run(args) -> int:
  # SIGTERM is a stop like Ctrl-C from the first line on (case B18), as in `actorq train`.
  with stops.preemptible():
    return _run(args)


def _run(args) -> int:
  settings = spec_from_args(args)
  try:
    result = pbt_lib.run(settings, overwrite=args.overwrite, report=_Report(),
                         on_start=_start_line)
  except KeyboardInterrupt as e:
    if os.path.isfile(os.path.join(settings.logdir, pbt_lib.PBT_JSON)):
      print(stop_message(settings.logdir, getattr(e, "checkpoint_path", None)),
            file=sys.stderr, flush=True)
    raise
  except core.RunFailure as e:
    if getattr(e, "checkpoint_path", None):
      raise type(e)(f"{e}; continue from the checkpoint "
                    f"({os.path.basename(e.checkpoint_path)}) with: actorq pbt --resume "
                    f"{settings.logdir}") from e
    raise
  plot_lineage(result.rows, os.path.join(settings.logdir, pbt_lib.LINEAGE_PNG))
  by_member = {r["member"]: r for r in result.rows}
  for m, value in enumerate(result.final_returns):
    print(f"member {m}: final evaluation return {value:.1f} "
          f"({by_member[m]['precision']} actors)")
  print(f"best member {result.best_member} (return "
        f"{result.final_returns[result.best_member]:.1f}): {result.best_dir}; "
        f"{len(result.rows)} rows in {os.path.join(settings.logdir, pbt_lib.PBT_CSV)} "
        f"({result.wall_seconds:.1f} s); learner parameters {result.params_checksum}")
  return 0
