"""`RunSpec`: one run's description. Its JSON is the run directory's `run.json`.

    spec = RunSpec.from_args(parser.parse_args(["train", "--steps", "3000"]))
    config = spec.build()                  # the ExperimentConfig local.run / make_program take
    spec.save(logdir)                      # run.json (written by run_dir, the one writer)
    spec = RunSpec.load(logdir)            # back, tolerant of older run.json files
    argv = spec.to_argv()                  # `actorq train ARGV` reproduces it (sweep children)

A spec is frozen: resuming, launch checks and config resolution happen in `from_args`,
which returns a new spec and leaves the parsed arguments as they were; a change is
`dataclasses.replace(spec, ...)`.

run.json (`to_json`; the same keys and values as before RunSpec existed):

    {"agent": "dqn", "env": "gym:CartPole-v1", "seed": 0,
     "config": {every field of the agent's config, as JSON},
     "train": {"steps": N, "eval_every": K, "eval_episodes": M,
               ["launch": L, "num_actors": A]              (launch other than local)
               ["hosts": [...], "port_base": P, "start": S] (launch hosts)
               ["num_envs": B]}}                            (B > 1)

The fields after `start` (logdir, resume, checkpointing, learner device, host timeout and
Python) say how this invocation runs the run, not what the run is: they are not in
run.json, and `to_argv` gives them back as flags.
"""
from __future__ import annotations

import dataclasses
import json
import os
import sys
import warnings
from typing import Any, Dict, List, Mapping, Optional, Tuple

from actorq import core
from actorq.components import config_io
from actorq.components.envs import environments, multi_agent, vector_env
from actorq.launch import checkpointing, experiment, hosts, registry, run_dir, supervisors
from actorq.launch import precision_arg

DEFAULT_AGENT = "dqn"
DEFAULT_ENV = "gym:CartPole-v1"
# The train settings' defaults; a resumed run takes the missing ones from its run.json.
TRAIN_DEFAULTS = {"steps": 100_000, "eval_every": 5_000, "eval_episodes": 10}
DEFAULT_NUM_ACTORS = 2
DEFAULT_CHECKPOINT_EVERY = 10.0  # minutes
DEFAULT_KEEP_CHECKPOINTS = 3
LOCAL = "local"
ANAKIN = "anakin"  # one process, compiled (`launch.anakin`)
SINGLE_PROCESS = (LOCAL, ANAKIN)  # launches of one process and one actor (no --num-actors)

_REQUIRED = ("agent", "env", "seed", "config")
_TRAIN_KEYS = ("steps", "eval_every", "eval_episodes", "launch", "num_actors", "hosts",
               "port_base", "start", "num_envs")


