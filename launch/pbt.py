"""Population-based training through the one engine (issue 43; issue 52: a population is a
builder). `actorq pbt` describes the run as a `RunSpec` whose `population` holds the
population's own settings (`agents.population.PopulationConfig`); `spec.build()` makes its
builder an `agents.population.PopulationBuilder` around the agent's, and `launch.run(spec)`
runs it with its launch mode:

  * `local` (`train`): learner (N members in one vmapped update, PBT's exploit/explore)
    and actor stepped in one process by `agents.population.PopulationRun`, a function of the spec: the actor
    steps N x B environments, each member's adder writes its own seeded in-process replay,
    and after each vector step the learner takes the rounds the members owe
    (`builder.learner_steps_owed`, as `local.run` asks). When members are evaluated and
    exploit/explore runs is `agents.population.rounds.ReadyRounds`; a member is evaluated
    greedily (`eval_episodes` at its actor precision, the same start states every time).
  * `local_mt`, `local_mp` (`_run_program`): the Launchpad program every agent runs as
    (`distributed.make_program`), its nodes running the builder through the population's
    environment family (`agents.population.program`); `num_steps` and `eval_every` are
    summed over the members.

    spec = pbt.population_spec("dqn", "gym:CartPole-v1", population=4, steps=5000,
                               ready_every=1000, mutate=("learning_rate",), logdir="runs/pbt")
    result = pbt.run(spec)               # launch.run(spec) -> a `PBTResult`

Files in `logdir` (nothing is written before the spec is checked):
    pbt.json         the run's spec (`RunSpec.to_json`, its "population" section included;
                     `actorq pbt --resume DIR` reads it)
    pbt.csv          one row per member per evaluation, in the order they happened:
                     member, actor_steps, learner_steps, episode_return (the evaluation's
                     mean), the member's mutable values during that interval, precision,
                     copied_from (the member it copied right after, or empty); in one
                     process a function of the spec alone (no timings)
    pbt_member<m>.csv and tensorboard/pbt_member<m>/   per member: the same scalars and
                     actor_us_per_step, the measured wall-clock microseconds of its acting
                     (inference) per actor step over the interval (its share of the batched
                     call for fp32 members)
    lineage.png      each member's return over its actor steps, copies marked (`actorq pbt`)
    population/      checkpoints of the whole population (`checkpoint_every` minutes, at the
                     end, and at Ctrl-C / SIGTERM; a program's: checkpoints/, as a train run's)
    best/            a run directory of the member with the best final evaluation:
                     run.json (its config, actor_precision included) and
                     checkpoints/ckpt-<steps>.pkl (its policy parameters and learner state),
                     which `actorq eval`, `export` and `quantize` read as a train run's

In one process a run is a function of its spec (seed included) on one machine; a resumed
run continues from its checkpoint with new episodes (as `local.run`).
"""
from __future__ import annotations

import csv
import dataclasses
import json
import os
import time
from typing import Any, Callable, Dict, List, Optional, Sequence

import jax

from actorq import core
from actorq import launch
from actorq.agents import population as population_agent
from actorq.components import atomic, config_io, fault_points
from actorq.components import population as population_lib
from actorq.components.envs import environments, vector_env
from actorq.components import checkpointing, stops
from actorq.components.envs import seeding
from actorq.launch import experiment as experiment_lib
from actorq.components import loggers as logging_lib
from actorq.components import processes
from actorq.agents import registry
from actorq.components import run_dir
from actorq.launch import spec as spec_lib

PBT_CSV = "pbt.csv"
PBT_JSON = run_dir.POPULATION_INFO
BEST_DIR = "best"
POPULATION_DIR = "population"
LINEAGE_PNG = "lineage.png"
assert {PBT_JSON, BEST_DIR, POPULATION_DIR, LINEAGE_PNG} <= set(run_dir.POPULATION_ENTRIES)
DEFAULT_CHECKPOINT_EVERY = 10.0  # minutes, as `actorq train`
DEFAULT_EVAL_EPISODES = 5
PRECISION_FIELD = population_agent.learning.PRECISION_FIELD
FULL_PRECISION = population_agent.learning.FULL_PRECISION


