"""`actorq train`: train an agent (default: DQN on gym:CartPole-v1), in one process
(`--launch local`, the default), compiled for a JAX environment (`--launch anakin`,
`launch/anakin.py`) or as a Launchpad program (`--launch local_mt|local_mp
[--num-actors N]`, or `--launch hosts --hosts H1,H2,...` across machines): one flag
`--launch` per row of the launch table (`launch/modes.py`), whose rows' own options are
added as flags. This module only parses, prints and maps failures to exit codes: the
parsed flags become one `launch.spec.RunSpec` (`RunSpec.from_args`), and `launch.run(spec)`
(`launch/engine.py`) launches it (writing run.json, its one writer).
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import textwrap
import time

from tqdm import tqdm

from actorq import core
from actorq import launch as launch_lib
from actorq.cli import main as cli
from actorq.cli import precision_arg
from actorq.components import config_io
from actorq.components import stops
from actorq.launch import engine, modes
from actorq.agents import registry
from actorq.components import checkpointing
from actorq.components import tracking
from actorq.launch import distributed_nodes as nodes
from actorq.launch import spec as spec_lib

DEFAULT_AGENT = spec_lib.DEFAULT_AGENT
DEFAULT_ENV = spec_lib.DEFAULT_ENV
DEFAULT_NUM_ACTORS = spec_lib.DEFAULT_NUM_ACTORS
# Defaults of the flags a resumed run takes from its run.json instead ("train" there).
TRAIN_DEFAULTS = spec_lib.TRAIN_DEFAULTS


def launch_choices() -> tuple:
  """``--launch``'s choices: the listed rows of the launch table (`modes.names()`, read
  when a parser is built, so a launch mode registered before that is offered too)."""
  return modes.names()


class _AgentName(argparse.Action):
  """`--agent NAME`: stored as usual; a later -h/--help lists that agent's config fields."""

  def __call__(self, parser, namespace, values, option_string=None):
    setattr(namespace, self.dest, values)
    parser.named_agent = values


class _HelpWithConfigFields(argparse.Action):
  """-h/--help of `actorq train`: the flags, then the config fields of the agent an
  `--agent NAME` before it names (`config_fields_help`), or the agents to name."""

  def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS,
               help=None):  # pylint: disable=redefined-builtin
    super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

  def __call__(self, parser, namespace, values, option_string=None):
    agent = getattr(parser, "named_agent", None)
    try:
      fields = config_fields_help(agent) if agent else textwrap.fill(
          f"agents: {', '.join(registry.names())}; add --agent NAME before --help to list "
          "the fields of its config (--set KEY=VALUE)", _help_width())
    except registry.UnknownAgentError as e:
      parser.error(str(e))
    parser.print_help()
    print("\n" + fields)
    parser.exit()


def _help_width() -> int:
  return max(40, min(100, shutil.get_terminal_size().columns - 2))


def config_fields_help(agent: str) -> str:
  """The fields of `agent`'s config, one block each: name, type, default, then the meaning
  from its Attributes docstring (`config_io.field_help`), wrapped to the terminal.

  Raises:
    registry.UnknownAgentError: naming the allowed agents.
  """
  config_cls, _ = registry.get(agent)
  width = _help_width()
  lines = [f"config fields of {agent} ({config_cls.__name__}; set with --set KEY=VALUE or "
           "--config FILE):"]
  for f in config_io.field_help(config_cls):
    default = f.default if isinstance(f.default, str) else json.dumps(f.default)
    lines.append(f"  {f.name}: {f.type}, default {default}")
    lines += textwrap.wrap(f.meaning, width, initial_indent=" " * 6, subsequent_indent=" " * 6)
  return "\n".join(lines)


def add_config_flags(p) -> None:
  """`--config FILE` and `--set KEY=VALUE` (`RunSpec.resolve`'s `config` and `set`), as
  `actorq train` and `actorq sweep` read them."""
  p.add_argument("--config", default=None, metavar="FILE",
                 help="the agent's config as JSON (or YAML if PyYAML is installed); fields "
                      "not in it keep their defaults, unknown keys are errors")
  p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                 help="override one config field (repeatable), e.g. --set batch_size=32 "
                      "--set hidden_sizes=[64,64]; applied after --config")