@dataclasses.dataclass(frozen=True)
class RunSpec:
  """What `actorq train` runs, and what eval, quantize, export, sweep and bench rebuild.

  Attributes:
    agent: a name `launch.registry.get` resolves (e.g. "dqn").
    env: environment id (`actorq.components.envs.environments`), e.g. "gym:CartPole-v1".
    seed: integer >= 0; seeds environments, networks, exploration and replay sampling.
    config: the agent's config as JSON values (`config_io.to_dict`; every field for a spec
      made by `from_args`; a loaded run.json's keys that the agent's config does not know
      are dropped, missing ones take the config's defaults in `build`). Read-only.
    steps: actor (environment) steps in total, summed over actors.
    eval_every: actor steps between greedy evaluations.
    eval_episodes: greedy episodes per evaluation.
    launch: "local" (one process), "anakin" (one process, compiled: `launch.anakin`) or one
      of `supervisors.launch_types()`.
    num_actors: actor nodes of a distributed launch; None for "local".
    num_envs: environments each actor steps at once (B >= 1).
    hosts: (launch "hosts") the machines, in order; else None.
    port_base: (launch "hosts") the first TCP port; else None.
    start: (launch "hosts") how host runners start (ssh, srun, print or a template).
    logdir: the run directory; None: no files (a dry run). Not in run.json.
    resume: continue from the newest readable checkpoint in `logdir`. Not in run.json.
    checkpoint_every: minutes between checkpoints. Not in run.json.
    keep_checkpoints: the newest checkpoints kept. Not in run.json.
    learner_device: one of `core.LEARNER_DEVICES`. Not in run.json.
    host_timeout: (launch "hosts") seconds a silent node is taken for dead; None: the
      default of `distributed.DistributedOptions`. Not in run.json.
    node_python: (launch "hosts") the Python of the hosts; None: this one's. Not in run.json.
  """
  agent: str = DEFAULT_AGENT
  env: str = DEFAULT_ENV
  seed: int = 0
  config: Mapping[str, Any] = dataclasses.field(default_factory=dict)
  steps: int = TRAIN_DEFAULTS["steps"]
  eval_every: int = TRAIN_DEFAULTS["eval_every"]
  eval_episodes: int = TRAIN_DEFAULTS["eval_episodes"]
  launch: str = LOCAL
  num_actors: Optional[int] = None
  num_envs: int = 1
  hosts: Optional[Tuple[str, ...]] = None
  port_base: Optional[int] = None
  start: Optional[str] = None
  # How this invocation runs it (not in run.json).
  logdir: Optional[str] = None
  resume: bool = False
  checkpoint_every: Optional[float] = DEFAULT_CHECKPOINT_EVERY
  keep_checkpoints: int = DEFAULT_KEEP_CHECKPOINTS
  learner_device: str = "auto"
  host_timeout: Optional[float] = None
  node_python: Optional[str] = None

  # -- run.json -------------------------------------------------------------------------
  def to_json(self) -> Dict[str, Any]:
    """run.json's contents: agent, env, seed, config and the train settings (see the
    module docstring for which train keys appear when)."""
    train: Dict[str, Any] = {"steps": self.steps, "eval_every": self.eval_every,
                             "eval_episodes": self.eval_episodes}
    if self.launch not in SINGLE_PROCESS:
      train.update(launch=self.launch, num_actors=self.num_actors)
    elif self.launch != LOCAL:
      train.update(launch=self.launch)
    if self.launch == "hosts":
      train.update(hosts=list(self.hosts or ()), port_base=self.port_base, start=self.start)
    if self.num_envs > 1:
      train["num_envs"] = self.num_envs
    return {"agent": self.agent, "env": self.env, "seed": self.seed,
            "config": json.loads(json.dumps(dict(self.config))), "train": train}

  @classmethod
  def from_json(cls, info: Any, where: str = "run.json", **runtime: Any) -> "RunSpec":
    """The spec of a run.json's contents (`runtime`: the fields not in run.json).

    Tolerant of run.json files of other versions: a top-level, train or config key this
    version does not know is dropped with one `UserWarning` naming them (config keys only
    when the agent resolves; otherwise `build` reports the agent); a missing train key
    takes its default.

    Raises:
      core.UsageError: `info` is not a dict holding agent, env, seed and config (naming
        `where` and the missing keys), or a value of the wrong type.
    """
    missing = [k for k in _REQUIRED if not isinstance(info, dict) or k not in info]
    if missing:
      raise core.UsageError(f"{where} is not a run.json of 'actorq train' (missing "
                           f"{', '.join(missing)})")
    unknown = [k for k in info if k not in _REQUIRED + ("train",)]
    train = dict(info.get("train") or {})
    unknown += [f"train.{k}" for k in train if k not in _TRAIN_KEYS]
    config = dict(info["config"] or {})
    try:
      config_cls, _ = registry.get(info["agent"])
    except (registry.UnknownAgentError, TypeError):
      config_cls = None
    if config_cls is not None:
      unknown_config = sorted(set(config) - config_io.field_names(config_cls))
      if unknown_config:
        warnings.warn(f"run.json: ignoring {config_cls.__name__} key(s) this version does not "
                      f"know: {', '.join(unknown_config)}", UserWarning, stacklevel=3)
        for key in unknown_config:
          del config[key]
    if unknown:
      warnings.warn(f"run.json: ignoring key(s) this version does not know: "
                    f"{', '.join(unknown)}", UserWarning, stacklevel=3)
    try:
      hosts_list = train.get("hosts")
      return cls(agent=str(info["agent"]), env=str(info["env"]), seed=int(info["seed"]),
                 config=config,
                 **{k: int(train.get(k, v)) for k, v in TRAIN_DEFAULTS.items()},
                 launch=str(train.get("launch", LOCAL)),
                 num_actors=None if train.get("num_actors") is None else int(train["num_actors"]),
                 num_envs=int(train.get("num_envs", 1)),
                 hosts=None if hosts_list is None else tuple(hosts_list),
                 port_base=train.get("port_base"), start=train.get("start"), **runtime)
    except (TypeError, ValueError) as e:
      raise core.UsageError(f"{where}: {e}") from None

  @classmethod
  def load(cls, run_path: str, **runtime: Any) -> "RunSpec":
    """The spec in `<run_path>/run.json` (read by `run_dir.read_info`, the one reader of
    run.json; `from_json`: tolerant of other versions' keys). `runtime` sets the fields
    not in run.json (e.g. `logdir`).

    Raises:
      core.UsageError: unreadable, or not a run.json of `actorq train` (naming the path and
        the missing keys).
    """
    return cls.from_json(run_dir.read_info(run_path),
                         where=os.path.join(run_path, run_dir.RUN_INFO), **runtime)

  def save(self, run_path: str) -> None:
    """Writes `<run_path>/run.json` (`to_json`, by `run_dir.write_info`, the one writer)."""
    run_dir.write_info(run_path, self.to_json())

  @classmethod
  def from_config(cls, config: Any) -> "RunSpec":
    """The spec of a single-process `ExperimentConfig` (what `local.run` writes as run.json,
    as `actorq train` does). The agent is the name under which `launch.registry` has
    `type(config.builder)`; a builder registered under no name is recorded as
    ``"<module>:<class>"``.

    Raises:
      ValueError: `config.builder.config` is not a dataclass config.
    """
    builder_cls = type(config.builder)
    agent = f"{builder_cls.__module__}:{builder_cls.__qualname__}"
    for name in registry.names():
      if registry.get(name)[1] is builder_cls:
        agent = name
        break
    return cls(agent=agent, env=config.env_id, seed=config.seed,
               config=config_io.to_dict(config.builder.config), steps=config.num_steps,
               eval_every=config.eval_every, eval_episodes=config.eval_episodes,
               num_envs=config.num_envs, logdir=config.logdir, resume=config.resume,
               checkpoint_every=config.checkpoint_every,
               keep_checkpoints=config.keep_checkpoints, learner_device=config.learner_device)

  # -- the ExperimentConfig ---------------------------------------------------------------
  def make_builder(self, **overrides: Any):
    """The agent's builder, its config built from `config` (plus `overrides`, config field
    -> value).

    Raises:
      core.UsageError: an unknown agent (naming the allowed ones), or a config value this
        version refuses (naming the field, the value and what is allowed).
    """
    try:
      return make_builder(self.agent, self.config, overrides)
    except ValueError as e:  # registry.UnknownAgentError included
      raise core.UsageError(f"run.json: {e}") from None

  def build(self, **overrides: Any) -> experiment.ExperimentConfig:
    """THE builder-from-description path: the `ExperimentConfig` that `local.run` and
    `distributed.make_program` take (train), whose builder eval, quantize, export, sweep
    children and bench use. `overrides` replace config fields (`make_builder`).

    Raises:
      core.UsageError: an unknown agent, a refused config value, or a run setting that
        `ExperimentConfig` refuses (its message).
    """
    builder = self.make_builder(**overrides)
    try:
      return experiment.ExperimentConfig(
          builder=builder, env_id=self.env, num_steps=self.steps, seed=self.seed,
          eval_every=self.eval_every, eval_episodes=self.eval_episodes, logdir=self.logdir,
          checkpoint_every=self.checkpoint_every, keep_checkpoints=self.keep_checkpoints,
          resume=self.resume, num_envs=self.num_envs, learner_device=self.learner_device)
    except ValueError as e:
      raise core.UsageError(str(e)) from None

  def hosts_config(self) -> Optional[hosts.HostsConfig]:
    """(launch "hosts") where the nodes run; None for other launches."""
    if self.launch != "hosts":
      return None
    return hosts.HostsConfig(self.hosts, self.port_base, self.start,
                             self.node_python or sys.executable)

  # -- the command line ------------------------------------------------------------------
  @classmethod
  def from_args(cls, args: Any, environ: Mapping[str, str] = os.environ) -> "RunSpec":
    """The spec of parsed `actorq train` arguments; `args` is not changed.

    With `--resume RUN_DIR`: agent, environment, seed, config and (unless given) steps,
    evaluation period and episodes, actor count and environments per actor come from the
    run's run.json. Then: the train defaults, the launch checks (actor count, hosts),
    the config (defaults <- `--config` file <- `--set` <- `--actor-precision`), the agent,
    the environment and their fit (an environment and the networks are made), a per-layer
    precision against the policy network, and `--num-envs`. Without `--logdir` (and not a
    dry run): `runs/<agent>-<env>-s<seed>[-<launch>]-<time>`.

    Raises:
      core.UsageError: one line naming what is wrong and what is allowed, exactly as
        `actorq train` prints it.
    """
    get = lambda key, default=None: getattr(args, key, default)
    f: Dict[str, Any] = {"agent": get("agent", DEFAULT_AGENT), "env": get("env", DEFAULT_ENV),
                         "seed": get("seed", 0), "logdir": get("logdir"),
                         "steps": get("steps"), "eval_every": get("eval_every"),
                         "eval_episodes": get("eval_episodes"), "num_actors": get("num_actors"),
                         "num_envs": get("num_envs"), "launch": get("launch", LOCAL)}
    resumed = None
    if get("resume"):
      resumed = _resume(args, f)
    for key, default in TRAIN_DEFAULTS.items():
      if f[key] is None:
        f[key] = default
    launch = f["launch"]
    if launch in SINGLE_PROCESS and f["num_actors"] not in (None, 1):
      *others, last = supervisors.launch_types()
      raise core.UsageError(f"--num-actors needs --launch {', '.join(others)} or {last} "
                            f"(--launch {launch} runs one actor)")
    if launch not in SINGLE_PROCESS and f["num_actors"] is None:
      f["num_actors"] = DEFAULT_NUM_ACTORS
    hosts_cfg = _hosts_config(args, launch, f["num_actors"], environ)
    config, policy_file = resolve_config(args, f["agent"], resumed)
    _check_fit(f["agent"], f["env"], f["seed"], config, policy_file)
    num_envs = f["num_envs"] or 1
    # A multi-agent runner steps num_envs envs; a compiled run vmaps them.
    if not multi_agent.is_multi_agent(f["env"]) and launch != ANAKIN:
      try:
        vector_env.check_num_envs(f["env"], num_envs)
      except ValueError as e:
        raise core.UsageError(f"--num-envs: {e}") from None
    if f["logdir"] is None and not get("dry_run", False):
      f["logdir"] = run_dir.default_logdir(f["agent"], f["env"], f"s{f['seed']}",
                                           *(() if launch == LOCAL else (launch,)))
    return cls(
        agent=f["agent"], env=f["env"], seed=f["seed"], config=config_io.to_dict(config),
        steps=f["steps"], eval_every=f["eval_every"], eval_episodes=f["eval_episodes"],
        launch=launch, num_actors=f["num_actors"] if launch not in SINGLE_PROCESS else None,
        num_envs=num_envs,
        hosts=None if hosts_cfg is None else tuple(hosts_cfg.hosts),
        port_base=None if hosts_cfg is None else hosts_cfg.port_base,
        start=None if hosts_cfg is None else hosts_cfg.start,
        logdir=f["logdir"], resume=bool(get("resume")),
        checkpoint_every=get("checkpoint_every", DEFAULT_CHECKPOINT_EVERY),
        keep_checkpoints=get("keep_checkpoints", DEFAULT_KEEP_CHECKPOINTS),
        learner_device=get("learner_device", "auto"),
        host_timeout=get("host_timeout") if launch == "hosts" else None,
        node_python=None if hosts_cfg is None else hosts_cfg.python)

  def to_argv(self) -> List[str]:
    """The `actorq train` arguments (after `train`) that reproduce this spec:
    `RunSpec.from_args(parse(["train", *spec.to_argv()])) == spec` for a spec made by
    `from_args` (a resumed one gives `--resume LOGDIR` and takes its config from there;
    other config fields that differ from the agent's defaults are `--set KEY=JSON`).

    Raises:
      core.UsageError: an unknown agent (its config's defaults are needed).
    """
    argv = ["--agent", self.agent, "--env", self.env, "--seed", str(self.seed),
            "--steps", str(self.steps), "--eval-every", str(self.eval_every),
            "--eval-episodes", str(self.eval_episodes)]
    if self.resume:
      argv += ["--resume", self.logdir]
    else:
      if self.logdir is not None:
        argv += ["--logdir", self.logdir]
      try:
        config_cls, _ = registry.get(self.agent)
      except registry.UnknownAgentError as e:
        raise core.UsageError(str(e)) from None
      defaults = json.loads(json.dumps(config_io.to_dict(config_cls())))
      for key, value in sorted(json.loads(json.dumps(dict(self.config))).items()):
        if key not in defaults or defaults[key] != value:
          argv += ["--set", f"{key}={json.dumps(value, separators=(',', ':'))}"]
    if self.launch not in SINGLE_PROCESS:
      argv += ["--launch", self.launch, "--num-actors", str(self.num_actors)]
    elif self.launch != LOCAL:
      argv += ["--launch", self.launch]
    if self.launch == "hosts":
      argv += ["--hosts", ",".join(self.hosts), "--port-base", str(self.port_base),
               "--start", self.start]
      if self.node_python is not None:
        argv += ["--node-python", self.node_python]
      if self.host_timeout is not None:
        argv += ["--host-timeout", repr(float(self.host_timeout))]
    if self.num_envs > 1:
      argv += ["--num-envs", str(self.num_envs)]
    if self.checkpoint_every != DEFAULT_CHECKPOINT_EVERY:
      argv += ["--checkpoint-every", repr(float(self.checkpoint_every))]
    if self.keep_checkpoints != DEFAULT_KEEP_CHECKPOINTS:
      argv += ["--keep-checkpoints", str(self.keep_checkpoints)]
    if self.learner_device != "auto":
      argv += ["--learner-device", self.learner_device]
    return argv


