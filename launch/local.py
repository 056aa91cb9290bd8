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


evaluate = evaluation.evaluate  # kept here for callers of the runner module


def _table_size(client: reverb.Client, table: str) -> int:
  return int(client.server_info()[table].current_size)


def checkpoint_state(learner, actor_steps: int, episodes: int, actor_num_steps: int) -> Dict[str, Any]:
  """What a run checkpoint holds (all numpy / plain Python)."""
  return {"learner": learner.save(),
          "policy_params": jax.device_get(learner.get_variables(["policy"])[0]),
          "learner_steps": learner.step_count, "actor_steps": actor_steps,
          "episodes": episodes, "actor_num_steps": actor_num_steps}


def run(builder, env_id: str, num_steps: int, seed: int = 0, logdir: Optional[str] = None,
        eval_every: int = 5_000, eval_episodes: int = 10,
        progress: Optional[Callable[[Dict[str, Any]], None]] = None,
        on_learner_step: Optional[Callable[[Any], None]] = None) -> RunResult:
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
  """
  start_time = time.time()
  if logdir is not None:
    os.makedirs(logdir, exist_ok=True)
  logger_fn = logging_lib.make_logger_factory(logdir)
  env = environments.make_environment(env_id, seed=seed)
  eval_env = environments.make_environment(env_id, seed=seed + 10_000)
  env_spec = environments.environment_spec(env)
  networks = builder.make_networks(env_spec)
  policy = builder.make_policy(networks, env_spec, evaluation=False)
  eval_policy = builder.make_policy(networks, env_spec, evaluation=True)

  server = replay.make_server(builder.make_replay_tables(env_spec, policy))
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

  def run_evaluation():
    nonlocal last_eval
    eval_actor.update(wait=True)
    stats = evaluate(eval_env, eval_actor, eval_episodes)
    last_eval = stats["episode_return"]
    row = {"actor_steps": actor_steps, "learner_steps": learner.step_count,
           "episodes": episodes, "wall_seconds": time.time() - start_time,
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
                  "learner_steps": learner.step_count, "eval_return": last_eval})
  finally:
    for logger in (train_logger, eval_logger, logger_fn("learner")):
      logger.close()
    adder.reset()  # flush pending items while the server is still up
    server.stop()

  if logdir is not None:
    checkpointing.save(os.path.join(logdir, "checkpoints"),
                       checkpoint_state(learner, actor_steps, episodes, actor.num_steps),
                       step=actor_steps)
  best = max(evaluations, key=lambda r: r["episode_return"])
  return RunResult(final_eval_return=evaluations[-1]["episode_return"],
                   best_eval_return=best["episode_return"], best_eval_step=best["actor_steps"],
                   actor_steps=actor_steps, learner_steps=learner.step_count, episodes=episodes,
                   wall_seconds=time.time() - start_time, evaluations=evaluations)
