"""The `actorq` command line: `actorq train|...`.

Bad input (unknown agent or environment, a step count that is not a positive
integer, an unwritable log directory, an agent that cannot act in the environment)
prints one line naming what is wrong and what is allowed, and exits with status 2
before anything is written.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from typing import List, Optional

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

PRECISIONS = ("fp32", "fp16", "bf16", "int8")
DEFAULT_AGENT = "dqn"
DEFAULT_ENV = "gym:CartPole-v1"


class UsageError(Exception):
  """Bad command-line input; the message names what is wrong and what is allowed."""


def _positive_int(name):
  def parse(text):
    try:
      value = int(text.replace("_", ""))
    except ValueError:
      raise argparse.ArgumentTypeError(f"{name} must be a positive integer, got {text!r}") from None
    if value <= 0:
      raise argparse.ArgumentTypeError(f"{name} must be a positive integer, got {text!r}")
    return value
  return parse


def _nonnegative_int(name):
  def parse(text):
    try:
      value = int(text)
    except ValueError:
      raise argparse.ArgumentTypeError(f"{name} must be an integer >= 0, got {text!r}") from None
    if value < 0:
      raise argparse.ArgumentTypeError(f"{name} must be an integer >= 0, got {text!r}")
    return value
  return parse


class _Parser(argparse.ArgumentParser):
  """argparse, but errors are one line (`actorq: error: ...`) and exit status 2."""

  def error(self, message):
    self.exit(2, f"actorq: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
  parser = _Parser(prog="actorq", description="Acme-style RL with quantized (ActorQ) actors.")
  sub = parser.add_subparsers(dest="command", metavar="{train}", parser_class=_Parser)
  sub.required = True
  train = sub.add_parser("train", help="train an agent (default: DQN on gym:CartPole-v1)")
  train.add_argument("--agent", default=DEFAULT_AGENT, help="agent name (default: dqn)")
  train.add_argument("--env", default=DEFAULT_ENV,
                     help="environment id: gym:<id>, dmc:<domain>-<task>, atari:<Game>")
  train.add_argument("--steps", type=_positive_int("--steps"), default=100_000,
                     help="actor (environment) steps (default: 100000)")
  train.add_argument("--seed", type=_nonnegative_int("--seed"), default=0)
  train.add_argument("--logdir", default=None, help="run directory (default: runs/<agent>-<env>-<time>)")
  train.add_argument("--actor-precision", choices=PRECISIONS, default="fp32",
                     help="precision the actors act with (the learner is always fp32)")
  train.add_argument("--eval-every", type=_positive_int("--eval-every"), default=5_000,
                     help="actor steps between greedy evaluations")
  train.add_argument("--eval-episodes", type=_positive_int("--eval-episodes"), default=10)
  train.add_argument("--no-progress", action="store_true", help="no progress bar")
  return parser


def _check_logdir(path: str) -> None:
  """Raises UsageError unless `path` is (or can be created as) a writable directory.
  Creates nothing."""
  path = os.path.abspath(path)
  if os.path.exists(path):
    if not os.path.isdir(path):
      raise UsageError(f"--logdir {path} exists and is not a directory")
    if not os.access(path, os.W_OK | os.X_OK):
      raise UsageError(f"--logdir {path} is not writable")
    return
  parent = path
  while not os.path.exists(parent):
    parent = os.path.dirname(parent)
  if not os.path.isdir(parent) or not os.access(parent, os.W_OK | os.X_OK):
    raise UsageError(f"--logdir {path} cannot be created: {parent} is not a writable directory")


def _prepare_train(args):
  """Validates everything that can be validated before writing anything."""
  from actorq.agents.dqn import networks as dqn_networks
  from actorq.components import environments
  from actorq.launch import registry
  try:
    config_cls, builder_cls = registry.get(args.agent)
  except registry.UnknownAgentError as e:
    raise UsageError(str(e)) from None
  try:
    env = environments.make_environment(args.env, seed=args.seed)
  except environments.UnknownEnvironmentError as e:
    raise UsageError(str(e)) from None
  config = config_cls(actor_precision=args.actor_precision)
  builder = builder_cls(config)
  try:
    builder.make_networks(environments.environment_spec(env))
  except dqn_networks.UnsupportedEnvironmentError as e:
    raise UsageError(f"agent {args.agent!r} cannot run on {args.env}: {e}") from None
  finally:
    env.close()
  if args.logdir is None:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    args.logdir = os.path.join("runs", f"{args.agent}-{args.env.replace(':', '_')}-s{args.seed}-{stamp}")
  _check_logdir(args.logdir)
  return builder


def _train(args) -> int:
  builder = _prepare_train(args)
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


def main(argv: Optional[List[str]] = None) -> int:
  parser = build_parser()
  args = parser.parse_args(argv)
  try:
    if args.command == "train":
      return _train(args)
  except UsageError as e:
    print(f"actorq: error: {e}", file=sys.stderr)
    return 2
  except KeyboardInterrupt:
    print("actorq: interrupted", file=sys.stderr)
    return 130
  parser.error(f"unknown command {args.command!r}")
  return 2


if __name__ == "__main__":
  sys.exit(main())
