"""Single-process training: an embedded Reverb server, one actor and the learner,
interleaved in one readable loop.

The loop asks the builder how many learner steps are owed, so the tables need no
blocking rate limiter in this mode and nothing can deadlock (every sample also has a
timeout, `actorq.components.replay`). Besides Acme's six builder methods, a builder
used here provides:

  * `min_replay_size() -> int`: items the table (`replay_table_name()`) must hold
    before the first learner step (0: no wait);
  * `learner_steps_owed(actor_steps_since_start: int) -> int`: the *total* number of
    learner steps that should have run after that many actor steps since learning
    started (e.g. `floor(n * samples_per_insert / batch_size)` off-policy, or
    `n // rollout_length` on-policy);
  * `config` with the agent's config.

Checkpoints (`logdir/checkpoints`, see `actorq.components.checkpointing`) are written
every `checkpoint_every` minutes, at the end, and when the run is interrupted with
Ctrl-C; each holds the learner's state (params, target params, optimizer state, step
counter), the counters (actor steps, episodes, learner steps, the acme counter), the
actor's step count (drives epsilon) and selector RNG, when learning started, and the
Reverb tables. `run(..., resume=True)` continues from the newest readable one; what
is not restored: the episode in progress (the resumed run starts a new episode; up to
n-1 pending n-step transitions of it are lost) and the environments' internal state.
"""
from __future__ import annotations

import dataclasses
import os
import time
from typing import Any, Callable, Dict, Optional

import jax
import numpy as np
import reverb
from acme.utils import counting

from actorq.components import checkpointing, environments, evaluation, replay
from actorq.components import logging as logging_lib
from actorq.components import variable_client as vc


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
  evaluations: list
  resumed_from: Optional[str] = None  # the checkpoint a resumed run started from
  resumed_actor_steps: int = 0  # its actor steps (0: a fresh run)


evaluate = evaluation.evaluate  # kept here for callers of the runner module


def _table_size(client: reverb.Client, table: str) -> int:
  return int(client.server_info()[table].current_size)


def checkpoint_state(learner, actor_steps: int, episodes: int, actor_num_steps: int,
                     **extra: Any) -> Dict[str, Any]:
  """What a run checkpoint holds (all numpy / plain Python); `extra` is added as is."""
  return {"learner": learner.save(),
          "policy_params": jax.device_get(learner.get_variables(["policy"])[0]),
          "learner_steps": learner.step_count, "actor_steps": actor_steps,
          "episodes": episodes, "actor_num_steps": actor_num_steps, **extra}


def _actor_rng_state(actor):
  rng = getattr(actor, "_rng", None)  # FeedForwardActor's selector generator
  return rng.bit_generator.state if rng is not None else None


