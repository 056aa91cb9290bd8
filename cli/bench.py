"""`actorq bench`: the ActorQ benchmark, one agent trained at each actor precision.

    actorq bench --preset small                 # DQN on gym:CartPole-v1, minutes on 2 cores
    actorq bench --preset actorq --env dmc:walker-stand   # D4PG, 3x2048 policy (~1 h per seed on 2 cores)
    actorq bench --render RUN_DIR               # rewrite a finished run's files from bench.json
    actorq bench --merge DIR DIR --logdir OUT   # one report from benchmarks of other seeds
    actorq bench --preset small --num-envs 1,8,32   # vectorized actors' steps/s (no training)
    actorq bench --preset actorq --launch local_mp --num-actors 2   # a Launchpad program per run

Writes runs.csv, breakdown.csv, curves.csv, acting.csv, summary.csv, bench.json,
table.md and returns_vs_wallclock.png, breakdown.png, throughput.png to the run
directory and prints the table (medians over seeds, int8/fp32 and fp16/fp32 ratios).
See `actorq.benchmarks.actorq_bench` for what each figure measures. With `--launch`
(local_mp or local_mt) each run is a Launchpad program with `--num-actors` actor nodes
instead, measured per node (`actorq.benchmarks.distributed_bench`): runs.csv,
breakdown.csv, bench_distributed.json, table.md; the learner's step is printed beside the
single-process learner step measured first in the same invocation
(`actorq.benchmarks.learner_step`), as a ratio.
"""
from __future__ import annotations

import os

from actorq import core
from actorq.benchmarks import actorq_bench as ab
from actorq.benchmarks import anakin_bench, distributed_bench, merge, vector_bench
from actorq.cli import main as cli
from actorq.components import atomic, config_io
from actorq.components.envs import environments, vector_env
from actorq.components import placement
from actorq.components import run_dir
from actorq.agents import registry
from actorq.launch import spec as spec_lib


def add_parser(subparsers):
  p = subparsers.add_parser("bench", help="train at each actor precision and compare "
                            "(time to target, steps/s, runtime breakdown, energy)")
  p.add_argument("--preset", choices=sorted(ab.PRESETS), default="small",
                 help="small: DQN on gym:CartPole-v1, default network; actorq: D4PG with a "
                      "3x2048 policy on dmc:cartpole-balance (default: small)")
  p.add_argument("--agent", default=None, help="any registered agent (default: the preset's)")
  p.add_argument("--env", default=None, help="environment id (default: the preset's)")
  p.add_argument("--precisions", default=None, metavar="P,P,...",
                 help=f"actor precisions, comma separated, from {','.join(ab.PRECISIONS)} "
                      "(default: the preset's; small: fp32,fp16,int8, actorq: fp32,int8)")
  p.add_argument("--seeds", type=cli.seed("--seeds"), nargs="+", default=None,
                 help="seeds; every precision runs with each (default: the preset's)")
  p.add_argument("--steps", type=cli.positive_int("--steps"), default=None,
                 help="actor steps per run")
  p.add_argument("--eval-every", type=cli.positive_int("--eval-every"), default=None)
  p.add_argument("--eval-episodes", type=cli.positive_int("--eval-episodes"), default=10)
  p.add_argument("--target", type=cli.number("--target"), default=None,
                 help="target greedy return for the time-to-target figure")
  p.add_argument("--acting-steps", type=cli.positive_int("--acting-steps"), default=None,
                 help="steps of the acting-only throughput measurement")
  p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                 help="override one agent config field (repeatable), after the preset's, "
                      "e.g. --set hidden_sizes=[512,512]")
  p.add_argument("--watts-per-core", type=cli.positive_float("--watts-per-core"), default=5.0,
                 help="energy assumption: watts per busy CPU core (default: 5)")
  p.add_argument("--watts-per-gpu", type=cli.positive_float("--watts-per-gpu"), default=300.0,
                 help="energy assumption: watts per busy GPU (default: 300)")
  p.add_argument("--num-envs", default=None, metavar="B,B,...",
                 help="measure the vectorized actors instead of training: actor steps/s at "
                      "each B (e.g. 1,8,32) and precision, side by side, with the per-step "
                      "breakdown and the bare env ceiling (see actorq.benchmarks.vector_bench); "
                      "--acting-steps transitions per run (default 4000), --repeats rounds")
  p.add_argument("--repeats", type=cli.positive_int("--repeats"), default=3,
                 help="rounds of the --num-envs measurement (medians; default 3)")
  p.add_argument("--launch", choices=sorted(LAUNCHES), default=None,
                 help="local_mp/local_mt: run each (seed, precision) as a Launchpad program "
                      "(replay, learner, N actors, evaluator) and measure it end to end and "
                      "per node (actorq.benchmarks.distributed_bench); anakin: steps/s of "
                      "the compiled env, acting and PPO training at each B of --num-envs "
                      "(default 1,32,256,1024) beside the Python loop on gym:CartPole-v1 "
                      "(actorq.benchmarks.anakin_bench); default: one process per run")
  p.add_argument("--num-actors", type=cli.positive_int("--num-actors"), default=None,
                 help="actor nodes of a --launch run (default: 2)")
  p.add_argument("--max-learner-ratio", type=cli.positive_float("--max-learner-ratio"),
                 default=None, metavar="R",
                 help="with --launch: exit 1 when a run's learner step is above R times the "
                      "single-process step measured in the same invocation (a regression "
                      "check, e.g. 1.2 on a quiet machine)")
  p.add_argument("--learner-device", choices=core.LEARNER_DEVICES, default="auto",
                 help="where a --launch run's learner computes (default: auto, a GPU if "
                      "there is one)")
  p.add_argument("--render", default=None, metavar="RUN_DIR",
                 help="rewrite a finished benchmark's CSVs, plots and table from its bench.json "
                      "(no runs)")
  p.add_argument("--merge", nargs="+", default=None, metavar="RUN_DIR",
                 help="combine finished benchmarks of the same settings and machine but "
                      "different seeds into one report in --logdir (no runs)")
  p.add_argument("--logdir", default=None,
                 help="output directory (default: runs/bench-<preset>-<agent>-<env>-<time>)")
  p.add_argument("--overwrite", action="store_true",
                 help="write over an earlier benchmark's report in --logdir (without it such "
                      "a folder is refused)")
  return p