def load_run(path: str) -> Tuple[RunSpec, Dict[str, Any], str]:
  """`(spec, checkpoint_state, checkpoint_path)` of the newest readable checkpoint of the
  run directory `path` (or its `checkpoints/` folder): what eval, quantize and export
  take. `spec.logdir` is the run directory.

  Raises:
    core.UsageError: not a run directory, an unreadable run.json, no readable checkpoint.
  """
  run_path, _ = run_dir.resolve(path)
  info, state, ckpt_path = run_dir.load(path)
  spec = RunSpec.from_json(info, where=os.path.join(run_path, run_dir.RUN_INFO),
                           logdir=run_path)
  return spec, state, ckpt_path


def make_builder(agent: str, config: Optional[Mapping[str, Any]] = None,
                 overrides: Optional[Mapping[str, Any]] = None):
  """The agent's builder with its config built from `config` (JSON values; missing fields
  take their defaults) <- `overrides`: what `RunSpec.make_builder` and the benchmarks call.

  Raises:
    registry.UnknownAgentError: naming the allowed agents (a ValueError).
    ValueError: unknown config keys (with the allowed ones) or refused values.
  """
  config_cls, builder_cls = registry.get(agent)
  return builder_cls(config_io.from_dict(config_cls, dict(config or {}), overrides or {}))


