"""`actorq train`: train an agent (default: DQN on gym:CartPole-v1)."""
from __future__ import annotations

import os
import time

from actorq.launch import cli

PRECISIONS = ("fp32", "fp16", "bf16", "int8")
DEFAULT_AGENT = "dqn"
DEFAULT_ENV = "gym:CartPole-v1"
# Defaults of the flags a resumed run takes from its run.json instead ("train" there).
TRAIN_DEFAULTS = {"steps": 100_000, "eval_every": 5_000, "eval_episodes": 10}
DEFAULT_PRECISION = "fp32"


def add_parser(subparsers):
  train = subparsers.add_parser("train", help="train an agent (default: DQN on gym:CartPole-v1)")
  train.add_argument("--agent", default=DEFAULT_AGENT, help="agent name (default: dqn)")
  train.add_argument("--env", default=DEFAULT_ENV,
                     help="environment id: gym:<id>, dmc:<domain>-<task>, atari:<Game>")
  train.add_argument("--steps", type=cli.positive_int("--steps"), default=None,
                     help="actor (environment) steps in total (default: 100000; with --resume: "
                          "the run's own total)")
  train.add_argument("--seed", type=cli.nonnegative_int("--seed"), default=0)
  train.add_argument("--logdir", default=None,
                     help="run directory (default: runs/<agent>-<env>-s<seed>-<time>)")
  train.add_argument("--actor-precision", choices=PRECISIONS, default=None,
                     help="precision the actors act with (the learner is always fp32); "
                          "overrides the config file (default: fp32)")
  train.add_argument("--eval-every", type=cli.positive_int("--eval-every"), default=None,
                     help="actor steps between greedy evaluations (default: 5000; with --resume: "
                          "the run's own)")
  train.add_argument("--eval-episodes", type=cli.positive_int("--eval-episodes"), default=None,
                     help="greedy episodes per evaluation (default: 10, with --resume: the run's "
                          "own; Atari episodes are long, e.g. ~760 steps of Pong: use 1 for a "
                          "smoke run)")
  train.add_argument("--no-progress", action="store_true", help="no progress bar")
  train.add_argument("--config", default=None, metavar="FILE",
                     help="the agent's config as JSON (or YAML if PyYAML is installed); fields "
                          "not in it keep their defaults, unknown keys are errors")
  train.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                     help="override one config field (repeatable), e.g. --set batch_size=32 "
                          "--set hidden_sizes=[64,64]; applied after --config")
  train.add_argument("--resume", default=None, metavar="RUN_DIR",
                     help="continue a run of 'actorq train' from its newest readable checkpoint "
                          "(agent, environment, seed and config come from its run.json)")
  train.add_argument("--checkpoint-every", type=cli.positive_float("--checkpoint-every"), default=10.0,
                     metavar="MINUTES", help="minutes between checkpoints (default: 10; one is "
                     "also written at the end and on Ctrl-C)")
  train.add_argument("--keep-checkpoints", type=cli.positive_int("--keep-checkpoints"), default=3,
                     metavar="K", help="keep the newest K checkpoints (default: 3)")
  from actorq.launch import distributed_train
  distributed_train.add_arguments(train)
  return train


def make_builder(args):
  """Validates agent, environment and their fit; returns the agent's builder.

  Raises:
    cli.UsageError: naming what is wrong and what is allowed.
  """
  from actorq.components import environments
  from actorq.launch import registry
  try:
    config_cls, builder_cls = registry.get(args.agent)
  except registry.UnknownAgentError as e:
    raise cli.UsageError(str(e)) from None
  try:
    env = environments.make_environment(args.env, seed=args.seed)
  except environments.UnknownEnvironmentError as e:
    raise cli.UsageError(str(e)) from None
  builder = builder_cls(resolve_config(args, config_cls))
  try:
    builder.make_networks(environments.environment_spec(env))
  except ValueError as e:  # e.g. UnsupportedEnvironmentError: continuous actions for DQN
    raise cli.UsageError(f"agent {args.agent!r} cannot run on {args.env}: {e}") from None
  finally:
    env.close()
  return builder


def resolve_config(args, config_cls):
  """The run's config: defaults <- `--config` file (or a resumed run's run.json)
  <- `--set` <- `--actor-precision`.

  Raises:
    cli.UsageError: unknown keys (named, with the allowed ones), bad values, unreadable files.
  """
  from actorq.components import config_io
  values = {}
  try:
    if getattr(args, "resume_info", None) is not None:
      values = args.resume_info["config"]
    elif getattr(args, "config", None):
      values = config_io.read_file(args.config)
    overrides = dict(config_io.parse_assignment(a) for a in getattr(args, "set", None) or [])
    if args.actor_precision is not None:
      overrides["actor_precision"] = args.actor_precision
    return config_io.from_dict(config_cls, values, overrides)
  except ValueError as e:
    where = f"--config {args.config}: " if getattr(args, "config", None) else ""
    raise cli.UsageError(f"{where}{e}") from None


