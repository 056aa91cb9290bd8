"""Single-process training: an in-process replay, one actor and the learner, interleaved
in one readable loop (`actorq.components.acting.loop.ActorLoop` with hooks). Deterministic: the
same config (seed included) on the same machine gives the same run, step for step.

    result = local.run(ExperimentConfig(builder, "gym:CartPole-v1", num_steps=100_000))

After every actor step the loop asks the builder how many learner steps are owed
(`learner_steps_owed(ReplayProgress)`) and runs them, so the tables need no blocking rate
limiter in this mode and nothing can deadlock.

Why a run is a function of its seed: the replay is `components.local_replay`'s seeded
in-process client, built from the builder's own `reverb.Table`s (its samples come from
one generator on this thread, with no prefetch: Reverb's samplers cannot be seeded and
its datasets prefetch on other threads); the actor pulls the policy from an in-process
`PolicyServer`, synchronously at fixed actor steps (`VariableClient`); environments,
network initialisation, exploration and replay sampling are seeded from
`ExperimentConfig.seed`; nothing depends on wall-clock time (checkpoints are written
every `checkpoint_every` minutes but change no state). Distributed runs stay on Reverb
and asynchronous (`launch/distributed.py`).

Checkpoints (`<logdir>/checkpoints`, see `actorq.components.checkpointing`) are written
every `checkpoint_every` minutes, at the end, and when the run is interrupted with
Ctrl-C; each holds the learner's state (params, target params, optimizer state, step
counter), the counters (actor steps, episodes, learner steps, the acme counter), the
actor's step count (drives epsilon) and selector RNG, when learning started, the items
the adder had written, and the replay (items, priorities, sampling RNG). `resume=True`
continues from the newest readable one; what is not restored: the episode in progress (the resumed run starts a new
episode; up to n-1 pending n-step transitions of it are lost) and the environments'
internal state.
"""
from __future__ import annotations

import dataclasses
import time
from typing import Any, Callable, Dict, List, Optional

import jax
from acme.utils import counting

from actorq import core
from actorq.components import fault_points
from actorq.components.acting import actors
from actorq.components.acting import loop as loop_lib
from actorq.components.envs import seeding
from actorq.components.replay import local_replay
from actorq.components.replay import reverb_replay as replay_lib
from actorq.components import checkpointing
from actorq.launch import engine
from actorq.launch import experiment as experiment_lib
from actorq.components import loggers as logging_lib
from actorq.components import placement, stops
from actorq.launch import spec as spec_lib


@dataclasses.dataclass
class RunResult:
  """What a run ends with. Returns are undiscounted episode returns."""
  final_eval_return: float
  best_eval_return: float
  best_eval_step: int
  actor_steps: int
  learner_steps: int
  episodes: int
  wall_seconds: float
  evaluations: List[Dict[str, Any]]
  resumed_from: Optional[str] = None  # the checkpoint a resumed run started from
  resumed_actor_steps: int = 0  # its actor steps (0: a fresh run)
  params_checksum: str = ""  # `params_checksum` of the learner's final policy parameters
  learner_device: str = ""  # the jax device the learner computed on, e.g. "cpu:0", "gpu:0"


def _table_size(client, table: str) -> int:
  return int(client.server_info()[table].current_size)


@dataclasses.dataclass
class _Part:
  """One learner part (the agent's learner, or one parameter group's: `experiment.split`)
  and its learning schedule: started, the part's steps when it started, the items its
  adder wrote in a resumed run's earlier sessions."""
  name: str
  builder: Any
  learner: Any
  adder: Any
  actor: Any
  index: int  # its group's index in the multi-agent loop's `group_steps`; -1: `loop.steps`
  started: bool = False
  start_step: int = 0
  items_before: int = 0

  def steps(self, loop) -> int:
    return loop.steps if self.index < 0 else loop.group_steps[self.index]

  @property
  def items_written(self) -> int:
    return self.items_before + int(self.adder.items_written)

  def schedule(self, loop) -> Dict[str, Any]:
    """What a run checkpoint keeps of the part beside its learner (`experiment.
    checkpoint_state`'s `groups`): its actor's step count and selector RNG, the items it
    wrote, its learning start and, for a parameter group, its agent steps."""
    state = {"actor_num_steps": int(self.actor.num_steps), "actor_rng": self.actor.rng_state,
             "items_written": self.items_written}
    if self.index < 0:
      return {**state, "learning_started": self.started, "learning_start_step": self.start_step}
    return {**state, "learning_start": self.start_step if self.started else None,
            "group_steps": int(loop.group_steps[self.index])}