def _resume(args: Any, f: Dict[str, Any]) -> "RunSpec":
  """`--resume RUN_DIR`: fills `f` from the run's run.json; returns the run's spec.

  Raises:
    core.UsageError: not a run directory, or flags that would change the run.
  """
  if getattr(args, "config", None) or getattr(args, "set", None):
    raise core.UsageError("--resume keeps the run's config from its run.json; "
                         "--config and --set cannot be combined with it")
  if getattr(args, "dry_run", False):
    raise core.UsageError("--dry-run cannot be combined with --resume")
  if getattr(args, "overwrite", False):
    raise core.UsageError("--overwrite starts a new run; --resume continues one: give one "
                          "of them")
  try:
    run_path, ckpt_dir = run_dir.resolve(args.resume)
  except core.UsageError as e:
    raise core.UsageError(str(e).replace("--checkpoint", "--resume", 1)) from None
  saved = RunSpec.load(run_path)
  newest = checkpointing.list_checkpoints(ckpt_dir) if ckpt_dir else []
  done = checkpointing.step_of(newest[-1]) if newest else 0
  if f["steps"] is not None and f["steps"] < done:  # (equal: a run stopped at its end finishes)
    raise core.UsageError(f"--steps {f['steps']}: the run's newest checkpoint is at {done} "
                          f"actor steps and --steps is the run's total; give at least "
                          f"{done}, or leave it out to keep the run's {saved.steps}")
  for flag, key, default in (("--agent", "agent", DEFAULT_AGENT), ("--env", "env", DEFAULT_ENV)):
    given, theirs = f[key], getattr(saved, key)
    if given != default and given != theirs:
      raise core.UsageError(f"{flag} {given} differs from the resumed run's {theirs}")
  if f["logdir"] is not None and os.path.abspath(f["logdir"]) != run_path:
    raise core.UsageError(f"--logdir {f['logdir']} differs from --resume {run_path}")
  f.update(agent=saved.agent, env=saved.env, seed=saved.seed, logdir=run_path)
  for key in list(TRAIN_DEFAULTS) + ["num_actors", "num_envs"]:
    if f[key] is None:
      f[key] = getattr(saved, key)
  return saved