def resolve(args):
  """The benchmark's settings from the preset and flags.

  Raises:
    cli.UsageError: unknown agent/environment/precision/config key, an agent that
      cannot run on the environment, or no target for the environment.
  """
  preset = ab.PRESETS[args.preset]
  agent = args.agent or preset.agent
  env_id = args.env or preset.env
  precisions = cli.precision_list("--precisions", args.precisions, ab.PRECISIONS,
                                  preset.precisions)
  target = args.target if args.target is not None else preset.targets.get(env_id)
  if target is None:
    raise cli.UsageError(f"no target return known for {env_id} in preset {args.preset!r}; "
                         "give one with --target")
  overrides = dict(preset.overrides) if agent == preset.agent else {}
  try:
    assignments = dict(config_io.parse_assignment(a) for a in args.set)
    overrides.update(assignments)
    spec_lib.make_builder(agent, overrides=overrides)  # the preset's and --set values, checked as given
  except registry.UnknownAgentError as e:
    raise cli.UsageError(str(e)) from None
  except ValueError as e:
    raise cli.UsageError(f"--set: {e}") from None
  if "actor_precision" in assignments:
    raise cli.UsageError(f"--set actor_precision={assignments['actor_precision']}: each run's "
                         "actor precision comes from --precisions; use --precisions instead")
  try:
    env = environments.make_environment(env_id, seed=0)
  except (core.UnknownEnvironmentError, core.UnsupportedEnvironmentError) as e:
    raise cli.UsageError(str(e)) from None
  try:
    builder = spec_lib.make_builder(agent, overrides=overrides)
    builder.make_networks(environments.environment_spec(env))
  except ValueError as e:
    raise cli.UsageError(f"agent {agent!r} cannot run on {env_id}: {e}") from None
  finally:
    env.close()
  steps = args.steps or preset.steps
  return dict(agent=agent, env=env_id, precisions=precisions,
              seeds=tuple(args.seeds if args.seeds is not None else preset.seeds),
              steps=steps, eval_every=min(args.eval_every or preset.eval_every, steps),
              eval_episodes=args.eval_episodes, target=float(target), overrides=overrides,
              acting_steps=args.acting_steps or preset.acting_steps)


def _merge(args) -> int:
  if args.logdir is None:
    raise cli.UsageError("--merge needs --logdir (where the merged report goes)")
  if os.path.abspath(args.logdir) in {os.path.abspath(d) for d in args.merge}:
    raise cli.UsageError(f"--logdir {args.logdir} is one of the merged benchmarks; its "
                         "bench.json would be overwritten: give a new directory")
  try:
    data = merge.combine([(d, ab.load_bench(d)) for d in args.merge])
  except (FileNotFoundError, merge.IncompatibleBenchError) as e:
    raise cli.UsageError(f"--merge: {e}") from None
  run_dir.refuse_run_directory(args.logdir, "--logdir")  # issue 42
  outdir = atomic.ensure_writable_dir(args.logdir)
  _, table = merge.report(outdir, data)
  print(table)
  return 0