def run(builder, env_id: str, num_steps: int, seed: int = 0, logdir: Optional[str] = None,
        eval_every: int = 5_000, eval_episodes: int = 10,
        progress: Optional[Callable[[Dict[str, Any]], None]] = None,
        on_learner_step: Optional[Callable[[Any], None]] = None,
        checkpoint_every: Optional[float] = 10.0, keep_checkpoints: int = 3,
        resume: bool = False) -> RunResult:
  """Trains `builder`'s agent for `num_steps` actor (environment) steps.

  Args:
    builder: an agent builder (see `actorq.agents.dqn.builder.DQNBuilder`).
    env_id: environment id (`actorq.components.environments`).
    num_steps: actor steps to take.
    seed: seeds the environment, networks and actor.
    logdir: CSVs `train.csv`, `learner.csv`, `eval.csv` go here, and a final checkpoint
      in `logdir/checkpoints` (None: no files).
    eval_every: actor steps between greedy evaluations (and one at the end).
    eval_episodes: episodes per evaluation.
    progress: called after every actor step with a dict of counters.
    on_learner_step: called with the learner after each of its steps (tests).
    checkpoint_every: minutes between checkpoints (None or 0: only at the end).
    keep_checkpoints: how many checkpoints to keep (>= 1).
    resume: continue from the newest readable checkpoint in `logdir/checkpoints`
      (`num_steps` stays the run's total, not additional steps).

  Raises:
    ValueError: `resume` without a `logdir`.
    checkpointing.CheckpointError: `resume` and no readable checkpoint.
  """
  start_time = time.time()
  if logdir is not None:
    os.makedirs(logdir, exist_ok=True)
  ckpt_dir = os.path.join(logdir, "checkpoints") if logdir is not None else None
  resumed_from, restored = None, None
  if resume:
    if ckpt_dir is None:
      raise ValueError("resume=True needs the run's logdir")
    resumed_from, restored = checkpointing.restore_latest(ckpt_dir, checkpointing.validate_run)
    if restored is None:
      raise checkpointing.CheckpointError(f"no readable checkpoint in {ckpt_dir} to resume from")
  logger_fn = logging_lib.make_logger_factory(logdir)
  # A resumed run's training environment continues with a different seed (its
  # internal state is not checkpointed); evaluation keeps its seed.
  env = environments.make_environment(
      env_id, seed=seed if restored is None else seed + int(restored["actor_steps"]))
  eval_env = environments.make_environment(env_id, seed=seed + 10_000)
  env_spec = environments.environment_spec(env)
  networks = builder.make_networks(env_spec)
  policy = builder.make_policy(networks, env_spec, evaluation=False)
  eval_policy = builder.make_policy(networks, env_spec, evaluation=True)

  tables = builder.make_replay_tables(env_spec, policy)
  if ckpt_dir is None:
    server = replay.make_server(tables)
  else:  # Reverb's own checkpointer; a resumed run's tables load from its checkpoint
    server = reverb.Server(tables, checkpointer=checkpointing.reverb_checkpointer(
        ckpt_dir, restored.get("replay_checkpoint") if restored else None))
  client = reverb.Client(f"localhost:{server.port}")
  counter = counting.Counter()
  key_learner, key_actor, key_eval = jax.random.split(jax.random.PRNGKey(seed), 3)
  learner = builder.make_learner(key_learner, networks, builder.make_dataset_iterator(client),
                                 lambda label: logger_fn(label, time_delta=1.0), env_spec,
                                 client, counting.Counter(counter, "learner"))
  publishers = {}

  def publisher(precision):
    if precision not in publishers:
      publishers[precision] = vc.PolicyPublisher(learner, networks.spec, precision)
    return publishers[precision]

  adder = builder.make_adder(client, env_spec, policy)
  actor = builder.make_actor(key_actor, policy, env_spec, publisher(policy.precision), adder)
  eval_actor = builder.make_actor(key_eval, eval_policy, env_spec, publisher(eval_policy.precision))
  train_logger = logger_fn("train")
  eval_logger = logger_fn("eval")

  min_replay = builder.min_replay_size()
  learning_started = False
  learning_start_step = 0
  evaluations = []
  episodes, actor_steps = 0, 0
  last_eval = float("nan")
  wall_offset = 0.0  # wall seconds of the run before this session (resume)
  if restored is not None:
    wall_offset = float(restored.get("wall_seconds", 0.0))
    learner.restore(restored["learner"])
    if restored.get("counter") is not None:
      counter.restore(restored["counter"])
    actor_steps, episodes = int(restored["actor_steps"]), int(restored["episodes"])
    learning_started = bool(restored.get("learning_started", restored["learner_steps"] > 0))
    learning_start_step = int(restored.get("learning_start_step", 0))
    actor.num_steps = int(restored["actor_num_steps"])
    if restored.get("actor_rng") is not None and getattr(actor, "_rng", None) is not None:
      actor._rng.bit_generator.state = restored["actor_rng"]
    last_eval = float(restored.get("last_eval", float("nan")))
    actor.update(wait=True)  # act with the restored parameters
  last_checkpoint = time.time()

  def save_checkpoint():
    nonlocal last_checkpoint
    checkpointing.save_run(
        ckpt_dir, checkpoint_state(
            learner, actor_steps, episodes, actor.num_steps, counter=counter.save(),
            learning_started=learning_started, learning_start_step=learning_start_step,
            actor_rng=_actor_rng_state(actor), last_eval=last_eval,
            env_id=env_id, seed=seed, num_steps=num_steps,
            wall_seconds=wall_offset + time.time() - start_time),
        step=actor_steps, keep=keep_checkpoints, replay_client=client)
    last_checkpoint = time.time()

  def run_evaluation():
    nonlocal last_eval
    eval_actor.update(wait=True)
    stats = evaluate(eval_env, eval_actor, eval_episodes)
    last_eval = stats["episode_return"]
    row = {"actor_steps": actor_steps, "learner_steps": learner.step_count,
           "episodes": episodes, "wall_seconds": wall_offset + time.time() - start_time,
           "actor_precision": eval_policy.precision,
           "payload_bytes": publisher(eval_policy.precision).stats["payload_bytes"],
           "policy_version": eval_actor.policy_version, **stats}
    evaluations.append(row)
    eval_logger.write(row)

  try:
    timestep = env.reset()
    actor.observe_first(timestep)
    episode_return, episode_length, episode_start = 0.0, 0, time.time()
    while actor_steps < num_steps:
      action = actor.select_action(timestep.observation)
      timestep = env.step(action)
      actor.observe(action, timestep)
      actor_steps += 1
      episode_return += float(timestep.reward)
      episode_length += 1

      # Learner steps owed under the samples-per-insert ratio.
      if not learning_started and actor_steps >= min_replay:
        learning_started = (min_replay == 0 or
                            _table_size(client, builder.replay_table_name()) >= min_replay)
        learning_start_step = actor_steps - 1
      if learning_started:
        owed = builder.learner_steps_owed(actor_steps - learning_start_step)
        while learner.step_count < owed:
          learner.step()
          if on_learner_step is not None:
            on_learner_step(learner)
      actor.update()

      if timestep.last():
        episodes += 1
        elapsed = time.time() - episode_start
        train_logger.write({"actor_steps": actor_steps, "episodes": episodes,
                            "episode_return": episode_return, "episode_length": episode_length,
                            "steps_per_second": episode_length / max(elapsed, 1e-9),
                            "policy_version": actor.policy_version})
        timestep = env.reset()
        actor.observe_first(timestep)
        episode_return, episode_length, episode_start = 0.0, 0, time.time()

      if actor_steps % eval_every == 0 or actor_steps == num_steps:
        run_evaluation()
      if progress is not None:
        progress({"actor_steps": actor_steps, "episodes": episodes,
                  "learner_steps": learner.step_count, "eval_return": last_eval,
                  "actor_num_steps": actor.num_steps})
      if (ckpt_dir is not None and checkpoint_every and actor_steps < num_steps
          and time.time() - last_checkpoint >= 60.0 * checkpoint_every):
        save_checkpoint()
    if not evaluations:  # resumed at (or past) num_steps: evaluate once
      run_evaluation()
    if ckpt_dir is not None:
      save_checkpoint()
  except KeyboardInterrupt:
    if ckpt_dir is not None:
      save_checkpoint()  # Ctrl-C keeps the progress made since the last checkpoint
    raise
  finally:
    for logger in (train_logger, eval_logger, logger_fn("learner")):
      logger.close()
    adder.close()  # flush and close the writer while the server is still up
    server.stop()

  best = max(evaluations, key=lambda r: r["episode_return"])
  return RunResult(final_eval_return=evaluations[-1]["episode_return"],
                   best_eval_return=best["episode_return"], best_eval_step=best["actor_steps"],
                   actor_steps=actor_steps, learner_steps=learner.step_count, episodes=episodes,
                   wall_seconds=time.time() - start_time, evaluations=evaluations,
                   resumed_from=resumed_from,
                   resumed_actor_steps=int(restored["actor_steps"]) if restored else 0)