def resolve_config(args: Any, agent: str, resumed: Optional[RunSpec] = None):
  """`(config, policy_file)`: defaults <- `--config` file (or a resumed run's config) <-
  `--set`, checked as given, then `--actor-precision` (a policy file's path is returned
  for the fit check).

  Raises:
    core.UsageError: an unknown agent; unknown keys (named, with the allowed ones), bad
      values (naming the field, the value and what is allowed; a `--set` value is checked
      even when `--actor-precision` replaces it), contradicting fields, unreadable files.
  """
  try:
    config_cls, _ = registry.get(agent)
  except registry.UnknownAgentError as e:
    raise core.UsageError(str(e)) from None
  config_file = getattr(args, "config", None)
  try:
    values = (dict(resumed.config) if resumed is not None else
              config_io.read_file(config_file) if config_file else {})
    overrides = dict(config_io.parse_assignment(a) for a in getattr(args, "set", None) or [])
    config = config_io.from_dict(config_cls, values, overrides)
    precision, policy_file = precision_arg.actor_precision(
        "--actor-precision", getattr(args, "actor_precision", None))
    if precision is not None:
      config = dataclasses.replace(config, actor_precision=precision)
    return config, policy_file
  except ValueError as e:
    where = f"--config {config_file}: " if config_file else ""
    raise core.UsageError(f"{where}{e}") from None