def add_parser(subparsers):
  train = subparsers.add_parser("train", help="train an agent (default: DQN on gym:CartPole-v1)",
                                add_help=False)
  train.add_argument("-h", "--help", action=_HelpWithConfigFields,
                     help="show this help and exit; after --agent NAME also every field of "
                          "its config with type, default and meaning")
  train.add_argument("--agent", default=DEFAULT_AGENT, action=_AgentName,
                     help="agent name (default: dqn), an installed agent (entry point group "
                          "actorq.agents) or a builder class as package.module:BuilderClass, "
                          "imported from the current directory")
  train.add_argument("--env", default=DEFAULT_ENV,
                     help="environment id: gym:<id>, dmc:<domain>-<task>, atari:<Game>, "
                          "minatar:<game>; pz:<module>/<env> (PettingZoo, e.g. "
                          "pz:mpe2/simple_spread_v3) for the multi-agent agents ippo, mappo, "
                          "idqn")
  train.add_argument("--steps", type=cli.positive_int("--steps"), default=None,
                     help="actor (environment) steps in total, summed over actors (default: "
                          "100000; with --resume: the run's own total)")
  train.add_argument("--seed", type=cli.seed("--seed"), default=0)
  train.add_argument("--logdir", default=None,
                     help="run directory (default: runs/<agent>-<env>-s<seed>-<time>)")
  train.add_argument("--actor-precision", default=None, metavar="PRECISION",
                     help="precision the actors act with (the learner is always fp32); "
                          f"overrides the config file (default: fp32): {precision_arg.PRECISION_HELP}")
  train.add_argument("--eval-every", type=cli.positive_int("--eval-every"), default=None,
                     help="actor steps between greedy evaluations (default: 5000; with --resume: "
                          "the run's own)")
  train.add_argument("--eval-episodes", type=cli.positive_int("--eval-episodes"), default=None,
                     help="greedy episodes per evaluation (default: 10, with --resume: the run's "
                          "own; Atari episodes are long, e.g. ~760 steps of Pong: use 1 for a "
                          "smoke run)")
  train.add_argument("--no-progress", action="store_true", help="no progress bar")
  add_config_flags(train)
  train.add_argument("--resume", default=None, metavar="RUN_DIR",
                     help="continue a run of 'actorq train' from its newest readable checkpoint "
                          "(agent, environment, seed and config come from its run.json)")
  train.add_argument("--init-from", default=None, metavar="RUN",
                     help="start a new run from another run's learner state (a run directory: "
                          "its newest readable checkpoint; or one checkpoint file): same agent "
                          "and layer shapes, checked before anything is written; the origin is "
                          "recorded in run.json (see --init-keep; docs/guides/warm-start.md)")
  train.add_argument("--init-keep", default=None, metavar="PARTS",
                     help="(--init-from) what carries over, comma-separated: params, target, "
                          "opt_state, replay (default: params,target; replay: --launch local)")
  train.add_argument("--track", default=None, choices=tuple(tracking.TRACKERS),
                     help="also log the run's scalars, config and run.json to W&B (offline: "
                          "<logdir>/wandb) or MLflow (a local file store: <logdir>/mlruns); "
                          "needs pip install -e .[track] (docs/guides/tracking.md)")
  train.add_argument("--overwrite", action="store_true",
                     help="start over in a --logdir that already holds a run: its run.json, "
                          "checkpoints/ and logs are removed first (without it such a "
                          "directory is refused; --resume continues it instead)")
  train.add_argument("--checkpoint-every", type=cli.positive_float("--checkpoint-every"),
                     default=10.0, metavar="MINUTES", help="minutes between checkpoints "
                     "(default: 10; one is also written at the end and on Ctrl-C)")
  train.add_argument("--keep-checkpoints", type=cli.positive_int("--keep-checkpoints"), default=3,
                     metavar="K", help="keep the newest K checkpoints (default: 3)")
  distributed = [n for n in launch_choices() if modes.mode_for(n).distributed]
  train.add_argument("--launch", choices=launch_choices(), default=spec_lib.LOCAL,
                     help="; ".join(f"{name}: {modes.mode_for(name).summary}"
                                    for name in launch_choices()))
  train.add_argument("--num-actors", type=cli.positive_int("--num-actors"), default=None,
                     help=f"actor nodes with --launch {'/'.join(distributed)} "
                          f"(default: {DEFAULT_NUM_ACTORS})")
  _add_launch_options(train)
  train.add_argument("--num-envs", type=cli.positive_int("--num-envs"), default=None,
                     metavar="B", help="environments each actor steps at once, with one "
                     "batched inference per step (default: 1; B > 1 uses EnvPool where it "
                     "has the task, else Gymnasium's vector envs)")
  train.add_argument("--learner-device", choices=core.LEARNER_DEVICES, default="auto",
                     help="where the learner computes: auto (a GPU if jax sees one, else the "
                          "CPU; default), gpu (exit 2 if there is none) or cpu; actors, evaluator "
                          "and replay always run on the CPU")
  train.add_argument("--dry-run", action="store_true",
                     help="print the program's nodes and groups and exit without running")
  return train


