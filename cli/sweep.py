"""`actorq sweep`: one configuration trained with several seeds at each actor precision,
reported as aggregates over seeds with 95% confidence intervals.

    actorq sweep --agent dqn --env gym:CartPole-v1 --seeds 0-9 --precisions fp32,int8 \\
        --steps 100000 [--eval-every 5000] [--eval-episodes 10] [--config F] [--set K=V ...] \\
        [--target 475] [--launch local_mp --num-actors 2] [--jobs 1] [--logdir DIR]
    actorq sweep --render DIR          # rewrite a finished sweep's report from its sweep.json

`--precisions` also takes per-layer policies: `"fp32;int8;precision_policy.json"` (a file of
`actorq quantize --search`, recorded as its `mixed:<choice>,...` name) or the names
themselves, separated by ';' since a name has commas.

`--launch local_mt|local_mp [--num-actors N]` makes each run a Launchpad program, as
`actorq train --launch` does (for several hosts, `benchmarks/hosts_train.py`).
`--launch anakin` (JAX environments) runs each precision's seeds as one compiled program,
vmapped over the seeds, writing the same per-seed run directories (`launch/anakin.py`).

Each run is `actorq train` in a child process (DIR/<precision>-s<seed>); an interrupted
sweep run again with the same flags reuses its finished runs and resumes the stopped ones
from their checkpoints. SIGINT/SIGTERM is forwarded to the children (they checkpoint);
the sweep waits for them and exits 130/143 with nothing left running. See
`actorq.studies.sweep` for the files and `actorq.components.aggregate` for the
statistics (IQM, median, mean, stratified bootstrap intervals, paired comparisons).
"""
from __future__ import annotations

import dataclasses
import os
import sys
import time

import gymnasium

from actorq import core
from actorq.cli import main as cli
from actorq.cli import train as train_cmd
from actorq.components import atomic
from actorq.cli import precision_arg
from actorq.components.envs import vector_env
from actorq.components import provenance, run_dir
from actorq.components import stops
from actorq.launch import anakin
from actorq.launch import spec as spec_lib
from actorq.studies import sweep

DEFAULT_SEEDS = "0-9"
# `actorq train --launch`'s choices but hosts (its runs need host lists: hosts_train.py).
SWEEP_LAUNCHES = tuple(t for t in train_cmd.launch_choices() if t != "hosts")
DEFAULT_PRECISIONS = "fp32,int8"