def _check_fit(agent: str, env_id: str, seed: int, config: Any,
               policy_file: Optional[str]) -> None:
  """The environment exists and the agent can act in it (its networks are made for the
  environment's spec); a per-layer precision fits the policy network.

  Raises:
    core.UsageError: naming the environment error, or the agent and environment.
  """
  _, builder_cls = registry.get(agent)
  if isinstance(builder_cls(config), core.MultiAgentBuilder):  # its own environments
    _check_multi_agent_fit(agent, env_id, seed, builder_cls(config))
    return
  if multi_agent.is_multi_agent(env_id):
    allowed = ", ".join(n for n in registry.names()
                        if isinstance(registry.get(n)[1], type)
                        and hasattr(registry.get(n)[1], "make_groups"))
    raise core.UsageError(f"{env_id} is a multi-agent environment and agent {agent!r} is "
                          f"single-agent; multi-agent agents: {allowed}")
  try:
    env = environments.make_environment(env_id, seed=seed)
  except (core.UnknownEnvironmentError, core.UnsupportedEnvironmentError) as e:
    raise core.UsageError(str(e)) from None
  builder = builder_cls(config)
  try:
    env_spec = environments.environment_spec(env)
    networks = builder.make_networks(env_spec)
  except ValueError as e:  # e.g. UnsupportedEnvironmentError: continuous actions for DQN
    raise core.UsageError(f"agent {agent!r} cannot run on {env_id}: {e}") from None
  finally:
    env.close()
  precision = config.actor_precision
  if core.is_mixed(precision):  # a per-layer policy must fit this agent's policy network
    precision_arg.check_policy_file("--actor-precision", precision, policy_file,
                                    builder.make_policy(networks, env_spec).spec)


