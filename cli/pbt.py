"""`actorq pbt`: population-based training of N members of one agent in one process, their
updates jitted and vmapped together (see `actorq.launch.pbt`).

    actorq pbt --agent dqn --env gym:CartPole-v1 --population 4 --steps 5000 \\
        --ready-every 1000 [--mutate learning_rate,discount] [--seed 0] [--num-envs 1] \\
        [--eval-episodes 5] [--set KEY=VALUE ...] [--logdir DIR]

Bad input (a population below 2, --ready-every above --steps, an unknown or non-mutable
--mutate field, an agent without population support) is one line naming what is wrong
and what is allowed, exit status 2, and nothing written.
"""
from __future__ import annotations

from actorq.cli import main as cli
from actorq.components import config_io
from actorq.launch import pbt as pbt_lib
from actorq.launch import run_dir
from actorq.launch import spec as spec_lib


def add_parser(subparsers):
  p = subparsers.add_parser(
      "pbt", help="population-based training (Jaderberg et al. 2017) of N members in one "
                  "process, their updates vmapped together")
  p.add_argument("--agent", default=spec_lib.DEFAULT_AGENT,
                 help="agent with population support (default: dqn)")
  p.add_argument("--env", default=spec_lib.DEFAULT_ENV,
                 help="environment id with a vector backend (default: gym:CartPole-v1)")
  p.add_argument("--population", type=cli.positive_int("--population"), required=True,
                 metavar="N", help="members (>= 2)")
  p.add_argument("--steps", type=cli.positive_int("--steps"), required=True, metavar="S",
                 help="actor steps of each member")
  p.add_argument("--ready-every", type=cli.positive_int("--ready-every"), required=True,
                 metavar="K", help="actor steps of a member between its evaluations and "
                                   "exploit/explore (<= --steps)")
  p.add_argument("--mutate", default="", metavar="FIELD,...",
                 help="hyperparameters explore perturbs (x0.8/x1.2) or resamples; for dqn: "
                      + ", ".join(pbt_lib.dqn_population.HYPERPARAMETERS)
                      + " (default: none, exploit only)")
  p.add_argument("--seed", type=cli.nonnegative_int("--seed"), default=0,
                 help="seeds everything of the run (default: 0)")
  p.add_argument("--num-envs", type=cli.positive_int("--num-envs"), default=1, metavar="B",
                 help="environments per member; the actors step N x B at once (default: 1)")
  p.add_argument("--eval-episodes", type=cli.positive_int("--eval-episodes"), default=5,
                 help="greedy episodes per evaluation; their mean return is the fitness "
                      "(default: 5)")
  p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                 help="set one config field of every member at the start (repeatable), as "
                      "in 'actorq train'")
  p.add_argument("--logdir", default=None,
                 help="run directory (default: runs/pbt-<agent>-<env>-<time>)")
  p.add_argument("--no-progress", action="store_true", help="print no summary table")
  return p


def settings_from_args(args) -> pbt_lib.PBTSettings:
  """The run's settings from the flags (not yet checked: `pbt_lib.check`).

  Raises:
    cli.UsageError: a malformed --set.
  """
  try:
    config = dict(config_io.parse_assignment(a) for a in args.set)
  except ValueError as e:
    raise cli.UsageError(str(e)) from None
  mutate = tuple(f.strip() for f in args.mutate.split(",") if f.strip())
  return pbt_lib.PBTSettings(
      agent=args.agent, env_id=args.env, population=args.population, steps=args.steps,
      ready_every=args.ready_every, mutate=mutate, seed=args.seed, num_envs=args.num_envs,
      eval_episodes=args.eval_episodes, config=config,
      logdir=args.logdir or run_dir.default_logdir("pbt", args.agent, args.env))


def run(args) -> int:
  settings = settings_from_args(args)
  pbt_lib.check(settings)
  result = pbt_lib.run(settings)
  if not args.no_progress:
    for m, value in enumerate(result.final_returns):
      print(f"member {m}: final evaluation return {value:.1f}")
  print(f"best member {result.best_member} (return {result.final_returns[result.best_member]:.1f}); "
        f"{len(result.rows)} rows in {settings.logdir}/{pbt_lib.PBT_CSV}; checkpoint "
        f"{result.best_dir} ({result.wall_seconds:.1f} s)")
  return 0