class _Learning(loop_lib.Hook):
  """Starts each part's learning once its table holds its builder's `min_replay_size()`
  items, then runs the learner steps its builder says are owed after each actor step (a
  parameter group counts its own agents' steps)."""

  def __init__(self, parts: List[_Part], client, on_learner_step=None):
    self.parts, self._client = parts, client
    self._on_learner_step = on_learner_step

  def on_step(self, loop, action, timestep):
    for p in self.parts:
      steps = p.steps(loop)
      if not p.started:
        minimum = int(p.builder.min_replay_size())
        if minimum and (steps < minimum or _table_size(
            self._client, p.builder.replay_table_name()) < minimum):
          continue
        p.started, p.start_step = True, (steps - 1 if minimum or p.index < 0 else 0)
      owed = p.builder.learner_steps_owed(core.ReplayProgress(steps - p.start_step,
                                                              p.items_written))
      while p.learner.step_count < owed:
        p.learner.step()
        if self._on_learner_step is not None:
          self._on_learner_step(p.learner)


def run(config: experiment_lib.ExperimentConfig, *,
        progress: Optional[Callable[[Dict[str, Any]], None]] = None,
        on_learner_step: Optional[Callable[[Any], None]] = None) -> RunResult:
  """`train(config)` launched as `actorq train --launch local` launches it
  (`launch.run(RunSpec.from_config(config), config=config)`): with a `config.logdir` and
  not `config.resume`, `<logdir>/run.json` is written first, so `actorq eval`, `quantize`,
  `export` and `train --resume` take the run directory as they take a CLI run's. Arguments,
  result and errors are `train`'s."""
  return engine.run(spec_lib.RunSpec.from_config(config), config=config, claim=False,
                    progress=progress, on_learner_step=on_learner_step).result


def train(config: experiment_lib.ExperimentConfig, *,
          progress: Optional[Callable[[Dict[str, Any]], None]] = None,
          on_learner_step: Optional[Callable[[Any], None]] = None) -> RunResult:
  """Trains `config.builder`'s agent for `config.num_steps` actor steps in this process.

  The learner computes on `placement.learner_device(config.learner_device)` (the run
  executes inside `jax.default_device` of it); the actor's and the evaluator's policy
  runtimes compute on the CPU (`actorq.components.placement`).

  Args:
    config: the experiment (see `ExperimentConfig`).
    progress: called after every actor step with a dict of counters.
    on_learner_step: called with the learner after each of its steps (tests).

  Raises:
    checkpointing.CheckpointError: `config.resume` and no readable checkpoint.
    experiment.RunError: a non-finite reward, observation or policy output stopped the
      run (after a checkpoint of the last good state, with a logdir).
    stops.Preempted: SIGTERM (after a checkpoint), like KeyboardInterrupt for Ctrl-C.
      Either carries `checkpoint_path`: the checkpoint written at the stop (a second
      signal meanwhile is ignored, so it is whole), or None when none was written (no
      logdir, or the stop came before the loop started; the newest earlier one, if any,
      is what `--resume` continues from).
    placement.NoAcceleratorError: `config.learner_device` is "gpu" and jax sees no GPU.
  """
  device = placement.learner_device(config.learner_device)
  with jax.default_device(device):
    result = _run(config, progress, on_learner_step)
  result.learner_device = placement.device_name(device)
  return result