_KINDS = {"str": lambda flag: str, "positive_int": cli.positive_int,
          "nonnegative_int": cli.nonnegative_int, "positive_float": cli.positive_float}


def _add_launch_options(parser) -> None:
  """Every launch mode's own options (`LaunchMode.options`) as flags, '(--launch NAME)'
  before each one's help."""
  exclusive = {}
  for names, option in modes.options_by_flag():
    target = parser
    if option.exclusive:
      key = (names, option.exclusive)
      if key not in exclusive:
        exclusive[key] = parser.add_mutually_exclusive_group()
      target = exclusive[key]
    target.add_argument(option.flag, dest=option.dest, default=option.default,
                        type=_KINDS[option.kind](option.flag), metavar=option.metavar,
                        help=f"(--launch {', '.join(names)}) {option.help}")


def run(args) -> int:
  # SIGTERM is a stop like Ctrl-C from the first line on (stops.Preempted; `actorq`
  # exits 143), not a silent death at start-up; the loops and launchers refine it.
  with stops.preemptible():
    stops.stop_with_parent()  # a sweep's child stops when the sweep is killed
    return _run(args)


def _run(args) -> int:
  # Before anything starts a jax backend (launch and device are as parsed).
  engine.place(args.launch, args.learner_device)
  spec = spec_lib.RunSpec.from_args(args)
  report = _Report(args.no_progress, spec.steps)
  try:
    outcome = launch_lib.run(spec, report=report, dry_run=args.dry_run,
                             overwrite=getattr(args, "overwrite", False),
                             track=getattr(args, "track", None))
  except checkpointing.CheckpointError as e:
    raise cli.UsageError(f"--resume {spec.logdir}: {e}") from None
  except core.RunFailure as e:
    raise engine.failure(spec, e) from e
  except KeyboardInterrupt as e:  # Ctrl-C, SIGTERM: say which checkpoint continues it
    report.close()
    if spec.logdir is not None:
      report.warn(engine.stop_message(spec.logdir, getattr(e, "checkpoint_path", None)))
    raise
  finally:
    report.close()
  for line in outcome.lines:
    print(line, flush=True)
  for line in outcome.errors:
    print(line, file=sys.stderr, flush=True)
  outcome.finish()
  return outcome.exit_code


class _Report:
  """What a run tells `actorq train` (`modes.Report`): lines, a progress bar of an
  in-process run's steps, a progress line of a program's counts every 30 s."""

  def __init__(self, quiet: bool, steps: int):
    self._quiet, self._steps = quiet, steps
    self._bar, self._last, self._said = None, 0, 0.0

  def say(self, line: str) -> None:
    print(line, flush=True)

  def warn(self, line: str) -> None:
    print(line, file=sys.stderr, flush=True)

  def steps(self, c) -> None:
    if self._bar is None:
      self._bar = tqdm(total=self._steps, unit="step", dynamic_ncols=True, disable=self._quiet,
                       mininterval=0.5, smoothing=0.05)
    self._bar.update(c["actor_steps"] - self._last)
    self._last = c["actor_steps"]
    if c["actor_steps"] % 500 == 0:
      self._bar.set_postfix(episodes=c["episodes"], learner=c["learner_steps"],
                            eval_return=f"{c['eval_return']:.1f}", refresh=False)

  def poll(self, counts) -> None:
    if self._quiet or time.time() - self._said < 30:
      return
    self._said = time.time()
    print(f"actorq: {int(counts.get(nodes.ACTOR_STEPS, 0))} actor steps, "
          f"{int(counts.get(nodes.LEARNER_STEPS, 0))} learner steps, "
          f"{int(counts.get(nodes.ACTOR_EPISODES, 0))} episodes", flush=True)

  def close(self) -> None:
    if self._bar is not None:
      self._bar.close()


# Kept under their old names for callers of this module.
no_learning_warning = engine.no_learning_warning
stop_message = engine.stop_message
failure = engine.failure