def population_spec(agent: str, env_id: str, population: int, steps: int, ready_every: int,
                    mutate: Sequence[str] = (), seed: int = 0, num_envs: int = 1,
                    eval_episodes: int = DEFAULT_EVAL_EPISODES,
                    quantile: float = population_agent.config.DEFAULT_QUANTILE,
                    resample_probability: float =
                    population_agent.config.DEFAULT_RESAMPLE_PROBABILITY,
                    config: Optional[Dict[str, Any]] = None,
                    logdir: Optional[str] = None, **runtime: Any) -> spec_lib.RunSpec:
  """The `RunSpec` of a population run (not yet checked: `check`).

  Args:
    agent: a registered agent name with population support
      (`agents.population.supported_agents`).
    env_id: environment id with a vector backend (`vector_env.vector_backend`).
    population: members N >= 2.
    steps: actor steps of EACH member (its own transitions), >= 1.
    ready_every: actor steps of a member between its evaluations and exploit/explore, in
      [1, steps] (the spec's `eval_every`).
    mutate: config fields explore changes (the population learner's HYPERPARAMETERS);
      empty: exploit only.
    seed: seeds environments, networks, exploration, replay sampling and PBT's draws.
    num_envs: environments per member (B >= 1): the actors step N x B at once.
    eval_episodes: greedy episodes per evaluation (the fitness is their mean return).
    quantile: fraction of the population in the top and in the bottom, in (0, 0.5].
    resample_probability: chance that explore resamples a field instead of perturbing it.
    config: the agent's config fields (JSON values) shared by the members at the start.
    logdir: the run directory; None: no files.
    runtime: further `RunSpec` fields (resume, checkpoint_every).
  """
  return spec_lib.RunSpec(
      agent=agent, env=env_id, seed=seed, config=dict(config or {}), steps=steps,
      eval_every=ready_every, eval_episodes=eval_episodes, num_envs=num_envs, logdir=logdir,
      population={"size": population, "mutate": list(mutate), "quantile": quantile,
                  "resample_probability": resample_probability}, **runtime)


