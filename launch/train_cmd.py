"""`actorq train`: train an agent (default: DQN on gym:CartPole-v1), in one process
(`--launch local`, the default) or as a Launchpad program (`--launch local_mt|local_mp
[--num-actors N]`, or `--launch hosts --hosts H1,H2,...` across machines, see
`launch/hosts.py`). All consume one `launch.experiment.ExperimentConfig`; `run.json` is
written once, here, before any starts.
"""
from __future__ import annotations

import dataclasses
import os
import sys
import time

from tqdm import tqdm

from actorq import core
from actorq.components import checkpointing, config_io, environments, placement
from actorq.components import vector_env
from actorq.launch import cli, distributed, distributed_nodes, experiment, hosts, local
from actorq.launch import precision_arg, registry, run_dir

DEFAULT_AGENT = "dqn"
DEFAULT_ENV = "gym:CartPole-v1"
LAUNCH_CHOICES = ("local",) + distributed.LAUNCH_TYPES
DEFAULT_NUM_ACTORS = 2
# Defaults of the flags a resumed run takes from its run.json instead ("train" there).
TRAIN_DEFAULTS = {"steps": 100_000, "eval_every": 5_000, "eval_episodes": 10}


def add_parser(subparsers):
  train = subparsers.add_parser("train", help="train an agent (default: DQN on gym:CartPole-v1)")
  train.add_argument("--agent", default=DEFAULT_AGENT, help="agent name (default: dqn)")
  train.add_argument("--env", default=DEFAULT_ENV,
                     help="environment id: gym:<id>, dmc:<domain>-<task>, atari:<Game>")
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
  train.add_argument("--launch", choices=LAUNCH_CHOICES, default="local",
                     help="local: one process (default); local_mt: a Launchpad program in "
                          "threads; local_mp: a Launchpad program, one process per node; "
                          "hosts: one process per node on the machines of --hosts")
  train.add_argument("--num-actors", type=cli.positive_int("--num-actors"), default=None,
                     help=f"actor nodes with --launch local_mt/local_mp/hosts (default: "
                          f"{DEFAULT_NUM_ACTORS})")
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


def make_builder(args):
  """Validates agent, environment and their fit; returns the agent's builder.

  Raises:
    cli.UsageError: naming what is wrong and what is allowed.
  """
  try:
    config_cls, builder_cls = registry.get(args.agent)
  except registry.UnknownAgentError as e:
    raise cli.UsageError(str(e)) from None
  try:
    env = environments.make_environment(args.env, seed=args.seed)
  except (core.UnknownEnvironmentError, core.UnsupportedEnvironmentError) as e:
    raise cli.UsageError(str(e)) from None
  builder = builder_cls(resolve_config(args, config_cls))
  try:
    env_spec = environments.environment_spec(env)
    networks = builder.make_networks(env_spec)
  except ValueError as e:  # e.g. UnsupportedEnvironmentError: continuous actions for DQN
    raise cli.UsageError(f"agent {args.agent!r} cannot run on {args.env}: {e}") from None
  finally:
    env.close()
  precision = builder.config.actor_precision
  if core.is_mixed(precision):  # a per-layer policy must fit this agent's policy network
    policy_file = getattr(args, "actor_precision_file", None)
    precision_arg.check_policy_file("--actor-precision", precision, policy_file,
                          builder.make_policy(networks, env_spec).spec)
  return builder


def resolve_config(args, config_cls):
  """The run's config: defaults <- `--config` file (or a resumed run's run.json, whose
  keys this version does not know are dropped with a warning) <- `--set`, checked as
  given, then `--actor-precision`.

  Raises:
    cli.UsageError: unknown keys (named, with the allowed ones), bad values (naming the
      field, the value and what is allowed; a `--set` value is checked even when
      `--actor-precision` replaces it), contradicting fields, unreadable files.
  """
  values = {}
  try:
    if getattr(args, "resume_info", None) is not None:
      values = run_dir.config_values(args.resume_info, config_cls)
    elif getattr(args, "config", None):
      values = config_io.read_file(args.config)
    overrides = dict(config_io.parse_assignment(a) for a in getattr(args, "set", None) or [])
    config = config_io.from_dict(config_cls, values, overrides)
    precision, args.actor_precision_file = precision_arg.actor_precision("--actor-precision",
                                                               args.actor_precision)
    if precision is not None:
      config = dataclasses.replace(config, actor_precision=precision)
    return config
  except ValueError as e:
    where = f"--config {args.config}: " if getattr(args, "config", None) else ""
    raise cli.UsageError(f"{where}{e}") from None