# The files by which a folder holds an earlier report of `actorq bench` (its bench.json,
# vector.json or distributed benchmark JSON, and table.md).
REPORT_FILES = ("bench.json", "vector.json", "anakin.json", "table.md")


def _report_checks(args) -> dict:
  """`run_dir.report_dir`'s checks of an earlier report in --logdir (issue 56)."""
  return {"report_files": REPORT_FILES + (distributed_bench.JSON_NAME,),
          "command": "actorq bench", "overwrite": args.overwrite}


def num_envs_list(text: str) -> tuple:
  """`--num-envs 1,8,32` as a tuple of distinct integers >= 1.

  Raises:
    cli.UsageError: anything else.
  """
  try:
    values = tuple(int(v) for v in text.split(",") if v.strip())
  except ValueError:
    values = ()
  if not values or min(values) < 1 or len(set(values)) != len(values):
    raise cli.UsageError(f"--num-envs {text!r}: give distinct integers >= 1, comma "
                         "separated, e.g. 1,8,32")
  return values


def _run_vector(args) -> int:
  settings = resolve(args)
  sizes = num_envs_list(args.num_envs)
  for b in sizes:
    try:
      vector_env.check_num_envs(settings["env"], b)
    except ValueError as e:
      raise cli.UsageError(f"--num-envs: {e}") from None
  outdir = run_dir.report_dir(args.logdir, "bench-vector", settings["agent"], settings["env"],
                              **_report_checks(args))
  steps = args.acting_steps or 4000
  print(f"actorq bench --num-envs: {settings['agent']} on {settings['env']}, B = "
        f"{','.join(map(str, sizes))}, precisions {','.join(settings['precisions'])}, {steps} "
        f"transitions per run, {args.repeats} rounds; output in {outdir}", flush=True)
  overrides = settings["overrides"]
  result = vector_bench.run(
      lambda p: spec_lib.make_builder(settings["agent"], overrides=dict(overrides, actor_precision=p)),
      settings["env"], sizes, settings["precisions"], steps, args.repeats,
      log=lambda m: print(m, flush=True))
  result["settings"].update(agent=settings["agent"], overrides=overrides)
  table = vector_bench.format_table(result, f"{settings['agent']} on ")
  atomic.write_json(os.path.join(outdir, "vector.json"), result)
  with atomic.atomic_write(os.path.join(outdir, "table.md")) as f:
    f.write(table + "\n")
  print()
  print(table)
  print(f"\nfiles: {outdir}/vector.json, table.md")
  return 0


def _run_distributed(args) -> int:
  if args.render or args.merge or args.num_envs is not None:
    raise cli.UsageError("--launch measures anew; it cannot be combined with --render, "
                         "--merge or --num-envs")
  settings = resolve(args)
  num_actors = args.num_actors or 2
  try:
    placement.check_learner_device(args.learner_device,
                                   in_process=distributed_bench.in_process(args.launch),
                                   name="--learner-device")
  except placement.NoAcceleratorError as e:
    raise cli.UsageError(str(e)) from None
  outdir = run_dir.report_dir(args.logdir, "bench", args.launch, f"{num_actors}a", args.preset,
                              settings["agent"], settings["env"], **_report_checks(args))
  n = len(settings["precisions"]) * len(settings["seeds"])
  print(f"actorq bench --launch {args.launch}: {settings['agent']} on {settings['env']}, "
        f"{num_actors} actor node(s), learner device {args.learner_device}, precisions "
        f"{','.join(settings['precisions'])}, seeds {list(settings['seeds'])}, "
        f"{settings['steps']} actor steps per run ({n} programs, one at a time); output in "
        f"{outdir}", flush=True)
  data, table = distributed_bench.run_bench(settings, args.launch, num_actors,
                                            args.learner_device, outdir,
                                            log=lambda m: print(m, flush=True))
  print()
  print(table)
  print(f"\nfiles: {outdir}/{{runs,breakdown}}.csv, table.md, {distributed_bench.JSON_NAME}; "
        "node logs in each run's logs/")
  if args.max_learner_ratio is not None:
    failed = distributed_bench.learner_step_check(data, args.max_learner_ratio)
    if failed:
      raise core.RunFailure(f"learner step check failed (--max-learner-ratio "
                            f"{args.max_learner_ratio:g}): " + "; ".join(failed))
    print(f"learner step check passed: every run <= {args.max_learner_ratio:g}x the "
          "single-process step")
  return 0


