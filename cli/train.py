"""`actorq train`: train an agent (default: DQN on gym:CartPole-v1), in one process
(`--launch local`, the default), compiled for a JAX environment (`--launch anakin`, see
`launch/anakin.py`) or as a Launchpad program (`--launch local_mt|local_mp
[--num-actors N]`, or `--launch hosts --hosts H1,H2,...` across machines, see
`launch/hosts.py`). The parsed flags become one `launch.spec.RunSpec` (`RunSpec.from_args`:
resume, launch checks and config resolution; the flags are not changed afterwards), whose
`build()` is the `launch.experiment.ExperimentConfig` every launch consumes; its JSON,
`run.json`, is written once before any starts (by `local.run` for `--launch local`, here
for the Launchpad launches).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import sys
import textwrap
import time

from tqdm import tqdm

from actorq import core
from actorq.cli import main as cli
from actorq.components import config_io
from actorq.launch import checkpointing, distributed, distributed_nodes, experiment, hosts, local
from actorq.launch import anakin, multi_agent
from actorq.launch import placement, precision_arg, registry, run_dir, supervisors
from actorq.launch import spec as spec_lib

DEFAULT_AGENT = spec_lib.DEFAULT_AGENT
DEFAULT_ENV = spec_lib.DEFAULT_ENV
DEFAULT_NUM_ACTORS = spec_lib.DEFAULT_NUM_ACTORS
# Defaults of the flags a resumed run takes from its run.json instead ("train" there).
TRAIN_DEFAULTS = spec_lib.TRAIN_DEFAULTS


def launch_choices() -> tuple:
  """``--launch``'s choices: ``local`` (one process, `launch.local.run`) and the launch
  types of `supervisors.SUPERVISORS` (`supervisors.launch_types()`, read when a parser is
  built, so a launch type registered before that is offered too)."""
  return spec_lib.SINGLE_PROCESS + supervisors.launch_types()


def _in_process(launch: str) -> bool:
  """Whether the learner computes in this process under `launch`."""
  return launch in spec_lib.SINGLE_PROCESS or supervisors.supervisor_for(launch).in_process


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
  train.add_argument("--seed", type=cli.nonnegative_int("--seed"), default=0)
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
  train.add_argument("--config", default=None, metavar="FILE",
                     help="the agent's config as JSON (or YAML if PyYAML is installed); fields "
                          "not in it keep their defaults, unknown keys are errors")
  train.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                     help="override one config field (repeatable), e.g. --set batch_size=32 "
                          "--set hidden_sizes=[64,64]; applied after --config")
  train.add_argument("--resume", default=None, metavar="RUN_DIR",
                     help="continue a run of 'actorq train' from its newest readable checkpoint "
                          "(agent, environment, seed and config come from its run.json)")
  train.add_argument("--overwrite", action="store_true",
                     help="start over in a --logdir that already holds a run: its run.json, "
                          "checkpoints/ and logs are removed first (without it such a "
                          "directory is refused; --resume continues it instead)")
  train.add_argument("--checkpoint-every", type=cli.positive_float("--checkpoint-every"),
                     default=10.0, metavar="MINUTES", help="minutes between checkpoints "
                     "(default: 10; one is also written at the end and on Ctrl-C)")
  train.add_argument("--keep-checkpoints", type=cli.positive_int("--keep-checkpoints"), default=3,
                     metavar="K", help="keep the newest K checkpoints (default: 3)")
  train.add_argument("--launch", choices=launch_choices(), default="local",
                     help="local: one process (default); anakin: one process, acting and "
                          "learning compiled into one jitted program vmapped over seeds "
                          "(JAX environments, e.g. gymnax:CartPole-v1); " + "; ".join(
                         f"{name}: {supervisors.supervisor_for(name).summary}"
                         for name in supervisors.launch_types()))
  train.add_argument("--num-actors", type=cli.positive_int("--num-actors"), default=None,
                     help=f"actor nodes with --launch {'/'.join(supervisors.launch_types())} "
                          f"(default: {DEFAULT_NUM_ACTORS})")
  where = train.add_mutually_exclusive_group()
  where.add_argument("--hosts", default=None, metavar="H1,H2,...",
                     help="(--launch hosts) machines, reachable from each other; the first "
                          "runs replay, counter and learner, the others actors and evaluator; "
                          "'slurm': the SLURM allocation's nodes (the default inside one)")
  where.add_argument("--hosts-file", default=None, metavar="FILE",
                     help="(--launch hosts) one host per line, '#' comments")
  train.add_argument("--port-base", type=cli.positive_int("--port-base"),
                     default=hosts.DEFAULT_PORT_BASE, metavar="PORT",
                     help=f"(--launch hosts) node k listens on PORT+k of its host "
                          f"(default: {hosts.DEFAULT_PORT_BASE}; 2 actors use 6 ports)")
  train.add_argument("--start", default=None, metavar="HOW",
                     help="(--launch hosts) how each host's runner is started: ssh (default), "
                          "srun (default inside a SLURM allocation), print (print the "
                          "commands, start nothing), or a command template with {host} "
                          "and/or {index}, e.g. 'ssh -p 2222 {host}'")
  train.add_argument("--host-timeout", type=cli.positive_float("--host-timeout"), default=None,
                     metavar="SECONDS", help="(--launch hosts) a node (or the launcher) that has "
                     "not polled the program's stop for this long is taken for dead and the "
                     "program stops (default: 15; at least 3 s)")
  train.add_argument("--node-python", default=sys.executable, metavar="PATH",
                     help="(--launch hosts) Python with actorq installed on the hosts "
                          "(default: this one's path)")
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


def _place(args) -> None:
  """Where this process's jax may compute, decided before anything starts a jax backend:
  a `local_mp` launcher and a CPU learner's process use the CPU only (no GPU backend, no GPU
  memory reserved); a GPU learner must have a GPU (checked in this process for `local` and
  `local_mt`, in a child process with this environment for `local_mp`).

  Raises:
    cli.UsageError: `--learner-device gpu` and jax sees no GPU.
  """
  if not _in_process(args.launch) or args.learner_device == "cpu":
    placement.restrict_to_cpu()
  if args.launch == "hosts":  # the learner's host decides; its node fails in one line
    return
  try:
    placement.check_learner_device(args.learner_device, in_process=_in_process(args.launch),
                                   name="--learner-device")
  except placement.NoAcceleratorError as e:
    raise cli.UsageError(str(e)) from None


def run(args) -> int:
  # SIGTERM is a stop like Ctrl-C from the first line on (experiment.Preempted; `actorq`
  # exits 143), not a silent death at start-up; the loops and launchers refine it.
  with experiment.preemptible():
    return _run(args)


def _run(args) -> int:
  _place(args)  # before anything starts a jax backend (launch and device are as parsed)
  spec = spec_lib.RunSpec.from_args(args)
  if spec.launch == spec_lib.ANAKIN:  # compiled: `launch.anakin` (its own checks and loop)
    return anakin.train_command(args, spec)
  config = (dataclasses.replace(spec, logdir=None) if args.dry_run else spec).build()
  if not args.dry_run:
    if not spec.resume:  # one run per directory (case B8)
      run_dir.claim_logdir(spec.logdir, overwrite=getattr(args, "overwrite", False))
    spec = dataclasses.replace(spec, logdir=cli.ensure_writable_dir(spec.logdir))
  warning = no_learning_warning(spec.steps, config.steps_before_learning(), spec.resume)
  if warning:
    print(warning, file=sys.stderr, flush=True)
  if args.dry_run and spec.launch == "local":
    print(f"launch local: one process (seeded in-process replay built from the agent's "
          f"reverb.Table definitions, 1 actor, learner, evaluation every {spec.eval_every} "
          "actor steps); no Launchpad program (--launch local_mt: real Reverb in one process)")
    return 0
  if spec.launch == "local":
    return _run_local(args, spec, config)  # local.run writes run.json
  if not args.dry_run and not spec.resume:
    spec.save(spec.logdir)
  return _run_distributed(args, spec, config)


def no_learning_warning(steps: int, needed: int, resume: bool = False) -> "str | None":
  """The line `actorq train` prints (to stderr; the run goes on) when `steps` (`--steps`,
  summed over actors and environments) is below `needed`, the actor steps before the
  learner's first step (`ExperimentConfig.steps_before_learning`); None otherwise. A
  warning, not an error, as Acme's rate limiter and SB3's `learning_starts` do not refuse
  such a run: smoke runs and acting-only runs are legitimate. `resume`: the config is the
  run's own (no `--set`), so only `--steps` is offered."""
  if steps >= needed:
    return None
  change = "" if resume else f" or --set min_replay_size=N with N below {steps}"
  return (f"actorq: warning: --steps {steps} ends before the learner's first step: it starts "
          f"once replay holds min_replay_size={needed} items, one per actor step at most "
          f"(summed over actors and environments), so this run will not learn; give --steps "
          f"above {needed}{change}")