def add_parser(subparsers):
  p = subparsers.add_parser("sweep", help="train over several seeds at each actor precision; "
                            "IQM/median/mean with 95%% CIs, paired comparisons")
  p.add_argument("--agent", default=train_cmd.DEFAULT_AGENT, help="agent name (default: dqn)")
  p.add_argument("--env", default=train_cmd.DEFAULT_ENV,
                 help="environment id (default: gym:CartPole-v1)")
  p.add_argument("--seeds", nargs="+", default=[DEFAULT_SEEDS], metavar="SEEDS",
                 help="seeds as 0-9, 0,1,2 or 0 1 2 (default: 0-9)")
  p.add_argument("--precisions", default=DEFAULT_PRECISIONS, metavar="P,P,...",
                 help=f"actor precisions from {','.join(core.ACTOR_PRECISIONS)}, per-layer "
                      "precision policy files or mixed:<choice>,... names (then separated by "
                      "';', e.g. 'fp32;int8;policy.json'); the others are compared with fp32 "
                      "(or the first listed) seed by seed (default: fp32,int8)")
  p.add_argument("--steps", type=cli.positive_int("--steps"),
                 default=train_cmd.TRAIN_DEFAULTS["steps"], help="actor steps per run")
  p.add_argument("--eval-every", type=cli.positive_int("--eval-every"),
                 default=train_cmd.TRAIN_DEFAULTS["eval_every"],
                 help="actor steps between greedy evaluations (default: 5000)")
  p.add_argument("--eval-episodes", type=cli.positive_int("--eval-episodes"),
                 default=train_cmd.TRAIN_DEFAULTS["eval_episodes"],
                 help="greedy episodes per evaluation (default: 10)")
  p.add_argument("--num-envs", type=cli.positive_int("--num-envs"), default=1, metavar="B",
                 help="environments each run's actor steps at once, as in 'actorq train' "
                      "(default: 1)")
  p.add_argument("--launch", choices=SWEEP_LAUNCHES, default="local",
                 help="local: each run in one process (default); anakin: each precision's "
                      "seeds vmapped in one compiled program (JAX environments, e.g. "
                      "gymnax:CartPole-v1); local_mt / local_mp: each run a Launchpad program, "
                      "as 'actorq train --launch'")
  p.add_argument("--num-actors", type=cli.positive_int("--num-actors"), default=None,
                 metavar="N", help="actor nodes of each run with --launch local_mt/local_mp "
                                   f"(default: {train_cmd.DEFAULT_NUM_ACTORS})")
  train_cmd.add_config_flags(p)
  p.add_argument("--target", type=cli.number("--target"), default=None,
                 help="target greedy return for the reached-target figures (default: the "
                      "Gymnasium environment's reward_threshold, e.g. 475 for CartPole-v1; "
                      "none for other environments)")
  p.add_argument("--margin", type=cli.number("--margin"), default=None, metavar="M",
                 help="equivalence margin in return units, declared before the runs: each "
                      "precision gets a verdict against the reference (equivalent, worse, "
                      "better or inconclusive) from two one-sided paired t-tests, the 90%% "
                      "interval of the mean paired difference against (-M, M) (default: no "
                      "verdicts)")
  p.add_argument("--jobs", type=cli.positive_int("--jobs"), default=1,
                 help="runs at once (default: 1; each run uses the cores it can)")
  p.add_argument("--logdir", default=None,
                 help="sweep directory (default: runs/sweep-<agent>-<env>-<time>)")
  p.add_argument("--record", default=None, metavar="DIR",
                 help="keep each finished run's run.json, eval.csv and final_eval.json in "
                      "DIR/runs/<run>/ and the report files in DIR (e.g. a docs/results/ "
                      "folder, committed); a later sweep restores the runs it lacks from "
                      "there, so a sweep spans sessions and machines")
  p.add_argument("--render", default=None, metavar="DIR",
                 help="rewrite a finished sweep's CSVs, curves and table from its sweep.json "
                      "(no runs)")
  return p


def _default_target(env_id: str):
  """The Gymnasium environment's registered reward_threshold, else None."""
  if not env_id.startswith("gym:"):
    return None
  try:
    return gymnasium.spec(env_id.split(":", 1)[1]).reward_threshold
  except gymnasium.error.Error:
    return None


def resolve(args) -> dict:
  """The sweep's settings, validated the way `actorq train` validates one run (agent,
  environment, their fit, config file and `--set`), for every precision.

  Raises:
    cli.UsageError: bad seeds or precisions, unknown agent or environment, an agent that
      cannot act in the environment, an unknown config key or a bad value.
  """
  try:
    seeds = cli.parse_seeds(args.seeds)
  except ValueError as e:
    raise cli.UsageError(f"--seeds {' '.join(args.seeds)}: {e}") from None
  precisions = list(precision_arg.precision_items("--precisions", args.precisions))
  distributed = [t for t in SWEEP_LAUNCHES if t not in spec_lib.SINGLE_PROCESS]
  if args.launch in spec_lib.SINGLE_PROCESS and args.num_actors is not None:
    raise cli.UsageError(f"--num-actors needs --launch {' or '.join(distributed)} "
                         "(a single-process run has one actor)")
  num_actors = ((args.num_actors or train_cmd.DEFAULT_NUM_ACTORS)
                if args.launch not in spec_lib.SINGLE_PROCESS else None)
  config = os.path.abspath(args.config) if args.config else None
  assignments = [a.split("=", 1)[0].strip() for a in args.set]
  def run_spec(precision):  # agent, environment, their fit, config: as `actorq train` checks
    return spec_lib.RunSpec.resolve(agent=args.agent, env=args.env, seed=seeds[0],
                                    config=config, set=list(args.set),
                                    actor_precision=precision, dry_run=True)

  first = run_spec(precisions[0])
  if args.launch == spec_lib.ANAKIN:  # compiled: the environment's JAX form, the agent's system
    for p in precisions:
      anakin.check(dataclasses.replace(run_spec(p), launch=args.launch,
                                       num_envs=args.num_envs))
  else:
    try:
      vector_env.check_num_envs(args.env, args.num_envs)
    except ValueError as e:
      raise cli.UsageError(f"--num-envs: {e}") from None
  if "actor_precision" in assignments:  # a valid value; a bad one was refused above
    value = args.set[assignments.index("actor_precision")].split("=", 1)[1]
    raise cli.UsageError(f"--set actor_precision={value}: each run's actor precision comes "
                         "from --precisions; use --precisions instead")
  configs = {p: dict((first if p == precisions[0] else run_spec(p)).config)  # as run.json has it
             for p in precisions}
  target = args.target if args.target is not None else _default_target(args.env)
  margin = getattr(args, "margin", None)
  if margin is not None and not margin > 0:
    raise cli.UsageError(f"--margin {margin:g}: the equivalence margin must be > 0 "
                         "(return units)")
  return {"agent": args.agent, "env": args.env, "seeds": list(seeds), "precisions": precisions,
          "reference": "fp32" if "fp32" in precisions else precisions[0],
          "steps": args.steps, "eval_every": args.eval_every,
          "eval_episodes": args.eval_episodes, "num_envs": args.num_envs,
          **({"launch": args.launch, "num_actors": num_actors} if num_actors else
             {"launch": args.launch} if args.launch != spec_lib.LOCAL else {}),
          "config": config, "set": list(args.set),
          "target": None if target is None else float(target),
          **({"margin": float(margin)} if margin is not None else {}), "configs": configs}


