"""`actorq train --launch {local_mt,local_mp} [--num-actors N] [--dry-run]`.

Called by `launch/train_cmd.py` when `--launch` is not `local` (the default,
single-process path) or when `--dry-run` is given.
"""
from __future__ import annotations

import os
import time

from actorq.launch import cli

LAUNCH_CHOICES = ("local", "local_mt", "local_mp")


def add_arguments(train) -> None:
  """The distributed options of `actorq train`."""
  train.add_argument("--launch", choices=LAUNCH_CHOICES, default="local",
                     help="local: one process (default); local_mt: a Launchpad program in "
                          "threads; local_mp: a Launchpad program, one process per node")
  train.add_argument("--num-actors", type=cli.positive_int("--num-actors"), default=None,
                     help="actor nodes with --launch local_mt/local_mp (default: 2)")
  train.add_argument("--dry-run", action="store_true",
                     help="print the program's nodes and groups and exit without running")


def eval_every_learner_steps(builder, eval_every_actor_steps: int) -> int:
  """`--eval-every` is in actor steps; the evaluator node counts learner steps."""
  owed = getattr(builder, "learner_steps_owed", None)
  if owed is None:
    return int(eval_every_actor_steps)
  return max(int(owed(int(eval_every_actor_steps))), 1)


def check_args(args) -> None:
  """Raises cli.UsageError for options that do not fit the launch type."""
  if args.launch == "local" and args.num_actors not in (None, 1):
    raise cli.UsageError("--num-actors needs --launch local_mt or local_mp "
                         "(--launch local runs one actor)")
  if args.dry_run and getattr(args, "resume", None):
    raise cli.UsageError("--dry-run cannot be combined with --resume")


def _write_run_info(logdir, args, builder, num_actors) -> None:
  """run.json as `actorq train` writes it, plus the launch type and actor count."""
  import json
  from actorq.launch import run_dir, train_cmd
  train_cmd.write_run_info(logdir, args, builder.config)
  path = os.path.join(logdir, run_dir.RUN_INFO)
  with open(path, encoding="utf-8") as f:
    info = json.load(f)
  info["train"].update(launch=args.launch, num_actors=num_actors)
  with open(path, "w", encoding="utf-8") as f:
    json.dump(info, f, indent=2, sort_keys=True)


def run(args, builder) -> int:
  """Dry run (any launch type) or a distributed run; returns the exit status."""
  from actorq.launch import distributed
  from actorq.components import checkpointing
  check_args(args)
  resume = bool(getattr(args, "resume", None))
  info = getattr(args, "resume_info", None) or {}
  num_actors = args.num_actors or int(info.get("train", {}).get("num_actors", 2))
  if args.dry_run and args.launch == "local":
    print(f"launch local: one process (embedded Reverb server, 1 actor, learner, evaluation "
          f"every {args.eval_every} actor steps); no Launchpad program")
    return 0
  logdir = args.logdir
  if logdir is None and not args.dry_run:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    logdir = os.path.join("runs", f"{args.agent}-{args.env.replace(':', '_')}-s{args.seed}-"
                                  f"{args.launch}-{stamp}")
  if not args.dry_run:
    logdir = cli.ensure_writable_dir(logdir)
    if not resume:
      _write_run_info(logdir, args, builder, num_actors)
  config = distributed.DistributedConfig(
      env_id=args.env, num_actors=num_actors, num_steps=args.steps, seed=args.seed,
      logdir=None if args.dry_run else logdir,
      eval_every=eval_every_learner_steps(builder, args.eval_every),
      eval_episodes=args.eval_episodes,
      checkpoint_every=getattr(args, "checkpoint_every", 10.0),
      keep_checkpoints=getattr(args, "keep_checkpoints", 3), resume=resume)
  try:
    dp = distributed.make_program(builder, config, name=f"actorq-{args.agent}")
  except checkpointing.CheckpointError as e:
    raise cli.UsageError(f"--resume {logdir}: {e}") from None
  if args.dry_run:
    print(distributed.describe(dp, args.launch))
    return 0

  precision = getattr(builder.config, "actor_precision", "fp32")
  print(f"actorq: {'resuming' if resume else 'training'} {args.agent} on {args.env} for "
        f"{args.steps} actor steps with {num_actors} actors ({args.launch}, seed {args.seed}, "
        f"actors {precision}); logs in {logdir}", flush=True)
  if dp.resumed_from:
    from actorq.launch import distributed_nodes as n
    print(f"actorq: resuming from {dp.resumed_from} (actor step "
          f"{int(dp.resumed_counts[n.ACTOR_STEPS])}, learner step "
          f"{int(dp.resumed_counts[n.LEARNER_STEPS])})", flush=True)
  last = {"t": 0.0}

  def on_poll(counts):
    if args.no_progress or time.time() - last["t"] < 30:
      return
    last["t"] = time.time()
    from actorq.launch import distributed_nodes as n
    print(f"actorq: {int(counts.get(n.ACTOR_STEPS, 0))} actor steps, "
          f"{int(counts.get(n.LEARNER_STEPS, 0))} learner steps, "
          f"{int(counts.get(n.ACTOR_EPISODES, 0))} episodes", flush=True)

  result = distributed.launch(dp, args.launch, echo=not args.no_progress, on_poll=on_poll)
  print(distributed.summary_line(result), flush=True)
  if result.evaluations:
    print(f"final evaluation return: {result.final_eval_return:.1f} "
          f"(mean over {args.eval_episodes} greedy episodes, actors {precision})", flush=True)
  return result.exit_code