def check(spec: spec_lib.RunSpec) -> population_agent.PopulationBuilder:
  """Validates a population `spec` without writing anything; returns its builder.

  Raises:
    core.UsageError: one line naming what is wrong and what is allowed: population < 2,
      ready_every outside [1, steps], an unknown or non-mutable mutate field, an agent
      without population support, an environment without a vector backend or that the
      agent cannot act in, a bad config value, quantile or resample probability.
  """
  s, p = spec, spec.population
  allowed = ", ".join(population_agent.supported_agents())
  try:
    config_cls, builder_cls = registry.get(s.agent)
  except ValueError as e:  # registry.UnknownAgentError
    raise core.UsageError(f"--agent: {e}") from None
  cls = population_agent.learner_class(builder_cls)
  if cls is None:
    raise core.UsageError(f"--agent {s.agent} has no population support (no jitted population "
                          f"learner); agents with it: {allowed}")
  try:
    core.check_seed(s.seed, "--seed")
  except ValueError as e:
    raise core.UsageError(str(e)) from None
  size, mutate = p["size"], tuple(p.get("mutate", ()))
  if size < 2:
    raise core.UsageError(f"--population {size}: a population needs at least 2 "
                          "members (allowed: an integer >= 2)")
  ready_every = s.eval_every
  if s.steps < 1 or not 1 <= ready_every <= s.steps:
    raise core.UsageError(f"--ready-every {ready_every} is above --steps {s.steps}: each "
                          f"member must be ready at least once (allowed: 1 to {s.steps})"
                          if ready_every > s.steps else
                          f"--ready-every {ready_every} and --steps {s.steps} must be >= 1")
  fields = {f.name for f in dataclasses.fields(config_cls)}
  mutable = list(cls.HYPERPARAMETERS)
  for name in mutate:
    if name in cls.HYPERPARAMETERS:
      continue
    what = ("a fixed field of " + s.agent + " (the members share it)" if name in fields
            else "not a field of " + s.agent + "'s config")
    raise core.UsageError(f"--mutate {name}: {what}; mutable fields: {', '.join(mutable)}")
  rows = {"--population x --num-envs": (size * s.num_envs,
                                        seeding.EVAL_SEED_OFFSET -
                                        seeding.EVAL_SEED_ROWS),
          "--population x --eval-episodes": (size * s.eval_episodes,
                                             seeding.EVAL_SEED_ROWS)}
  for what, (value, most) in rows.items():  # (training and evaluation seeds apart, B14)
    if value > most:
      raise core.UsageError(f"{what} is {value}: at most {most} environments")
  try:
    population_agent.PopulationConfig.from_json(p)
  except (ValueError, TypeError, KeyError) as e:
    raise core.UsageError(str(e)) from None
  try:
    backend = vector_env.vector_backend(s.env)
  except (core.UnknownEnvironmentError, ValueError) as e:
    raise core.UsageError(f"--env: {e}") from None
  if backend is None:
    raise core.UsageError(f"--env {s.env} has no vector backend: a population steps its "
                          "N x B environments as one vector environment (gym: and dmc: ids "
                          "have one)")
  try:
    builder = spec_lib.make_builder(s.agent, s.config)
  except ValueError as e:
    raise core.UsageError(str(e)) from None
  try:
    env = environments.make_environment(s.env, seed=s.seed)
  except (core.UnsupportedEnvironmentError, core.UnknownEnvironmentError) as e:
    raise core.UsageError(f"--env: {e}") from None
  try:
    builder.make_networks(environments.environment_spec(env))
  except (core.UnsupportedEnvironmentError, core.UnknownEnvironmentError) as e:
    raise core.UsageError(f"--agent {s.agent} --env {s.env}: {e}") from None
  finally:
    env.close()
  return population_agent.PopulationBuilder(builder,
                                            population_agent.PopulationConfig.from_json(p))


@dataclasses.dataclass
class PBTResult:
  """What a population run ends with.

  rows: pbt.csv's rows (dicts); final_returns: float [N] each member's last evaluation;
  best_member: argmax of final_returns (lowest index on ties); best_dir: its run
  directory (None without a logdir); wall_seconds; learner_rounds: vmapped updates taken
  (this session); timings: this session's wall-clock seconds by part (act, environment,
  learn, evaluate; see `agents.population.PopulationRun.timings`); params_checksum: `checkpointing.params_checksum`
  of every member's final policy parameters (leaves [N, ...]).
  """
  rows: List[Dict[str, Any]]
  final_returns: List[float]
  best_member: int
  best_dir: Optional[str]
  wall_seconds: float
  learner_rounds: int
  timings: Dict[str, float] = dataclasses.field(default_factory=dict)
  params_checksum: str = ""


def _write_csv(path: str, rows: List[Dict[str, Any]]) -> None:
  """pbt.csv, written whole (`atomic.atomic_write`): a reader never sees half a row."""
  if not rows:
    return
  with atomic.atomic_write(path, newline="") as f:
    writer = csv.DictWriter(f, fieldnames=list(rows[0]))
    writer.writeheader()
    for row in rows:
      writer.writerow({k: (repr(v) if isinstance(v, float) else v) for k, v in row.items()})


def load_settings(logdir: str) -> spec_lib.RunSpec:
  """The spec of the population run in `logdir` (its pbt.json), for `--resume`.

  Raises:
    core.UsageError: no readable pbt.json there (naming the path).
  """
  path = os.path.join(logdir, PBT_JSON)
  if run_dir.kind_of(logdir) is run_dir.TRAIN:
    raise core.UsageError(f"--resume {logdir} is a run of 'actorq train', not a population "
                          f"run; continue it with 'actorq train --resume {logdir}'")
  try:
    with open(path, encoding="utf-8") as f:
      info = json.load(f)
    if "env_id" in info:  # a pbt.json written before issue 52 (the settings' fields)
      info = population_spec(
          info["agent"], info["env_id"], info["population"], info["steps"],
          info["ready_every"], info["mutate"], info["seed"], info["num_envs"],
          info["eval_episodes"], info["quantile"], info["resample_probability"],
          info["config"]).to_json()
    if not info.get("population"):
      raise KeyError("population")
    return spec_lib.RunSpec.from_json(info, where=path, logdir=logdir)
  except (OSError, ValueError, TypeError, KeyError, core.UsageError) as e:
    raise core.UsageError(f"--resume {logdir}: not a population run of 'actorq pbt' (cannot "
                          f"read {path}: {e})") from None