def run(args) -> int:
  if args.render:
    return cli.print_report(sweep.render, args.render)
  settings = resolve(args)
  if args.logdir is None:
    args.logdir = run_dir.default_logdir("sweep", settings["agent"], settings["env"])
  record = atomic.ensure_writable_dir(args.record) if args.record else None
  outdir = atomic.ensure_writable_dir(args.logdir)
  if record:
    sweep.restore(settings, outdir, record, log=lambda m: print(m, flush=True))
  try:
    sweep.check_reusable(os.path.abspath(args.logdir), settings)
    declared = sweep.declare(outdir, settings)
  except ValueError as e:
    raise cli.UsageError(f"--logdir: {e}") from None
  if record:  # the declaration travels with the recorded runs
    sweep.write_protocol(record, declared)
  n = len(settings["precisions"]) * len(settings["seeds"])
  print(f"actorq sweep: {settings['agent']} on {settings['env']}, precisions "
        f"{sweep.precisions_text(settings['precisions'])}, seeds {sweep.seed_text(settings['seeds'])}, "
        f"{settings['steps']} actor steps per run ({n} runs, {args.jobs} at a time); "
        f"output in {outdir}", flush=True)
  settings["started"] = time.strftime("%Y-%m-%d %H:%M:%S")
  try:
    failures = sweep.run_all(settings, outdir, jobs=args.jobs,
                             log=lambda m: print(m, flush=True), record=record)
  except sweep.Stopped as e:  # every child stopped (and checkpointed) and reaped
    parts = ([f"{', '.join(e.runs)} checkpointed"] if e.runs else []) + (
        [f"{', '.join(e.restart)} stopped before a checkpoint, will start again"]
        if e.restart else [])
    which = f" ({'; '.join(parts)})" if parts else ""
    print(f"actorq sweep: stopped{which}; run the same command again to continue "
          "(finished runs are reused, stopped ones resume from their checkpoints)",
          file=sys.stderr, flush=True)
    raise stops.Preempted(e.signum) from None  # `actorq` exits 128 + signal
  if failures:
    for message in failures:
      print(f"actorq sweep: {message}", file=sys.stderr)
    print(f"actorq sweep: {len(failures)} of {n} runs failed; run the same command again to "
          "retry them (finished runs are reused)", file=sys.stderr)
    return 1
  data = sweep.write_sweep_json(outdir, settings, sweep.collect(settings, outdir),
                                provenance.machine_info())
  _, table = sweep.report(outdir, data)
  if record:  # the report beside the recorded runs
    sweep.write_sweep_json(record, settings, data["runs"], data["machine"])
    sweep.report(record, data)
  print()
  print(table)
  print(f"\nfiles: {outdir}/{{sweep.json,seeds.csv,aggregate.csv,aggregate.json,curves.png,"
        "table.md}")
  return 0
