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
               [the launch mode's options recorded in run.json, e.g. "hosts": [...],
                "port_base": P, "start": S for launch hosts (`modes.Option.in_run_json`)]
               ["num_envs": B]}}                            (B > 1)

The fields after `launch_options` (logdir, resume, checkpointing, learner device) and the
launch options not recorded in run.json (e.g. the hosts' Python) say how this invocation
runs the run, not what the run is: they are not in run.json, and `to_argv` gives them back
as flags.
"""
from __future__ import annotations

import dataclasses
import json
import os
import warnings
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from actorq import core
from actorq.agents import population
from actorq.components import config_io
from actorq.components.envs import multi_agent, vector_env
from actorq.components import run_dir
from actorq.launch import experiment, modes
from actorq.agents import registry
from actorq.components import checkpointing
from actorq.agents import warm_start
from actorq.quantization import runtimes

DEFAULT_AGENT = "dqn"
DEFAULT_ENV = "gym:CartPole-v1"
# The train settings' defaults; a resumed run takes the missing ones from its run.json.
TRAIN_DEFAULTS = {"steps": 100_000, "eval_every": 5_000, "eval_episodes": 10}
DEFAULT_NUM_ACTORS = 2
DEFAULT_CHECKPOINT_EVERY = 10.0  # minutes
DEFAULT_KEEP_CHECKPOINTS = 3
# `resolve`'s keywords besides the launch modes' options: the flags of `actorq train`.
REQUEST_KEYS = ("agent", "env", "seed", "logdir", "steps", "eval_every", "eval_episodes",
                "num_actors", "num_envs", "launch", "resume", "config", "set",
                "actor_precision", "checkpoint_every", "keep_checkpoints", "learner_device",
                "dry_run", "overwrite", "init_from", "init_keep")
LOCAL = "local"  # the row `modes.MODES["local"]` (read here at import time: modes imports spec)
ANAKIN = "anakin"  # one process, compiled (`launch.anakin`)
# The launches of one process and one actor (no --num-actors): the table's rows that are
# not `distributed` (`modes.MODES`; tests/launch/test_modes checks the two agree).
SINGLE_PROCESS = (LOCAL, ANAKIN)

_REQUIRED = ("agent", "env", "seed", "config")
_TRAIN_KEYS = ("steps", "eval_every", "eval_episodes", "launch", "num_actors", "num_envs")


def _run_json_options(launch: str) -> Tuple[str, ...]:
  """The options of launch mode `launch` that run.json records."""
  return tuple(o.dest for o in modes.mode_for(launch).options if o.in_run_json)


@dataclasses.dataclass(frozen=True)
class RunSpec:
  """What `actorq train` runs, and what eval, quantize, export, sweep and bench rebuild.

  Attributes:
    agent: a name `agents.registry.get` resolves (e.g. "dqn").
    env: environment id (`actorq.components.envs.environments`), e.g. "gym:CartPole-v1".
    seed: integer >= 0; seeds environments, networks, exploration and replay sampling.
    config: the agent's config as JSON values (`config_io.to_dict`; every field for a spec
      made by `from_args`; a loaded run.json's keys that the agent's config does not know
      are dropped, missing ones take the config's defaults in `build`). Read-only.
    steps: actor (environment) steps in total, summed over actors.
    eval_every: actor steps between greedy evaluations.
    eval_episodes: greedy episodes per evaluation.
    launch: a launch mode of `modes.MODES` ("local": one process, "local_mp", ...).
    num_actors: actor nodes of a distributed launch; None for "local".
    num_envs: environments each actor steps at once (B >= 1).
    launch_options: the launch mode's own options (`modes.Option.dest` -> value, as its
      `resolve_options` gives them; e.g. hosts, port_base, start, node_python and
      host_timeout for "hosts"); those with `in_run_json` are in run.json. Read-only.
    logdir: the run directory; None: no files (a dry run). Not in run.json.
    resume: continue from the newest readable checkpoint in `logdir`. Not in run.json.
    checkpoint_every: minutes between checkpoints. Not in run.json.
    keep_checkpoints: the newest checkpoints kept. Not in run.json.
    learner_device: one of `core.LEARNER_DEVICES`. Not in run.json.
    init_from: a warm start (`warm_start.WarmStart`: the origin run, checkpoint, steps,
      checksum and the parts kept); run.json's "init_from". None: none.
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
  launch_options: Mapping[str, Any] = dataclasses.field(default_factory=dict)
  # How this invocation runs it (not in run.json).
  logdir: Optional[str] = None
  resume: bool = False
  checkpoint_every: Optional[float] = DEFAULT_CHECKPOINT_EVERY
  keep_checkpoints: int = DEFAULT_KEEP_CHECKPOINTS
  learner_device: str = "auto"
  init_from: Optional[warm_start.WarmStart] = None
  population: Mapping[str, Any] = dataclasses.field(default_factory=dict)

  @property
  def info_file(self) -> str:
    """The file that describes the run in its directory: run.json, or pbt.json for a
    population (`run_dir.POPULATION`: the kind of directory `actorq pbt` owns)."""
    return run_dir.POPULATION_INFO if self.population else run_dir.RUN_INFO

  @property
  def run_kind(self) -> run_dir.RunKind:
    """The kind of run directory it writes (`run_dir.KINDS`)."""
    return run_dir.POPULATION if self.population else run_dir.TRAIN

  # -- run.json -------------------------------------------------------------------------
  def to_json(self) -> Dict[str, Any]:
    """run.json's contents: agent, env, seed, config and the train settings (see the
    module docstring for which train keys appear when)."""
    train: Dict[str, Any] = {"steps": self.steps, "eval_every": self.eval_every,
                             "eval_episodes": self.eval_episodes}
    if self.num_actors is not None:  # a Launchpad program
      train.update(launch=self.launch, num_actors=self.num_actors)
    elif self.launch != LOCAL:  # another single-process launch (anakin)
      train.update(launch=self.launch)
    for key in _run_json_options(self.launch):
      value = self.launch_options.get(key)
      train[key] = list(value) if isinstance(value, tuple) else value
    if self.num_envs > 1:
      train["num_envs"] = self.num_envs
    info = {"agent": self.agent, "env": self.env, "seed": self.seed,
            "config": json.loads(json.dumps(dict(self.config))), "train": train}
    if self.init_from is not None:
      info["init_from"] = self.init_from.to_json()
    if self.population:
      info["population"] = json.loads(json.dumps(dict(self.population)))
    return info

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
    unknown = [k for k in info if k not in _REQUIRED + ("train", "init_from", "population")]
    train = dict(info.get("train") or {})
    launch = str(train.get("launch", LOCAL))
    try:
      own = _run_json_options(launch)
    except ValueError as e:
      raise core.UsageError(f"{where}: {e}") from None
    unknown += [f"train.{k}" for k in train if k not in _TRAIN_KEYS + own]
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
    options = {k: tuple(train[k]) if isinstance(train.get(k), list) else train.get(k)
               for k in own}
    options.update(runtime.pop("launch_options", None) or {})
    try:
      return cls(agent=str(info["agent"]), env=str(info["env"]), seed=int(info["seed"]),
                 config=config,
                 **{k: int(train.get(k, v)) for k, v in TRAIN_DEFAULTS.items()},
                 launch=launch,
                 num_actors=None if train.get("num_actors") is None else int(train["num_actors"]),
                 num_envs=int(train.get("num_envs", 1)), launch_options=options,
                 init_from=(None if info.get("init_from") is None
                            else warm_start.WarmStart.from_json(info["init_from"])),
                 population=dict(info.get("population") or {}), **runtime)
    except (TypeError, ValueError, KeyError) as e:
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
    """Writes `<run_path>/run.json` (pbt.json for a population: `info_file`; `to_json`, by
    `run_dir.write_info`, the one writer)."""
    run_dir.write_info(run_path, self.to_json(), name=self.info_file)

  @classmethod
  def from_config(cls, config: Any) -> "RunSpec":
    """The spec of a single-process `ExperimentConfig` (what `local.run` writes as run.json,
    as `actorq train` does). The agent is the name under which `agents.registry` has
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
               keep_checkpoints=config.keep_checkpoints, learner_device=config.learner_device,
               init_from=config.init_from)

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
      if self.population:  # N members of the agent as one agent (`agents.population`)
        builder = population.PopulationBuilder(
            builder, population.PopulationConfig.from_json(self.population), seed=self.seed)
      return experiment.ExperimentConfig(
          builder=builder, env_id=self.env, num_steps=self.steps, seed=self.seed,
          eval_every=self.eval_every, eval_episodes=self.eval_episodes, logdir=self.logdir,
          checkpoint_every=self.checkpoint_every, keep_checkpoints=self.keep_checkpoints,
          resume=self.resume, num_envs=self.num_envs, learner_device=self.learner_device,
          init_from=self.init_from)
    except (ValueError, TypeError, KeyError) as e:
      raise core.UsageError(str(e)) from None

  # -- the command line ------------------------------------------------------------------
  @classmethod
  def from_args(cls, args: Any, environ: Mapping[str, str] = os.environ) -> "RunSpec":
    """`resolve` of parsed `actorq train` arguments (the flags' dests are `resolve`'s
    keywords and the launch modes' option dests); `args` is not changed."""
    keys = REQUEST_KEYS + tuple(o.dest for _, o in modes.options())
    return cls.resolve(environ=environ, **{k: getattr(args, k) for k in keys
                                           if getattr(args, k, None) is not None})

  @classmethod
  def resolve(cls, *, agent: str = DEFAULT_AGENT, env: str = DEFAULT_ENV, seed: int = 0,
              logdir: Optional[str] = None, steps: Optional[int] = None,
              eval_every: Optional[int] = None, eval_episodes: Optional[int] = None,
              num_actors: Optional[int] = None, num_envs: Optional[int] = None,
              launch: str = LOCAL, resume: Optional[str] = None, config: Optional[str] = None,
              set: Sequence[str] = (),  # pylint: disable=redefined-builtin
              actor_precision: Optional[str] = None,
              checkpoint_every: Optional[float] = DEFAULT_CHECKPOINT_EVERY,
              keep_checkpoints: int = DEFAULT_KEEP_CHECKPOINTS, learner_device: str = "auto",
              dry_run: bool = False, overwrite: bool = False,
              init_from: Optional[str] = None, init_keep: Optional[str] = None,
              environ: Mapping[str, str] = os.environ, **launch_options: Any) -> "RunSpec":
    """The spec of a run asked for as `actorq train` asks (each keyword is the flag of the
    same name; `config` the `--config` file, `set` the `--set KEY=VALUE`s, `resume` a run
    directory; `launch_options` the launch modes' options by `modes.Option.dest`).

    With `resume`: agent, environment, seed, config and (unless given) steps, evaluation
    period and episodes, actor count and environments per actor come from the run's
    run.json. Then: the train defaults, the launch checks (actor count, the launch mode's
    options: `modes.resolve`), the config (defaults <- `config` file <- `set` <-
    `actor_precision`), the agent, the environment and their fit (an environment and the
    networks are made), a per-layer precision against the policy network, and `num_envs`.
    Without `logdir` (and not `dry_run`): `runs/<agent>-<env>-s<seed>[-<launch>]-<time>`.

    Raises:
      core.UsageError: one line naming what is wrong and what is allowed, exactly as
        `actorq train` prints it.
    """
    f: Dict[str, Any] = {"agent": agent, "env": env, "seed": seed, "logdir": logdir,
                         "steps": steps, "eval_every": eval_every,
                         "eval_episodes": eval_episodes, "num_actors": num_actors,
                         "num_envs": num_envs, "launch": launch}
    resumed = None
    if resume:
      if config or set:
        raise core.UsageError("--resume keeps the run's config from its run.json; "
                              "--config and --set cannot be combined with it")
      if dry_run:
        raise core.UsageError("--dry-run cannot be combined with --resume")
      if init_from is not None:
        raise core.UsageError("--init-from starts a new run from another run's state; "
                              "--resume continues one as itself: give one of them")
      if overwrite:
        raise core.UsageError("--overwrite starts a new run; --resume continues one: give "
                              "one of them")
      resumed = _resume(resume, f)
    for key, default in TRAIN_DEFAULTS.items():
      if f[key] is None:
        f[key] = default
    try:
      mode = modes.mode_for(launch)
    except ValueError as e:
      raise core.UsageError(str(e)) from None
    if not mode.distributed and f["num_actors"] not in (None, 1):
      *others, last = [n for n in modes.names() if modes.mode_for(n).distributed]
      raise core.UsageError(f"--num-actors needs --launch {', '.join(others)} or {last} "
                            f"(--launch {launch} runs one actor)")
    if mode.distributed and f["num_actors"] is None:
      f["num_actors"] = DEFAULT_NUM_ACTORS
    options = modes.resolve(launch, launch_options, f["num_actors"], environ)
    agent_config, policy_file = resolve_config(f["agent"], resumed, config_file=config,
                                               sets=set, actor_precision=actor_precision)
    _check_fit(f["agent"], f["env"], f["seed"], agent_config, policy_file)
    if resumed is not None:
      _check_same_config(resumed, agent_config, actor_precision)
    num_envs = f["num_envs"] or 1
    # A multi-agent runner steps num_envs envs; a compiled run vmaps them.
    if not multi_agent.is_multi_agent(f["env"]) and launch != ANAKIN:
      try:
        vector_env.check_num_envs(f["env"], num_envs)
      except ValueError as e:
        raise core.UsageError(f"--num-envs: {e}") from None
    init_from = (resumed.init_from if resumed is not None else
                 _warm_start(init_from, init_keep, f, agent_config))
    if f["logdir"] is None and not dry_run:
      f["logdir"] = run_dir.default_logdir(f["agent"], f["env"], f"s{f['seed']}",
                                           *(() if launch == LOCAL else (launch,)))
    return cls(
        agent=f["agent"], env=f["env"], seed=f["seed"], config=config_io.to_dict(agent_config),
        steps=f["steps"], eval_every=f["eval_every"], eval_episodes=f["eval_episodes"],
        launch=launch, num_actors=f["num_actors"] if mode.distributed else None,
        num_envs=num_envs, launch_options=options, logdir=f["logdir"], resume=bool(resume),
        checkpoint_every=checkpoint_every, keep_checkpoints=keep_checkpoints,
        learner_device=learner_device, init_from=init_from)

  @property
  def command(self) -> str:
    """The `actorq` sub-command whose arguments `to_argv` gives: "pbt" for a population,
    else "train"."""
    return "pbt" if self.population else "train"

  def to_argv(self) -> List[str]:
    """The `actorq <command>` arguments (after `train`, or `pbt` for a population:
    `command`) that reproduce this spec:
    `RunSpec.from_args(parse(["train", *spec.to_argv()])) == spec` for a spec made by
    `from_args` (a resumed one gives `--resume LOGDIR` and takes its config from there;
    other config fields that differ from the agent's defaults are `--set KEY=JSON`). A
    population spec (`cli.pbt.spec_from_args`) gives `actorq pbt`'s: its section as
    --population, --mutate, --quantile and --resample-probability, `eval_every` as
    --ready-every and every config field as --set (`actorq pbt` keeps only the --set
    ones); resumed, `--resume LOGDIR` alone (pbt.json holds the rest).

    Raises:
      core.UsageError: an unknown agent (its config's defaults are needed).
    """
    pop = population.PopulationConfig.from_json(self.population) if self.population else None
    argv = ["--resume", self.logdir] if self.resume else []
    if not (pop and self.resume):
      argv += ["--agent", self.agent, "--env", self.env, "--seed", str(self.seed),
               "--steps", str(self.steps), "--ready-every" if pop else "--eval-every",
               str(self.eval_every), "--eval-episodes", str(self.eval_episodes)]
    if pop and not self.resume:
      argv += ["--population", str(pop.size)] + (["--mutate", ",".join(pop.mutate)]
                                                 if pop.mutate else [])
      for flag, value, default in (
          ("--quantile", pop.quantile, population.config.DEFAULT_QUANTILE),
          ("--resample-probability", pop.resample_probability,
           population.config.DEFAULT_RESAMPLE_PROBABILITY)):
        argv += [flag, repr(float(value))] if value != default else []
    if not self.resume:
      argv += ["--logdir", self.logdir] if self.logdir is not None else []
      argv += self._set_argv(every_field=bool(pop))
    if self.num_envs > 1 and not (pop and self.resume):
      argv += ["--num-envs", str(self.num_envs)]
    if self.checkpoint_every != DEFAULT_CHECKPOINT_EVERY:
      argv += ["--checkpoint-every", repr(float(self.checkpoint_every))]
    return argv if pop else argv + self._launch_argv()

  def _set_argv(self, every_field: bool) -> List[str]:
    """`--set KEY=JSON` for every config field, or for those that differ from the agent's
    defaults."""
    defaults: Dict[str, Any] = {}
    if not every_field:
      try:
        config_cls, _ = registry.get(self.agent)
      except registry.UnknownAgentError as e:
        raise core.UsageError(str(e)) from None
      defaults = json.loads(json.dumps(config_io.to_dict(config_cls())))
    return [a for key, value in sorted(json.loads(json.dumps(dict(self.config))).items())
            if every_field or key not in defaults or defaults[key] != value
            for a in ("--set", f"{key}={json.dumps(value, separators=(',', ':'))}")]

  def _launch_argv(self) -> List[str]:
    """`actorq train`'s flags beyond the run's description: the warm start, the launch
    mode and its options, and how this invocation checkpoints and places the learner."""
    argv: List[str] = []
    if self.init_from is not None and not self.resume:
      argv += ["--init-from", self.init_from.checkpoint,
               "--init-keep", ",".join(self.init_from.keep)]
    if self.launch != LOCAL:
      argv += ["--launch", self.launch, "--num-actors", str(self.num_actors)]
    for option in modes.mode_for(self.launch).options:
      value = self.launch_options.get(option.dest)
      if value is None or value == option.default:
        continue
      if isinstance(value, (tuple, list)):
        value = ",".join(value)
      elif isinstance(value, float):
        value = repr(value)
      argv += [option.flag, str(value)]
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
  info, state, ckpt_path = registry.restore_run(path)
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


def _resume(run: str, f: Dict[str, Any]) -> "RunSpec":
  """`--resume RUN_DIR`: fills `f` from the run's run.json; returns the run's spec.

  Raises:
    core.UsageError: not a run directory, or flags that would change the run.
  """
  try:
    run_path, ckpt_dir = run_dir.resolve(run)
  except core.UsageError as e:
    raise core.UsageError(str(e).replace("--checkpoint", "--resume", 1)) from None
  saved = RunSpec.load(run_path, logdir=run_path)
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


def _check_same_config(resumed: RunSpec, config: Any, actor_precision: Optional[str]) -> None:
  """A resumed run keeps its config (case B13): `--actor-precision` other than the run's
  is refused (its checkpoints, eval.csv and run.json describe actors of one precision).

  Raises:
    core.UsageError: naming the flag, both values and what to do instead.
  """
  theirs = config_io.to_dict(config_io.from_dict(type(config), dict(resumed.config), {}))
  ours = config_io.to_dict(config)
  changed = sorted(k for k in ours if json.dumps(ours[k]) != json.dumps(theirs.get(k)))
  if not changed:
    return
  if changed == ["actor_precision"]:
    raise core.UsageError(
        f"--actor-precision {actor_precision} differs from the resumed run's "
        f"{theirs['actor_precision']} (its run.json); a run keeps its actors' precision: "
        f"evaluate it at another with 'actorq eval --checkpoint {resumed.logdir} --precision "
        "P', or start a new run")
  raise core.UsageError(f"--resume keeps the run's config; it would change "
                        f"{', '.join(changed)}")


def recorded_changes(saved: RunSpec, spec: RunSpec) -> List[str]:
  """The train settings (steps, evaluation period and episodes, launch, actors,
  environments per actor, hosts) in which a resumed `spec` differs from the run's
  run.json `saved`, as `key old -> new` texts; [] when none. `actorq train --resume`
  writes them into run.json before it continues, so that a later plain `--resume` (and
  eval, sweep, ...) reads what the run now is (case B13)."""
  old, new = saved.to_json()["train"], spec.to_json()["train"]
  return [f"{k} {old.get(k)} -> {new.get(k)}" for k in sorted(set(old) | set(new))
          if old.get(k) != new.get(k)]


def resolve_config(agent: str, resumed: Optional[RunSpec] = None, *,
                   config_file: Optional[str] = None, sets: Sequence[str] = (),
                   actor_precision: Optional[str] = None):
  """`(config, policy_file)`: defaults <- `config_file` (or a resumed run's config) <-
  `sets` (``KEY=VALUE``), checked as given, then `actor_precision` (a policy file's path is
  returned for the fit check).

  Raises:
    core.UsageError: an unknown agent; unknown keys (named, with the allowed ones), bad
      values (naming the field, the value and what is allowed; a `--set` value is checked
      even when `--actor-precision` replaces it), contradicting fields, unreadable files.
  """
  try:
    config_cls, _ = registry.get(agent)
  except registry.UnknownAgentError as e:
    raise core.UsageError(str(e)) from None
  try:
    precision, policy_file = runtimes.parse_precision(actor_precision, "--actor-precision")
  except ValueError as e:
    raise core.UsageError(str(e)) from None
  try:
    values = (dict(resumed.config) if resumed is not None else
              config_io.read_file(config_file) if config_file else {})
    overrides = dict(config_io.parse_assignment(a) for a in sets or [])
    config = config_io.from_dict(config_cls, values, overrides)
    if precision is not None:
      config = dataclasses.replace(config, actor_precision=precision)
    return config, policy_file
  except ValueError as e:
    where = f"--config {config_file}: " if config_file else ""
    raise core.UsageError(f"{where}{e}") from None


def _warm_start(init_from: Optional[str], init_keep: Optional[str], f: Dict[str, Any],
                config: Any) -> Optional[warm_start.WarmStart]:
  """`--init-from RUN [--init-keep PARTS]` checked against this run (`warm_start.resolve`);
  None without `init_from`.

  Raises:
    core.UsageError: `--init-keep` without `--init-from`, or `resolve`'s one line.
  """
  if init_from is None:
    if init_keep is not None:
      raise core.UsageError("--init-keep needs --init-from RUN (the run whose state it keeps)")
    return None
  return warm_start.resolve(init_from, init_keep, agent=f["agent"], env_id=f["env"],
                            seed=f["seed"], config=config, launch=f["launch"])


def _check_fit(agent: str, env_id: str, seed: int, config: Any,
               policy_file: Optional[str]) -> None:
  """The environment exists and the agent can act in it (an environment of its family,
  `experiment.environments_of`, is made and the agent's networks and policies for it); a
  per-layer precision fits the policy network.

  Raises:
    core.UsageError: naming the environment error, or the agent and environment.
  """
  _, builder_cls = registry.get(agent)
  builder = builder_cls(config)
  multi = isinstance(builder, core.MultiAgentBuilder)
  if multi_agent.is_multi_agent(env_id) and not multi:
    allowed = ", ".join(n for n in registry.names()
                        if isinstance(registry.get(n)[1], type)
                        and hasattr(registry.get(n)[1], "make_groups"))
    raise core.UsageError(f"{env_id} is a multi-agent environment and agent {agent!r} is "
                          f"single-agent; multi-agent agents: {allowed}")
  run = experiment.ExperimentConfig(builder, env_id, seed=seed)
  family = experiment.environments_of(run)
  try:
    env = family.make(run, seed)
  except (core.UsageError, core.UnknownEnvironmentError,
          core.UnsupportedEnvironmentError) as e:
    raise core.UsageError(f"agent {agent!r} is multi-agent: {e}" if multi else str(e)) from None
  try:
    parts = experiment.parts_for(run, env)
  except (ValueError, core.UsageError) as e:  # e.g. continuous actions for DQN
    raise core.UsageError(f"agent {agent!r} cannot run on {env_id}: {e}") from None
  finally:
    family.close(env)
  precision = config.actor_precision
  if runtimes.family_of(precision) is not None:  # a per-layer policy must fit the network
    try:
      runtimes.check_fits(precision, parts.policy.spec, policy_file, "--actor-precision")
    except ValueError as e:
      raise core.UsageError(str(e)) from None