def _results(s: spec_lib.RunSpec, learner, rows, final, actor_steps, start) -> PBTResult:
  """The run's `PBTResult` and, with a logdir, pbt.csv and best/: the best final member
  (`actor_steps` [N]) as a train run's directory (see the module docstring)."""
  best, best_dir = population_lib.ranking(final)[0], None
  if s.logdir is not None:
    _write_csv(os.path.join(s.logdir, PBT_CSV), rows)
    best_dir, steps = os.path.join(s.logdir, BEST_DIR), int(actor_steps[best])
    spec_lib.RunSpec(agent=s.agent, env=s.env, seed=s.seed,
                     config=config_io.to_dict(learner.member_config(best)), steps=s.steps,
                     eval_every=s.eval_every, eval_episodes=s.eval_episodes).save(best_dir)
    checkpointing.save(os.path.join(best_dir, run_dir.CHECKPOINTS), {
        **learner.member_checkpoint(best), "actor_steps": steps, "env_id": s.env,
        "seed": s.seed, "num_steps": s.steps, "population_member": best}, step=steps, keep=1)
  return PBTResult(rows=rows, final_returns=final, best_member=best, best_dir=best_dir,
                   wall_seconds=time.time() - start, learner_rounds=learner.rounds,
                   params_checksum=checkpointing.params_checksum(learner.policy_params()))


def train(spec: spec_lib.RunSpec, config: experiment_lib.ExperimentConfig,
          report: Any = None,
          on_start: Optional[Callable[[spec_lib.RunSpec], None]] = None) -> PBTResult:
  """Trains the population `config.builder` (a `PopulationBuilder`) described by `spec`
  in this process (see the module docstring); the engine has claimed `spec.logdir` and
  written pbt.json (`launch.run`). `on_start(spec)` once the checkpoint to resume (if
  any) is found, before any member acts (the CLI's start line).

  Raises:
    core.UsageError: `spec.resume` and no checkpoint (nothing written).
    core.EnvironmentFailure: an environment raised; core.NonFiniteLossError: a member's
      loss was not finite. Both after a checkpoint of the population's last whole state
      (with a logdir; `checkpoint_path` on the exception, else None).
    KeyboardInterrupt / stops.Preempted: Ctrl-C / SIGTERM, after a checkpoint (with
      a logdir) at the vector step where the signal arrived (`checkpoint_path` on the
      exception; None when it came before the loop).
  """
  del report
  start = time.time()
  s = spec
  ckpt_dir = os.path.join(s.logdir, POPULATION_DIR) if s.logdir is not None else None
  saved = None
  if s.resume:  # (with a logdir: `ExperimentConfig` refuses a resume without)
    _, saved = checkpointing.restore_latest(ckpt_dir)
    if saved is None:
      raise core.UsageError(f"--resume {s.logdir}: no readable population checkpoint in "
                            f"{ckpt_dir}, nothing to resume; start it again with its flags "
                            f"and --overwrite (--logdir {s.logdir})")
  if on_start is not None:
    on_start(s)
  fault_points.point("startup")  # a test's signal lands after the first write (case B18)
  pbt_run = population_agent.PopulationRun(s, config.builder)
  if saved is not None:
    pbt_run.restore(saved)
  loggers: Dict[str, Any] = {}
  last_checkpoint = [time.time()]
  checkpoint_every = s.checkpoint_every

  def save_checkpoint() -> str:
    path = checkpointing.save(ckpt_dir, pbt_run.checkpoint(),
                              step=int(pbt_run.actor_steps.sum()), keep=2)
    last_checkpoint[0] = time.time()
    return path

  def on_ready():
    if s.logdir is None:
      return
    _write_csv(os.path.join(s.logdir, PBT_CSV), pbt_run.rows)
    if checkpoint_every and time.time() - last_checkpoint[0] >= 60.0 * checkpoint_every:
      save_checkpoint()

  factory = logging_lib.make_logger_factory(s.logdir) if s.logdir is not None else None

  def member_logger(label):  # one logger per member, made at its first row
    return loggers[label] if label in loggers else loggers.setdefault(label, factory(label))
  logger_fn = member_logger if factory is not None else None
  try:
    with processes.Signals() as stop:
      try:
        finished = pbt_run.run(logger_fn, on_ready, lambda: stop.received is not None)
      except core.RunFailure as e:  # the population's state is whole: keep it (as train)
        e.checkpoint_path = save_checkpoint() if ckpt_dir is not None else None
        raise
      if not finished:
        raise stops.stopped_by(stop.received,
                               save_checkpoint() if ckpt_dir is not None else None)
  finally:
    for logger in loggers.values():
      logger.close()
  if s.logdir is not None:
    save_checkpoint()
  result = _results(s, pbt_run.learner, pbt_run.rows, pbt_run.rounds.final_returns(),
                    pbt_run.actor_steps, start)
  result.timings = dict(pbt_run.timings, **pbt_run.learner.timings)
  return result


