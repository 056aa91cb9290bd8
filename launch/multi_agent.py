"""Single-process training of a multi-agent builder (`core.MultiAgentBuilder`, e.g.
`agents.ippo`) on a multi-agent environment id (``pz:<module>/<env>``).

    result = multi_agent.run(ExperimentConfig(IPPOBuilder(IPPOConfig()),
                                              "pz:mpe2/simple_spread_v3", num_steps=20_000))

The same shape as `launch.local` for one agent, per parameter group: the group's
single-agent builder (`builder.group_builder(group)`) makes its networks, policies, replay
table (all in one seeded in-process replay, `components.local_replay`), learner, policy
server, batched adder (one adder state per (environment, agent) stream) and actor, and
`components.acting.multi_agent.MultiAgentLoop` steps `config.num_envs` environments (env e
seeded `seed + e`) with one batched inference per group per step. After every environment
step each group's learner runs the steps its builder says are owed, once the group's table
holds `min_replay_size()` items (`learner_steps_owed(ReplayProgress(the group's agent steps
since, items the group's streams wrote))`: a shared group's agent steps are N per
environment step).

Evaluation (every `eval_every` environment steps and at the end): `eval_episodes` greedy
episodes on a fresh environment seeded `seed + experiment.EVAL_SEED_OFFSET` each time (the
same start states at every evaluation, as `experiment.evaluate`). `eval.csv`'s
`episode_return` is the team return (the sum of the agents' returns, mean over the
episodes), `episode_return_std` its standard deviation, and `return_<agent>` each agent's
mean return; `train.csv` has a row per training episode with the same columns.

Deterministic: environments, network initialisation, exploration and replay sampling are
seeded from `config.seed`, and nothing depends on wall-clock time. Not supported here (one
line each, `core.UsageError`): `resume` (no multi-agent checkpoints yet).
"""
from __future__ import annotations

import time
from typing import Any, Callable, Dict, List, Optional

import jax
import numpy as np
from acme.utils import counting

from actorq import core
from actorq.components.acting import actors
from actorq.components.acting import loop as loop_lib
from actorq.components.acting import multi_agent as ma_loop
from actorq.components.acting import variable_client as vc
from actorq.components.envs import multi_agent as ma_env
from actorq.components.replay import local_replay
from actorq.launch import experiment as experiment_lib
from actorq.launch import local
from actorq.launch import logging as logging_lib
from actorq.launch import placement
from actorq.launch import spec as spec_lib
from actorq.quantization import bias_correction


class _Group:
  """One parameter group's pieces."""

  def __init__(self, group, builder):
    self.group, self.builder = group, builder
    spec = group.environment_spec
    self.networks = builder.make_networks(spec)
    self.policy = builder.make_policy(self.networks, spec, evaluation=False)
    self.eval_policy = builder.make_policy(self.networks, spec, evaluation=True)
    self.learner = self.server = self.adder = self.actor = self.eval_actor = None


def _stats(episodes: List[ma_loop.MultiAgentEpisodeStats], agents) -> Dict[str, float]:
  """Team return (mean, std), mean length and each agent's mean return."""
  out = loop_lib.summarize(episodes)
  for agent in agents:
    out[f"return_{agent}"] = float(np.mean([e.agent_returns[agent] for e in episodes]))
  return out


class _EpisodeLogger(loop_lib.Hook):
  """`train.csv`: one row per training episode, with each agent's return."""

  def __init__(self, logger):
    self._logger = logger

  def on_episode_end(self, loop, stats):
    self._logger.write({"actor_steps": loop.steps, "episodes": loop.episodes,
                        "episode_return": stats.episode_return,
                        "episode_length": stats.episode_length,
                        **{f"return_{a}": r for a, r in stats.agent_returns.items()},
                        "policy_version": loop.actor.policy_version})


def run(config: experiment_lib.ExperimentConfig, *,
        progress: Optional[Callable[[Dict[str, Any]], None]] = None) -> local.RunResult:
  """Trains `config.builder` (a `core.MultiAgentBuilder`) on `config.env_id` for
  `config.num_steps` environment steps in this process; `run.json` is written first (with
  a logdir), as `local.run` does.

  Raises:
    core.UsageError: `config.resume` (not supported for multi-agent runs), a single-agent
      environment id, or agents the builder cannot group (e.g. parameter sharing across
      agents with different specs).
    core.EnvironmentFailure: an environment raised.
  """
  if config.resume:
    raise core.UsageError("--resume is not supported for multi-agent runs yet (they write "
                          "no checkpoints); start the run again")
  device = placement.learner_device(config.learner_device)
  try:
    env = ma_env.make_multi_agent_environment(config.env_id, seed=config.seed)
    groups = config.builder.make_groups(env)
  except (core.UnknownEnvironmentError, core.UnsupportedEnvironmentError) as e:
    raise core.UsageError(str(e)) from None
  if config.logdir is not None:
    spec_lib.RunSpec.from_config(config).save(config.logdir)
  environments = [env] + [ma_env.make_multi_agent_environment(config.env_id, seed=config.seed + e)
                          for e in range(1, config.num_envs)]
  try:
    with jax.default_device(device):
      result = _run(config, environments, groups, progress)
  finally:
    for environment in environments:
      environment.close()
  result.learner_device = placement.device_name(device)
  return result