ANAKIN_BATCHES = "1,32,256,1024"


def _run_anakin(args) -> int:
  """`actorq bench --launch anakin`: `anakin_bench.run` into --logdir (anakin.json,
  table.md)."""
  given = [f for f, v in (("--render", args.render), ("--merge", args.merge),
                          ("--num-actors", args.num_actors),
                          ("--max-learner-ratio", args.max_learner_ratio),
                          ("--precisions", args.precisions), ("--seeds", args.seeds),
                          ("--agent", args.agent), ("--env", args.env)) if v]
  if given:
    raise cli.UsageError(f"--launch anakin measures PPO on {anakin_bench.ENV_ID} against "
                         f"{anakin_bench.GYM_ID}; it takes --num-envs, --steps, "
                         f"--acting-steps, --repeats, --logdir, not {', '.join(given)}")
  sizes = num_envs_list(args.num_envs or ANAKIN_BATCHES)
  steps = args.steps or 20_000
  scan_steps = args.acting_steps or 2_000
  outdir = run_dir.report_dir(args.logdir, "bench-anakin", "ppo", "CartPole-v1",
                              **_report_checks(args))
  print(f"actorq bench --launch anakin: B = {','.join(map(str, sizes))}, {scan_steps} steps "
        f"per env in the rate rows, {args.repeats} rounds, PPO training {steps} steps per run; "
        f"output in {outdir}", flush=True)
  result = anakin_bench.run(sizes, scan_steps, args.repeats, steps, steps,
                            log=lambda m: print(m, flush=True))
  result["settings"] = {"batches": list(sizes), "scan_steps": scan_steps,
                        "repeats": args.repeats, "training_steps": steps}
  table = anakin_bench.format_table(result)
  atomic.write_json(os.path.join(outdir, "anakin.json"), result)
  with atomic.atomic_write(os.path.join(outdir, "table.md")) as f:
    f.write(table + "\n")
  print()
  print(table)
  print(f"\nfiles: {outdir}/anakin.json, table.md")
  return 0


# `actorq bench --launch`: the launch -> what measures it.
LAUNCHES = {**{t: _run_distributed for t in distributed_bench.LAUNCHES}, "anakin": _run_anakin}


def run(args) -> int:
  if args.launch is not None:
    return LAUNCHES[args.launch](args)
  if args.max_learner_ratio is not None:
    raise cli.UsageError(f"--max-learner-ratio needs --launch "
                         f"{' or '.join(distributed_bench.LAUNCHES)}")
  if args.num_actors is not None:
    raise cli.UsageError(f"--num-actors needs --launch {' or '.join(distributed_bench.LAUNCHES)}")
  if args.num_envs is not None:
    if args.render or args.merge:
      raise cli.UsageError("--num-envs measures anew; it cannot be combined with --render or "
                           "--merge")
    return _run_vector(args)
  if args.render and args.merge:
    raise cli.UsageError("use either --render or --merge, not both")
  if args.render:
    if os.path.exists(os.path.join(args.render, distributed_bench.JSON_NAME)):
      return cli.print_report(distributed_bench.render, args.render)
    return cli.print_report(ab.render, args.render)
  if args.merge:
    return _merge(args)
  settings = resolve(args)
  outdir = run_dir.report_dir(args.logdir, "bench", args.preset, settings["agent"],
                              settings["env"], **_report_checks(args))
  n = len(settings["precisions"]) * len(settings["seeds"])
  print(f"actorq bench: {settings['agent']} on {settings['env']}, precisions "
        f"{','.join(settings['precisions'])}, seeds {list(settings['seeds'])}, "
        f"{settings['steps']} actor steps per run ({n} runs + the peer, one at a time); "
        f"output in {outdir}", flush=True)
  _, table = ab.run_bench(watts_per_core=args.watts_per_core, watts_per_gpu=args.watts_per_gpu,
                          outdir=outdir, log=lambda m: print(m, flush=True), **settings)
  print()
  print(table)
  print(f"\nfiles: {outdir}/{{runs,breakdown,curves,acting,summary}}.csv, table.md, bench.json, "
        "returns_vs_wallclock.png, breakdown.png, throughput.png")
  return 0