def _run(config: experiment_lib.ExperimentConfig,
         progress: Optional[Callable[[Dict[str, Any]], None]],
         on_learner_step: Optional[Callable[[Any], None]]) -> RunResult:
  start_time = time.time()
  family = experiment_lib.environments_of(config)
  resumed_from, restored = experiment_lib.restored_checkpoint(config)
  multi_agent = config.multi_agent
  if restored is not None and multi_agent != bool(restored.get("multi_agent")):
    raise checkpointing.CheckpointError(
        f"{resumed_from} is {'not ' if multi_agent else ''}a multi-agent checkpoint")
  if restored is not None and restored.get("replay_state") is None:
    raise checkpointing.CheckpointError(
        f"{resumed_from} holds no in-process replay (a Reverb-era or distributed "
        "checkpoint): a single-process run resumes only from its own checkpoints")
  logger_fn = logging_lib.make_logger_factory(config.logdir)
  # A resumed run's training environment continues with a different seed (its
  # internal state is not checkpointed); evaluations are seeded the same every time.
  env = family.make(config, config.seed if restored is None
                    else config.seed + int(restored["actor_steps"]))
  try:
    return _train(config, family, env, logger_fn, start_time, resumed_from, restored,
                  progress, on_learner_step)
  finally:
    family.close(env)
    logger_fn.close_all()