def failure(spec: spec_lib.RunSpec, error: core.RunFailure) -> core.RunFailure:
  """`error` (same type) with the environment id before an environment's fault and, when
  the run has a readable checkpoint, how to continue from it."""
  message = f"{spec.env}: {error}" if isinstance(error, core.EnvironmentFailure) else str(error)
  ckpt_dir = os.path.join(spec.logdir, run_dir.CHECKPOINTS) if spec.logdir else None
  if ckpt_dir and checkpointing.list_checkpoints(ckpt_dir):
    message += f"; continue from the newest checkpoint with: actorq train --resume {spec.logdir}"
  return type(error)(message)


def stop_message(logdir: str, saved: "str | None") -> str:
  """What a stopped run (Ctrl-C, SIGTERM) says about its checkpoints, truthfully (case
  B9): the checkpoint `saved` at the stop, else the newest earlier one, else that there
  is nothing to resume."""
  if saved:
    return (f"actorq: checkpoint saved ({os.path.basename(saved)}); continue with: "
            f"actorq train --resume {logdir}")
  if checkpointing.list_checkpoints(os.path.join(logdir, run_dir.CHECKPOINTS)):
    return (f"actorq: no checkpoint was written at the stop; continue from the newest "
            f"earlier one with: actorq train --resume {logdir}")
  return (f"actorq: stopped before the first checkpoint, nothing to resume; start again "
          f"with the same flags and --overwrite (--logdir {logdir})")