def run(spec: spec_lib.RunSpec, *, overwrite: bool = False,
        report: Any = None,
        on_start: Optional[Callable[[spec_lib.RunSpec], None]] = None) -> PBTResult:
  """Checks the population `spec` (`check`) and launches it through `launch.run(spec)`;
  returns its `PBTResult`.

  Args:
    spec: the run (`population_spec`; a resumed one: `load_settings(logdir)` with
      resume=True).
    overwrite: the logdir may hold an earlier population run; its files
      (`run_dir.POPULATION_ENTRIES`, `*.csv`) are removed first (`run_dir.claim_logdir`).
    report: told what happens (`modes.Report`).
    on_start: see `train`.

  Raises:
    core.UsageError: `check` refuses the spec, the logdir holds a run (of `actorq train`,
      or a population run without `overwrite`), or `resume` and no checkpoint (nothing
      written). The run's own failures and stops: see `train`.
  """
  check(spec)
  if spec.launch == spec_lib.LOCAL:
    return launch.run(spec, report=report, overwrite=overwrite, on_start=on_start).result
  return _run_program(spec, overwrite, report, on_start)


def _run_program(spec, overwrite, report, on_start) -> PBTResult:
  """The population as a Launchpad program (`agents.population.program`): the engine's
  `launch.run` with the steps summed over the N members; then pbt.csv and best/ from the
  program's final checkpoint (its learner's ready rounds and members)."""
  start, n = time.time(), spec.population["size"]
  config = dataclasses.replace(spec.build(), num_steps=n * spec.steps,
                               eval_every=n * spec.eval_every)
  if on_start is not None:
    on_start(spec)
  result = launch.run(spec, config=config, report=report, overwrite=overwrite).result
  if result.exit_code != 0:
    if result.reason == "signal":  # (a signal's exit code, as `actorq train`'s)
      raise stops.stopped_by(result.exit_code - 128, result.checkpoint)
    failure = core.RunFailure(f"--launch {spec.launch}: {result.detail}")
    failure.checkpoint_path = result.checkpoint
    raise failure
  _, saved = checkpointing.restore_latest(config.checkpoint_dir, checkpointing.validate_run)
  parts = experiment_lib.parts_of(config)
  learner = config.builder.make_learner(jax.random.PRNGKey(spec.seed), parts.networks,
                                        iter(()), None, parts.environment_spec)
  learner.restore(saved["learner"])
  return _results(spec, learner, learner.ready.rows, learner.ready.final_returns(),
                  [int(saved["actor_steps"]) // n] * n, start)