def _check_multi_agent_fit(agent: str, env_id: str, seed: int, builder: Any) -> None:
  """A multi-agent environment exists and every parameter group's networks can be made
  for it (`core.MultiAgentBuilder`).

  Raises:
    core.UsageError: naming the environment error, or the agent and environment.
  """
  try:
    env = multi_agent.make_multi_agent_environment(env_id, seed=seed)
  except (core.UnknownEnvironmentError, core.UnsupportedEnvironmentError) as e:
    raise core.UsageError(f"agent {agent!r} is multi-agent: {e}") from None
  try:
    for group in builder.make_groups(env):
      builder.group_builder(group).make_networks(group.environment_spec)
  except ValueError as e:
    raise core.UsageError(f"agent {agent!r} cannot run on {env_id}: {e}") from None
  finally:
    env.close()


def _hosts_config(args: Any, launch: str, num_actors: Optional[int],
                  environ: Mapping[str, str]) -> Optional[hosts.HostsConfig]:
  """`--launch hosts`: the hosts (from --hosts, --hosts-file or the SLURM allocation),
  port base, start command and Python; None for other launch types.

  Raises:
    core.UsageError: hosts flags without --launch hosts, no hosts, a bad name or template.
  """
  get = lambda key, default=None: getattr(args, key, default)
  port_base = get("port_base", hosts.DEFAULT_PORT_BASE)
  given = [flag for flag, v in (("--hosts", get("hosts")), ("--hosts-file", get("hosts_file")),
                                ("--start", get("start")), ("--host-timeout", get("host_timeout")))
           if v is not None]
  if launch != "hosts":
    if given or port_base != hosts.DEFAULT_PORT_BASE:
      raise core.UsageError(f"{(given or ['--port-base'])[0]} needs --launch hosts")
    return None
  try:
    if get("hosts_file") is not None:
      names = hosts.read_hosts_file(get("hosts_file"))
    elif get("hosts") not in (None, "slurm"):
      names = hosts.parse_host_list(get("hosts"))
    else:
      names = hosts.slurm_hosts(environ)
      if names is None:
        raise ValueError("--launch hosts needs --hosts H1,H2,..., --hosts-file FILE or a "
                         "SLURM allocation (SLURM_JOB_NODELIST)" + (
                             " (--hosts slurm: SLURM_JOB_NODELIST is not set)"
                             if get("hosts") == "slurm" else ""))
    slurm = get("hosts") in (None, "slurm") and get("hosts_file") is None
    start = get("start") or ("srun" if slurm else "ssh")
    config = hosts.HostsConfig(names, port_base, start,
                               get("node_python") or sys.executable)
    if get("host_timeout") is not None and get("host_timeout") < 3:
      raise ValueError(f"--host-timeout must be >= 3 seconds, got {get('host_timeout'):g}")
    if config.port_base + 3 + num_actors > 65535:
      raise ValueError(f"--port-base {port_base}: the program's "
                       f"{4 + num_actors} ports run past 65535")
    return config
  except ValueError as e:
    raise core.UsageError(str(e)) from None