def apply_resume(args) -> None:
  """For `--resume RUN_DIR`: agent, environment, seed, logdir, launch settings and (unless
  given) the total steps, evaluation period and episodes come from the run's run.json.

  Raises:
    cli.UsageError: not a run directory, or flags that would change the run.
  """
  if args.config or args.set:
    raise cli.UsageError("--resume keeps the run's config from its run.json; "
                         "--config and --set cannot be combined with it")
  if args.dry_run:
    raise cli.UsageError("--dry-run cannot be combined with --resume")
  if getattr(args, "overwrite", False):
    raise cli.UsageError("--overwrite starts a new run; --resume continues one: give one "
                         "of them")
  try:
    run_path, _ = run_dir.resolve(args.resume)
  except cli.UsageError as e:
    raise cli.UsageError(str(e).replace("--checkpoint", "--resume", 1)) from None
  info = run_dir.read_info(run_path)
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
  if args.num_actors is None and "num_actors" in saved:
    args.num_actors = int(saved["num_actors"])
  if args.num_envs is None and "num_envs" in saved:
    args.num_envs = int(saved["num_envs"])
  args.resume_info = info


def run_info(args, config) -> dict:
  """`run.json`: agent, environment, seed, the resolved config and the train settings."""
  train = {"steps": args.steps, "eval_every": args.eval_every,
           "eval_episodes": args.eval_episodes}
  if args.launch != "local":
    train.update(launch=args.launch, num_actors=args.num_actors)
  if args.launch == "hosts":
    train.update(hosts=list(args.hosts_config.hosts), port_base=args.port_base,
                 start=args.hosts_config.start)
  if (args.num_envs or 1) > 1:
    train["num_envs"] = args.num_envs
  return {"agent": args.agent, "env": args.env, "seed": args.seed,
          "config": config_io.to_dict(config), "train": train}


def hosts_config(args, environ=os.environ) -> "hosts.HostsConfig | None":
  """`--launch hosts`: the hosts (from --hosts, --hosts-file or the SLURM allocation),
  port base, start command and Python; None for other launch types.

  Raises:
    cli.UsageError: hosts flags without --launch hosts, no hosts, a bad name or template.
  """
  given = [f for f, v in (("--hosts", args.hosts), ("--hosts-file", args.hosts_file),
                          ("--start", args.start), ("--host-timeout", args.host_timeout))
           if v is not None]
  if args.launch != "hosts":
    if given or args.port_base != hosts.DEFAULT_PORT_BASE:
      raise cli.UsageError(f"{(given or ['--port-base'])[0]} needs --launch hosts")
    return None
  try:
    if args.hosts_file is not None:
      names = hosts.read_hosts_file(args.hosts_file)
    elif args.hosts not in (None, "slurm"):
      names = hosts.parse_host_list(args.hosts)
    else:
      names = hosts.slurm_hosts(environ)
      if names is None:
        raise ValueError("--launch hosts needs --hosts H1,H2,..., --hosts-file FILE or a "
                         "SLURM allocation (SLURM_JOB_NODELIST)" + (
                             " (--hosts slurm: SLURM_JOB_NODELIST is not set)"
                             if args.hosts == "slurm" else ""))
    slurm = args.hosts in (None, "slurm") and args.hosts_file is None
    start = args.start or ("srun" if slurm else "ssh")
    config = hosts.HostsConfig(names, args.port_base, start, args.node_python)
    if args.host_timeout is not None and args.host_timeout < 3:
      raise ValueError(f"--host-timeout must be >= 3 seconds, got {args.host_timeout:g}")
    if config.port_base + 3 + args.num_actors > 65535:
      raise ValueError(f"--port-base {args.port_base}: the program's "
                       f"{4 + args.num_actors} ports run past 65535")
    return config
  except ValueError as e:
    raise cli.UsageError(str(e)) from None