def apply_resume(args) -> None:
  """For `--resume RUN_DIR`: agent, environment, seed, logdir and (unless given) the
  total steps, evaluation period and episodes come from the run's run.json.

  Raises:
    cli.UsageError: not a run directory, or flags that would change the run.
  """
  import json
  from actorq.launch import run_dir
  if args.config or args.set:
    raise cli.UsageError("--resume keeps the run's config from its run.json; "
                         "--config and --set cannot be combined with it")
  try:
    run_path, _ = run_dir.resolve(args.resume)
  except cli.UsageError as e:
    raise cli.UsageError(str(e).replace("--checkpoint", "--resume", 1)) from None
  with open(os.path.join(run_path, run_dir.RUN_INFO), encoding="utf-8") as f:
    info = json.load(f)
  for flag, key, default in (("--agent", "agent", DEFAULT_AGENT), ("--env", "env", DEFAULT_ENV)):
    given = getattr(args, key)
    if given != default and given != info[key]:
      raise cli.UsageError(f"{flag} {given} differs from the resumed run's {info[key]}")
  if args.logdir is not None and os.path.abspath(args.logdir) != run_path:
    raise cli.UsageError(f"--logdir {args.logdir} differs from --resume {run_path}")
  args.agent, args.env, args.seed, args.logdir = info["agent"], info["env"], info["seed"], run_path
  saved = info.get("train", {})
  for key in TRAIN_DEFAULTS:
    if getattr(args, key) is None and key in saved:
      setattr(args, key, int(saved[key]))
  args.resume_info = info


def write_run_info(logdir, args, config) -> None:
  """`run.json`: agent, environment, seed and the resolved config of a run."""
  import dataclasses
  import json
  info = {"agent": args.agent, "env": args.env, "seed": args.seed,
          "config": dataclasses.asdict(config),
          "train": {"steps": args.steps, "eval_every": args.eval_every,
                    "eval_episodes": args.eval_episodes}}
  from actorq.launch import run_dir
  with open(os.path.join(logdir, run_dir.RUN_INFO), "w", encoding="utf-8") as f:
    json.dump(info, f, indent=2, sort_keys=True)


def run(args) -> int:
  args.resume_info = None
  if getattr(args, "resume", None):
    apply_resume(args)
  for key, default in TRAIN_DEFAULTS.items():
    if getattr(args, key) is None:
      setattr(args, key, default)
  builder = make_builder(args)
  if getattr(args, "launch", "local") != "local" or getattr(args, "dry_run", False):
    from actorq.launch import distributed_train
    return distributed_train.run(args, builder)
  if getattr(args, "num_actors", None) not in (None, 1):
    raise cli.UsageError("--num-actors needs --launch local_mt or local_mp")
  if args.logdir is None:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    args.logdir = os.path.join("runs", f"{args.agent}-{args.env.replace(':', '_')}-s{args.seed}-{stamp}")
  args.logdir = cli.ensure_writable_dir(args.logdir)
  write_run_info(args.logdir, args, builder.config)

  from tqdm import tqdm
  from actorq.components import checkpointing
  from actorq.launch import local

  bar = tqdm(total=args.steps, unit="step", dynamic_ncols=True, disable=args.no_progress,
             mininterval=0.5, smoothing=0.05)
  last = {"n": 0}

  def progress(c):
    bar.update(c["actor_steps"] - last["n"])
    last["n"] = c["actor_steps"]
    if c["actor_steps"] % 500 == 0:
      bar.set_postfix(episodes=c["episodes"], learner=c["learner_steps"],
                      eval_return=f"{c['eval_return']:.1f}", refresh=False)

  precision = builder.config.actor_precision
  print(f"actorq: {'resuming' if args.resume else 'training'} {args.agent} on {args.env} for "
        f"{args.steps} steps (seed {args.seed}, actors {precision}); logs in {args.logdir}",
        flush=True)
  try:
    result = local.run(builder, args.env, args.steps, seed=args.seed, logdir=args.logdir,
                       eval_every=args.eval_every, eval_episodes=args.eval_episodes,
                       progress=progress, checkpoint_every=args.checkpoint_every,
                       keep_checkpoints=args.keep_checkpoints, resume=bool(args.resume))
  except checkpointing.CheckpointError as e:
    raise cli.UsageError(f"--resume {args.logdir}: {e}") from None
  except KeyboardInterrupt:
    import sys
    print(f"actorq: checkpoint saved; continue with: actorq train --resume {args.logdir}",
          file=sys.stderr)
    raise
  finally:
    bar.close()
  if result.resumed_from:
    print(f"actorq: resumed from {result.resumed_from} (actor step {result.resumed_actor_steps})")
  print(f"actorq: done in {result.wall_seconds:.0f} s: {result.actor_steps} actor steps, "
        f"{result.learner_steps} learner steps, {result.episodes} episodes; "
        f"best evaluation return {result.best_eval_return:.1f} at step {result.best_eval_step}")
  print(f"final evaluation return: {result.final_eval_return:.1f} "
        f"(mean over {args.eval_episodes} greedy episodes, actors {precision})")
  return 0