def _train(config, family, env, logger_fn, start_time, resumed_from, restored, progress,
           on_learner_step) -> RunResult:
  ckpt_dir = config.checkpoint_dir
  parts = experiment_lib.parts_for(config, env)
  builder, env_spec = parts.builder, parts.environment_spec

  key_learner, key_actor, key_eval, key_replay = jax.random.split(
      jax.random.PRNGKey(config.seed), 4)
  client = local_replay.LocalReplayClient(
      builder.make_replay_tables(env_spec, parts.policy),
      seed=int(jax.random.randint(key_replay, (), 0, 2**31 - 1)))
  if restored is not None:
    client.restore(restored["replay_state"])
  counter = counting.Counter()
  # The actors' keys (their seeds are drawn with jax) stay on the CPU with the actors.
  key_actor, key_eval = jax.device_put((key_actor, key_eval), placement.cpu_device())
  iterator, calibrations = experiment_lib.tapped_dataset(builder, parts.networks, client)
  # Synced to the root counter at once (time_delta 0): checkpoints hold its counts.
  learner = builder.make_learner(key_learner, parts.networks, iterator,
                                 lambda label: logger_fn(label, time_delta=1.0), env_spec,
                                 client, counting.Counter(counter, "learner", time_delta=0.0))
  if config.init_from is not None and restored is None:  # a warm start (agents/warm_start.py)
    config.init_from.apply(learner, client)
  policy_server = experiment_lib.policy_server(learner, parts.networks, calibrations)
  adder, actor = family.make_actor(config, parts, key_actor, client, policy_server)
  eval_actor = builder.make_actor(key_eval, parts.eval_policy, env_spec, policy_server)
  train_logger, eval_logger = logger_fn("train"), logger_fn("eval")

  actors_of, adders_of = experiment_lib.split(actor), experiment_lib.split(adder)
  learning = _Learning([
      _Part(name, builder if name == "" else builder.builders[name], part, adders_of[name],
            actors_of[name], -1 if name == "" else g)
      for g, (name, part) in enumerate(experiment_lib.split(learner).items())],
      client, on_learner_step)
  evaluations: List[Dict[str, Any]] = []
  state = {"last_eval": float("nan"), "wall_offset": 0.0}
  if restored is not None:
    state["wall_offset"] = float(restored.get("wall_seconds", 0.0))
    state["last_eval"] = float(restored.get("last_eval", float("nan")))
    if restored.get("counter") is not None:
      counter.restore(restored["counter"])
    saved_parts = experiment_lib.part_states(restored, experiment_lib.split(learner),
                                             resumed_from)
    for p in learning.parts:
      saved = saved_parts[p.name]
      p.learner.restore(saved["learner"])
      p.actor.num_steps = int(saved["actor_num_steps"])
      if saved.get("actor_rng") is not None:
        p.actor.rng_state = saved["actor_rng"]
      p.items_before = int(saved.get("items_written", 0))
      if p.name == "":
        p.started = bool(saved.get("learning_started", saved["learner_steps"] > 0))
        p.start_step = int(saved.get("learning_start_step", 0))
      else:
        p.started = saved["learning_start"] is not None
        p.start_step = int(saved["learning_start"] or 0)
      p.actor.update(wait=True)  # act with the restored parameters

  def wall_seconds() -> float:
    return state["wall_offset"] + time.time() - start_time

  def save_checkpoint(loop=None) -> str:
    del loop
    run_state = experiment_lib.checkpoint_state(
        config, learner, actor_steps=training.steps, episodes=training.episodes,
        counts=counter.save()["counts"], learning_started=any(p.started for p in learning.parts),
        wall_seconds=wall_seconds(), groups={p.name: p.schedule(training) for p in learning.parts},
        last_eval=state["last_eval"], replay_state=client.state(), launch="local")
    return checkpointing.save_run(ckpt_dir, run_state, step=training.steps,
                                  keep=config.keep_checkpoints)

  def run_evaluation(loop=None) -> None:
    del loop
    fault_points.point("evaluation")
    eval_actor.update(wait=True)
    stats = family.evaluate(config, parts, eval_actor,
                            config.seed + seeding.EVAL_SEED_OFFSET)
    state["last_eval"] = stats["episode_return"]
    row = experiment_lib.evaluation_row(
        stats, actor_steps=training.steps, learner_steps=learner.step_count,
        episodes=training.episodes, wall_seconds=wall_seconds(),
        precision=parts.eval_policy.precision,
        payload_bytes=experiment_lib.payload_bytes(policy_server, parts.eval_policy.precision),
        policy_version=eval_actor.policy_version)
    evaluations.append(row)
    eval_logger.write(row)

  class _Progress(loop_lib.Hook):

    def on_step(self, loop, action, timestep):
      fault_points.point("acting")
      if loop.steps == config.num_steps and loop.steps % config.eval_every:
        run_evaluation()  # the final evaluation, when not on the period
      if progress is not None:
        progress({"actor_steps": loop.steps, "episodes": loop.episodes,
                  "learner_steps": learner.step_count, "eval_return": state["last_eval"],
                  "actor_num_steps": learning.parts[0].actor.num_steps})

  hooks = [learning, family.episode_logger(train_logger, None),
           loop_lib.EveryNSteps(config.eval_every, run_evaluation), _Progress()]
  if ckpt_dir is not None and config.checkpoint_every:
    hooks.append(loop_lib.EveryNSeconds(60.0 * config.checkpoint_every, save_checkpoint))
  training = family.make_loop(config, env, actor, hooks)
  if restored is not None:
    training.steps, training.episodes = int(restored["actor_steps"]), int(restored["episodes"])
    for p in learning.parts:
      if p.index >= 0:
        training.group_steps[p.index] = int(saved_parts[p.name]["group_steps"])
  save = save_checkpoint if ckpt_dir is not None else None
  try:  # all of it preemptible: SIGTERM stops it like Ctrl-C
    with stops.preemptible():
      fault_points.point("startup")
      if training.steps < config.num_steps:
        training.run(num_steps=config.num_steps - training.steps)
      if not evaluations:  # resumed at (or past) num_steps: evaluate once
        run_evaluation()
      if save is not None:
        save()
  except KeyboardInterrupt as stop:  # Ctrl-C, and SIGTERM (stops.Preempted)
    stops.checkpoint_at_stop(stop, save)
    raise
  except (core.EnvironmentFailure, core.NonFiniteLossError):
    # The environment raised, or a learner step was refused (its state kept): the run's
    # state is still the last good one, so it is kept as on Ctrl-C.
    if save is not None:
      save()
    raise
  except (replay_lib.NonFiniteValueError, actors.NonFiniteOutputError) as e:
    # Rejected before it reached replay or an action: the state is still the last good one.
    if ckpt_dir is not None:
      save_checkpoint()
    raise experiment_lib.RunError(
        f"{e}; environment {config.env_id}, actor step {training.steps + 1}"
        + (f"; the last good state is checkpointed in {ckpt_dir}" if ckpt_dir else "")) from e
  finally:
    adder.close()

  best = max(evaluations, key=lambda r: r["episode_return"])
  return RunResult(final_eval_return=evaluations[-1]["episode_return"],
                   best_eval_return=best["episode_return"], best_eval_step=best["actor_steps"],
                   actor_steps=training.steps, learner_steps=learner.step_count,
                   episodes=training.episodes, wall_seconds=time.time() - start_time,
                   evaluations=evaluations, resumed_from=resumed_from,
                   resumed_actor_steps=int(restored["actor_steps"]) if restored else 0,
                   params_checksum=checkpointing.params_checksum(learner.get_variables(["policy"])[0]))