def _check_launch(args) -> None:
  if args.launch == "local" and args.num_actors not in (None, 1):
    raise cli.UsageError("--num-actors needs --launch local_mt, local_mp or hosts "
                         "(--launch local runs one actor)")
  if args.launch != "local" and args.num_actors is None:
    args.num_actors = DEFAULT_NUM_ACTORS
  args.hosts_config = hosts_config(args)


def _place(args) -> None:
  """Where this process's jax may compute, decided before anything starts a jax backend:
  a `local_mp` launcher and a CPU learner's process use the CPU only (no GPU backend, no GPU
  memory reserved); a GPU learner must have a GPU (checked in this process for `local` and
  `local_mt`, in a child process with this environment for `local_mp`).

  Raises:
    cli.UsageError: `--learner-device gpu` and jax sees no GPU.
  """
  if args.launch in ("local_mp", "hosts") or args.learner_device == "cpu":
    placement.restrict_to_cpu()
  if args.launch == "hosts":  # the learner's host decides; its node fails in one line
    return
  try:
    placement.check_learner_device(args.learner_device, in_process=args.launch != "local_mp",
                                   name="--learner-device")
  except placement.NoAcceleratorError as e:
    raise cli.UsageError(str(e)) from None


def run(args) -> int:
  # SIGTERM is a stop like Ctrl-C from the first line on (experiment.Preempted; `actorq`
  # exits 143), not a silent death at start-up; the loops and launchers refine it.
  with experiment.preemptible():
    return _run(args)


def _run(args) -> int:
  args.resume_info = None
  if args.resume:
    apply_resume(args)
  for key, default in TRAIN_DEFAULTS.items():
    if getattr(args, key) is None:
      setattr(args, key, default)
  _check_launch(args)
  _place(args)
  builder = make_builder(args)
  try:
    vector_env.check_num_envs(args.env, args.num_envs or 1)
  except ValueError as e:
    raise cli.UsageError(f"--num-envs: {e}") from None
  if args.dry_run and args.launch == "local":
    print(f"launch local: one process (embedded Reverb server, 1 actor, learner, evaluation "
          f"every {args.eval_every} actor steps); no Launchpad program")
    return 0
  if args.logdir is None and not args.dry_run:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    suffix = "" if args.launch == "local" else f"-{args.launch}"
    args.logdir = os.path.join(
        "runs", f"{args.agent}-{args.env.replace(':', '_')}-s{args.seed}{suffix}-{stamp}")
  try:
    config = experiment.ExperimentConfig(
        builder=builder, env_id=args.env, num_steps=args.steps, seed=args.seed,
        eval_every=args.eval_every, eval_episodes=args.eval_episodes,
        logdir=None if args.dry_run else args.logdir, checkpoint_every=args.checkpoint_every,
        keep_checkpoints=args.keep_checkpoints, resume=bool(args.resume),
        num_envs=args.num_envs or 1, learner_device=args.learner_device)
  except ValueError as e:
    raise cli.UsageError(str(e)) from None
  if not args.dry_run:
    if not args.resume:  # one run per directory (case B8)
      run_dir.claim_logdir(args.logdir, overwrite=getattr(args, "overwrite", False))
    args.logdir = cli.ensure_writable_dir(args.logdir)
    if not args.resume:
      run_dir.write_info(args.logdir, run_info(args, builder.config))
  if args.launch == "local":
    return _run_local(args, config)
  return _run_distributed(args, config)