def _run(config, environments, groups, progress) -> local.RunResult:
  start_time = time.time()
  logger_fn = logging_lib.make_logger_factory(config.logdir)
  parts = [_Group(g, config.builder.group_builder(g)) for g in groups]
  num_envs = len(environments)
  key_learners, key_actors, key_evals, key_replay = jax.random.split(
      jax.random.PRNGKey(config.seed), 4)
  tables = [t for p in parts for t in p.builder.make_replay_tables(
      p.group.environment_spec, p.policy)]
  client = local_replay.LocalReplayClient(
      tables, seed=int(jax.random.randint(key_replay, (), 0, 2**31 - 1)))
  counter = counting.Counter()
  keys = zip(jax.random.split(key_learners, len(parts)),
             jax.device_put(jax.random.split(key_actors, len(parts)), placement.cpu_device()),
             jax.device_put(jax.random.split(key_evals, len(parts)), placement.cpu_device()))
  for p, (k_learn, k_act, k_eval) in zip(parts, keys):
    spec, label = p.group.environment_spec, (
        "learner" if len(parts) == 1 else f"learner_{p.group.name}")
    # The group's int8 payloads are bias-corrected on its newest sample (issue 39).
    iterator, calibration = bias_correction.tap(p.builder.make_dataset_iterator(client),
                                                p.networks.spec)
    p.learner = p.builder.make_learner(
        k_learn, p.networks, iterator,
        lambda _, label=label: logger_fn(label, time_delta=1.0), spec, client,
        counting.Counter(counter, label))
    p.server = vc.PolicyServer(p.learner, p.networks.spec, calibration=calibration)
    p.adder = p.builder.make_batched_adder(client, spec, p.policy,
                                           num_envs * len(p.group.agents))
    dummy = spec.actions.generate_value()
    p.actor = actors.batched(p.builder.make_actor(k_act, p.policy, spec, p.server),
                             p.adder, dummy)
    p.eval_actor = actors.batched(p.builder.make_actor(k_eval, p.eval_policy, spec, p.server),
                                  None, dummy)
  train_logger, eval_logger = logger_fn("train"), logger_fn("eval")
  evaluations: List[Dict[str, Any]] = []
  state = {"last_eval": float("nan")}

  def learner_steps() -> int:
    return int(sum(p.learner.step_count for p in parts))

  class _Learning(loop_lib.Hook):
    """Each group's owed learner steps after every environment step, once its table
    holds `min_replay_size()` items (as `local._Learning`, with the group's agent steps
    as its actor steps)."""

    def __init__(self):
      self.start = [None] * len(parts)  # group steps when each group's learning started

    def on_step(self, loop, action, timestep):
      for g, p in enumerate(parts):
        steps = loop.group_steps[g]
        if self.start[g] is None:
          minimum = int(p.builder.min_replay_size())
          if minimum and (steps < minimum or int(client.server_info()[
              p.builder.replay_table_name()].current_size) < minimum):
            continue
          self.start[g] = steps - 1 if minimum else 0
        owed = p.builder.learner_steps_owed(core.ReplayProgress(
            steps - self.start[g], int(p.adder.items_written)))
        while p.learner.step_count < owed:
          p.learner.step()

  def run_evaluation(loop=None) -> None:
    del loop
    for p in parts:
      p.eval_actor.update(wait=True)
    # A fresh environment seeded the same each time: every evaluation of a run (and of
    # runs at other precisions with the same seed) plays the same start states.
    eval_env = ma_env.make_multi_agent_environment(
        config.env_id, seed=config.seed + experiment_lib.EVAL_SEED_OFFSET)
    try:
      evaluator = ma_loop.MultiAgentLoop([eval_env], groups, [p.eval_actor for p in parts],
                                         learn=False, max_episode_steps=config.max_episode_steps)
      stats = _stats(evaluator.run(num_episodes=config.eval_episodes), eval_env.agents)
    finally:
      eval_env.close()
    state["last_eval"] = stats["episode_return"]
    row = experiment_lib.evaluation_row(
        stats, actor_steps=training.steps, learner_steps=learner_steps(),
        episodes=training.episodes, wall_seconds=time.time() - start_time,
        precision=parts[0].eval_policy.precision,
        payload_bytes=int(sum(p.server.publisher(p.eval_policy.precision).stats["payload_bytes"]
                              for p in parts)),
        policy_version=parts[0].eval_actor.policy_version)
    evaluations.append(row)
    eval_logger.write(row)

  class _Progress(loop_lib.Hook):

    def on_step(self, loop, action, timestep):
      if loop.steps == config.num_steps and loop.steps % config.eval_every:
        run_evaluation()  # the final evaluation, when not on the period
      if progress is not None:
        progress({"actor_steps": loop.steps, "episodes": loop.episodes,
                  "learner_steps": learner_steps(), "eval_return": state["last_eval"],
                  "actor_num_steps": parts[0].actor.num_steps})

  hooks = [_Learning(), _EpisodeLogger(train_logger),
           loop_lib.EveryNSteps(config.eval_every, run_evaluation), _Progress()]
  training = ma_loop.MultiAgentLoop(environments, groups, [p.actor for p in parts],
                                    hooks=hooks, max_episode_steps=config.max_episode_steps)
  try:
    with experiment_lib.preemptible():
      training.run(num_steps=config.num_steps)
  finally:
    for label in ["train", "eval"] + [("learner" if len(parts) == 1 else
                                        f"learner_{p.group.name}") for p in parts]:
      logger_fn(label).close()
    for p in parts:
      p.adder.close()
  best = max(evaluations, key=lambda r: r["episode_return"])
  params = {p.group.name: p.learner.get_variables(["policy"])[0] for p in parts}
  return local.RunResult(
      final_eval_return=evaluations[-1]["episode_return"],
      best_eval_return=best["episode_return"], best_eval_step=best["actor_steps"],
      actor_steps=training.steps, learner_steps=learner_steps(), episodes=training.episodes,
      wall_seconds=time.time() - start_time, evaluations=evaluations,
      params_checksum=local.params_checksum(params))
