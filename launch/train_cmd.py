"""`actorq train`: train an agent (default: DQN on gym:CartPole-v1)."""
from __future__ import annotations

import os
import time

from actorq.launch import cli

PRECISIONS = ("fp32", "fp16", "bf16", "int8")
DEFAULT_AGENT = "dqn"
DEFAULT_ENV = "gym:CartPole-v1"


def add_parser(subparsers):
  train = subparsers.add_parser("train", help="train an agent (default: DQN on gym:CartPole-v1)")
  train.add_argument("--agent", default=DEFAULT_AGENT, help="agent name (default: dqn)")
  train.add_argument("--env", default=DEFAULT_ENV,
                     help="environment id: gym:<id>, dmc:<domain>-<task>, atari:<Game>")
  train.add_argument("--steps", type=cli.positive_int("--steps"), default=100_000,
                     help="actor (environment) steps (default: 100000)")
  train.add_argument("--seed", type=cli.nonnegative_int("--seed"), default=0)
  train.add_argument("--logdir", default=None,
                     help="run directory (default: runs/<agent>-<env>-s<seed>-<time>)")
  train.add_argument("--actor-precision", choices=PRECISIONS, default="fp32",
                     help="precision the actors act with (the learner is always fp32)")
  train.add_argument("--eval-every", type=cli.positive_int("--eval-every"), default=5_000,
                     help="actor steps between greedy evaluations")
  train.add_argument("--eval-episodes", type=cli.positive_int("--eval-episodes"), default=10)
  train.add_argument("--no-progress", action="store_true", help="no progress bar")
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
  builder = builder_cls(config_cls(actor_precision=args.actor_precision))
  try:
    builder.make_networks(environments.environment_spec(env))
  except ValueError as e:  # e.g. UnsupportedEnvironmentError: continuous actions for DQN
    raise cli.UsageError(f"agent {args.agent!r} cannot run on {args.env}: {e}") from None
  finally:
    env.close()
  return builder


def write_run_info(logdir, args, config) -> None:
  """`run.json`: agent, environment, seed and the resolved config of a run."""
  import dataclasses
  import json
  info = {"agent": args.agent, "env": args.env, "seed": args.seed,
          "config": dataclasses.asdict(config)}
  from actorq.launch import run_dir
  with open(os.path.join(logdir, run_dir.RUN_INFO), "w", encoding="utf-8") as f:
    json.dump(info, f, indent=2, sort_keys=True)


def run(args) -> int:
  builder = make_builder(args)
  if args.logdir is None:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    args.logdir = os.path.join("runs", f"{args.agent}-{args.env.replace(':', '_')}-s{args.seed}-{stamp}")
  args.logdir = cli.ensure_writable_dir(args.logdir)
  write_run_info(args.logdir, args, builder.config)

  from tqdm import tqdm
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

  print(f"actorq: training {args.agent} on {args.env} for {args.steps} steps "
        f"(seed {args.seed}, actors {args.actor_precision}); logs in {args.logdir}", flush=True)
  try:
    result = local.run(builder, args.env, args.steps, seed=args.seed, logdir=args.logdir,
                       eval_every=args.eval_every, eval_episodes=args.eval_episodes,
                       progress=progress)
  finally:
    bar.close()
  print(f"actorq: done in {result.wall_seconds:.0f} s: {result.actor_steps} actor steps, "
        f"{result.learner_steps} learner steps, {result.episodes} episodes; "
        f"best evaluation return {result.best_eval_return:.1f} at step {result.best_eval_step}")
  print(f"final evaluation return: {result.final_eval_return:.1f} "
        f"(mean over {args.eval_episodes} greedy episodes, actors {args.actor_precision})")
  return 0