def failure(args, error: core.RunFailure) -> core.RunFailure:
  """`error` (same type) with the environment id before an environment's fault and, when
  the run has a readable checkpoint, how to continue from it."""
  message = f"{args.env}: {error}" if isinstance(error, core.EnvironmentFailure) else str(error)
  ckpt_dir = os.path.join(args.logdir, run_dir.CHECKPOINTS) if args.logdir else None
  if ckpt_dir and checkpointing.list_checkpoints(ckpt_dir):
    message += f"; continue from the newest checkpoint with: actorq train --resume {args.logdir}"
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


def _run_local(args, config) -> int:
  bar = tqdm(total=args.steps, unit="step", dynamic_ncols=True, disable=args.no_progress,
             mininterval=0.5, smoothing=0.05)
  last = {"n": 0}

  def progress(c):
    bar.update(c["actor_steps"] - last["n"])
    last["n"] = c["actor_steps"]
    if c["actor_steps"] % 500 == 0:
      bar.set_postfix(episodes=c["episodes"], learner=c["learner_steps"],
                      eval_return=f"{c['eval_return']:.1f}", refresh=False)

  learner_on = placement.device_name(placement.learner_device(config.learner_device))
  print(f"actorq: {'resuming' if args.resume else 'training'} {args.agent} on {args.env} for "
        f"{args.steps} steps (seed {args.seed}, actors {config.precision} on cpu, learner on "
        f"{learner_on}); logs in {args.logdir}", flush=True)
  try:
    result = local.run(config, progress=progress)
  except checkpointing.CheckpointError as e:
    raise cli.UsageError(f"--resume {args.logdir}: {e}") from None
  except core.RunFailure as e:
    raise failure(args, e) from e
  except KeyboardInterrupt as e:
    print(stop_message(args.logdir, getattr(e, "checkpoint_path", None)), file=sys.stderr)
    raise
  finally:
    bar.close()
  if result.resumed_from:
    print(f"actorq: resumed from {result.resumed_from} (actor step {result.resumed_actor_steps})")
  print(f"actorq: done in {result.wall_seconds:.0f} s: {result.actor_steps} actor steps, "
        f"{result.learner_steps} learner steps, {result.episodes} episodes; "
        f"best evaluation return {result.best_eval_return:.1f} at step {result.best_eval_step}")
  print(f"final evaluation return: {result.final_eval_return:.1f} "
        f"(mean over {args.eval_episodes} greedy episodes, actors {config.precision}); "
        f"learner parameters {result.params_checksum}")
  return 0


def _run_distributed(args, config) -> int:
  try:
    options = distributed.DistributedOptions()
    if args.host_timeout is not None:
      options = dataclasses.replace(options, silent_after_s=args.host_timeout)
    dp = distributed.make_program(config, args.num_actors, name=f"actorq-{args.agent}",
                                  hosts=args.hosts_config, options=options)
  except checkpointing.CheckpointError as e:
    raise cli.UsageError(f"--resume {args.logdir}: {e}") from None
  if args.dry_run:
    print(distributed.describe(dp, args.launch))
    return 0
  n = distributed_nodes
  print(f"actorq: {'resuming' if args.resume else 'training'} {args.agent} on {args.env} for "
        f"{args.steps} actor steps with {args.num_actors} actors ({args.launch}, seed "
        f"{args.seed}, actors {config.precision} on cpu, learner device "
        f"{config.learner_device}); logs in {args.logdir}", flush=True)
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

  result = distributed.launch(dp, args.launch, echo=not args.no_progress, on_poll=on_poll)
  print(distributed.summary_line(result), flush=True)
  if result.reason == "signal":  # which checkpoint the run continues from, truthfully
    print(stop_message(args.logdir, result.checkpoint), file=sys.stderr, flush=True)
  if result.evaluations:
    print(f"final evaluation return: {result.final_eval_return:.1f} "
          f"(mean over {args.eval_episodes} greedy episodes, actors {config.precision})",
          flush=True)
  distributed.exit_now(result)  # local_mt node threads that never stopped: end here
  return result.exit_code