def _run_local(args, spec: spec_lib.RunSpec, config) -> int:
  bar = tqdm(total=spec.steps, unit="step", dynamic_ncols=True, disable=args.no_progress,
             mininterval=0.5, smoothing=0.05)
  last = {"n": 0}

  def progress(c):
    bar.update(c["actor_steps"] - last["n"])
    last["n"] = c["actor_steps"]
    if c["actor_steps"] % 500 == 0:
      bar.set_postfix(episodes=c["episodes"], learner=c["learner_steps"],
                      eval_return=f"{c['eval_return']:.1f}", refresh=False)

  learner_on = placement.device_name(placement.learner_device(config.learner_device))
  print(f"actorq: {'resuming' if spec.resume else 'training'} {spec.agent} on {spec.env} for "
        f"{spec.steps} steps (seed {spec.seed}, actors {config.precision} on cpu, learner on "
        f"{learner_on}); logs in {spec.logdir}", flush=True)
  try:
    result = (multi_agent.run if config.multi_agent else local.run)(config, progress=progress)
  except checkpointing.CheckpointError as e:
    raise cli.UsageError(f"--resume {spec.logdir}: {e}") from None
  except core.RunFailure as e:
    raise failure(spec, e) from e
  except KeyboardInterrupt as e:
    print(stop_message(spec.logdir, getattr(e, "checkpoint_path", None)), file=sys.stderr)
    raise
  finally:
    bar.close()
  if result.resumed_from:
    print(f"actorq: resumed from {result.resumed_from} (actor step {result.resumed_actor_steps})")
  print(f"actorq: done in {result.wall_seconds:.0f} s: {result.actor_steps} actor steps, "
        f"{result.learner_steps} learner steps, {result.episodes} episodes; "
        f"best evaluation return {result.best_eval_return:.1f} at step {result.best_eval_step}")
  print(f"final evaluation return: {result.final_eval_return:.1f} "
        f"(mean over {spec.eval_episodes} greedy episodes, actors {config.precision}); "
        f"learner parameters {result.params_checksum}")
  return 0


def _run_distributed(args, spec: spec_lib.RunSpec, config) -> int:
  try:
    options = distributed.DistributedOptions()
    if spec.host_timeout is not None:
      options = dataclasses.replace(options, silent_after_s=spec.host_timeout)
    dp = distributed.make_program(config, spec.num_actors, name=f"actorq-{spec.agent}",
                                  hosts=spec.hosts_config(), options=options)
  except checkpointing.CheckpointError as e:
    raise cli.UsageError(f"--resume {spec.logdir}: {e}") from None
  if args.dry_run:
    print(distributed.describe(dp, spec.launch))
    return 0
  n = distributed_nodes
  print(f"actorq: {'resuming' if spec.resume else 'training'} {spec.agent} on {spec.env} for "
        f"{spec.steps} actor steps with {spec.num_actors} actors ({spec.launch}, seed "
        f"{spec.seed}, actors {config.precision} on cpu, learner device "
        f"{config.learner_device}); logs in {spec.logdir}", flush=True)
  if dp.resumed_from:
    print(f"actorq: resuming from {dp.resumed_from} (actor step "
          f"{int(dp.resumed_counts[n.ACTOR_STEPS])}, learner step "
          f"{int(dp.resumed_counts[n.LEARNER_STEPS])})", flush=True)
  last = {"t": 0.0}

  def on_poll(counts):
    if args.no_progress or time.time() - last["t"] < 30:
      return
    last["t"] = time.time()
    print(f"actorq: {int(counts.get(n.ACTOR_STEPS, 0))} actor steps, "
          f"{int(counts.get(n.LEARNER_STEPS, 0))} learner steps, "
          f"{int(counts.get(n.ACTOR_EPISODES, 0))} episodes", flush=True)

  result = distributed.launch(dp, spec.launch, echo=not args.no_progress, on_poll=on_poll)
  print(distributed.summary_line(result), flush=True)
  if result.reason == "signal":  # which checkpoint the run continues from, truthfully
    print(stop_message(spec.logdir, result.checkpoint), file=sys.stderr, flush=True)
  if result.evaluations:
    print(f"final evaluation return: {result.final_eval_return:.1f} "
          f"(mean over {spec.eval_episodes} greedy episodes, actors {config.precision})",
          flush=True)
  distributed.exit_now(result)  # local_mt node threads that never stopped: end here
  return result.exit_code
