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
seeded from `config.seed`, and nothing depends on wall-clock time (checkpoints are written
every `checkpoint_every` minutes but change no state).

Checkpoints (`<logdir>/checkpoints`, `launch.checkpointing.save_run`: atomic and
checksummed, as a single-agent run's) are written every `checkpoint_every` minutes, at the
end, on Ctrl-C/SIGTERM and when an environment raises. Each holds, per parameter group
(``groups[<name>]``), the learner's state, its fp32 policy, the actor's step count and
selector RNG, the items its adder wrote and when its learning started; the in-process replay
of every group's table; the counters. `resume=True` continues from the newest readable one
with the same actor and learner step totals at the end as an uninterrupted run; not
restored (as in `local.run`): the episodes in progress (the resumed run starts new ones,
its environments seeded `seed + actor_steps + e`) and the environments' internal state.
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
from actorq.launch import checkpointing
from actorq.launch import experiment as experiment_lib
from actorq.launch import local
from actorq.launch import logging as logging_lib
from actorq.launch import placement
from actorq.launch import spec as spec_lib
from actorq.quantization import bias_correction


class GroupParts:
  """One parameter group's pieces: its builder's networks and training and evaluation
  policies (made here); learner, policy server, adder and actors are set by the runner
  (this module's `run`, or the nodes of `launch.multi_agent_nodes`)."""

  def __init__(self, group, builder):
    self.group, self.builder = group, builder
    spec = group.environment_spec
    self.networks = builder.make_networks(spec)
    self.policy = builder.make_policy(self.networks, spec, evaluation=False)
    self.eval_policy = builder.make_policy(self.networks, spec, evaluation=True)
    self.learner = self.server = self.adder = self.actor = self.eval_actor = None


def team_stats(episodes: List[ma_loop.MultiAgentEpisodeStats], agents) -> Dict[str, float]:
  """Team return (mean, std), mean length and each agent's mean return (`return_<agent>`)."""
  out = loop_lib.summarize(episodes)
  for agent in agents:
    out[f"return_{agent}"] = float(np.mean([e.agent_returns[agent] for e in episodes]))
  return out


class EpisodeLogger(loop_lib.Hook):
  """`train.csv`: one row per training episode, with each agent's return."""

  def __init__(self, logger):
    self._logger = logger

  def on_episode_end(self, loop, stats):
    self._logger.write({"actor_steps": loop.steps, "episodes": loop.episodes,
                        "episode_return": stats.episode_return,
                        "episode_length": stats.episode_length,
                        **{f"return_{a}": r for a, r in stats.agent_returns.items()},
                        "policy_version": loop.actor.policy_version})


def evaluate(config: experiment_lib.ExperimentConfig, groups, eval_actors, *,
             should_stop=None) -> Optional[Dict[str, float]]:
  """`config.eval_episodes` greedy episodes on a fresh environment seeded `seed +
  experiment.EVAL_SEED_OFFSET` (every evaluation of a run, and of runs at other
  precisions with the same seed, plays the same start states), one batched actor per
  group in `eval_actors`; `team_stats` of them, or None when `should_stop` ended them
  first.

  Raises:
    core.EnvironmentFailure: the environment raised.
  """
  eval_env = ma_env.make_multi_agent_environment(
      config.env_id, seed=config.seed + experiment_lib.EVAL_SEED_OFFSET)
  try:
    evaluator = ma_loop.MultiAgentLoop([eval_env], groups, list(eval_actors), learn=False,
                                       should_stop=should_stop,
                                       max_episode_steps=config.max_episode_steps)
    episodes = evaluator.run(num_episodes=config.eval_episodes)
    if len(episodes) < config.eval_episodes:
      return None
    return team_stats(episodes, eval_env.agents)
  finally:
    eval_env.close()


def run(config: experiment_lib.ExperimentConfig, *,
        progress: Optional[Callable[[Dict[str, Any]], None]] = None) -> local.RunResult:
  """Trains `config.builder` (a `core.MultiAgentBuilder`) on `config.env_id` for
  `config.num_steps` environment steps in this process; `run.json` is written first (with
  a logdir, unless resuming), as `local.run` does. With `config.resume` it continues from
  the newest readable checkpoint (`save_checkpoint` below says what one holds).

  Raises:
    core.UsageError: a single-agent environment id, or agents the builder cannot group
      (e.g. parameter sharing across agents with different specs).
    checkpointing.CheckpointError: `config.resume` and no readable multi-agent checkpoint.
    core.EnvironmentFailure: an environment raised (after a checkpoint, with a logdir).
    experiment.Preempted: SIGTERM, like KeyboardInterrupt for Ctrl-C (after a checkpoint,
      with a logdir; `checkpoint_path` says which).
  """
  device = placement.learner_device(config.learner_device)
  resumed_from, restored = experiment_lib.restored_checkpoint(config)
  if restored is not None and not restored.get("multi_agent"):
    raise checkpointing.CheckpointError(f"{resumed_from} is not a multi-agent checkpoint")
  if restored is not None and restored.get("replay_state") is None:
    raise checkpointing.CheckpointError(
        f"{resumed_from} holds no in-process replay (a distributed run's checkpoint): a "
        "single-process run resumes only from its own checkpoints")
  # A resumed run's environments continue with other seeds (their internal state is not
  # checkpointed), as `local.run`'s; evaluations are seeded the same every time.
  seed = experiment_lib.training_seed(config.seed, 0 if restored is None else
                                      int(restored["actor_steps"]), config.num_envs)
  try:
    env = ma_env.make_multi_agent_environment(config.env_id, seed=seed)
    groups = config.builder.make_groups(env)
  except (core.UnknownEnvironmentError, core.UnsupportedEnvironmentError) as e:
    raise core.UsageError(str(e)) from None
  if config.logdir is not None and not config.resume:
    spec_lib.RunSpec.from_config(config).save(config.logdir)
  environments = [env] + [ma_env.make_multi_agent_environment(config.env_id, seed=seed + e)
                          for e in range(1, config.num_envs)]
  try:
    with jax.default_device(device):
      result = _run(config, environments, groups, progress, resumed_from, restored)
  finally:
    for environment in environments:
      environment.close()
  result.learner_device = placement.device_name(device)
  return result


def _run(config, environments, groups, progress, resumed_from, restored) -> local.RunResult:
  start_time = time.time()
  logger_fn = logging_lib.make_logger_factory(config.logdir)
  parts = [GroupParts(g, config.builder.group_builder(g)) for g in groups]
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
        counting.Counter(counter, label, time_delta=0.0))  # synced: checkpoints hold it
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
  state = {"last_eval": float("nan"), "wall_offset": 0.0}
  items_before = [0] * len(parts)  # items a resumed run's earlier sessions had written
  if restored is not None:
    saved = restored["groups"]
    if sorted(saved) != sorted(p.group.name for p in parts):
      raise checkpointing.CheckpointError(
          f"{resumed_from} holds the parameter groups {', '.join(sorted(saved))}, this run "
          f"has {', '.join(p.group.name for p in parts)}")
    client.restore(restored["replay_state"])
    counter.restore(restored["counter"])
    for g, p in enumerate(parts):
      group_state = saved[p.group.name]
      p.learner.restore(group_state["learner"])
      p.actor.num_steps = int(group_state["actor_num_steps"])
      p.actor.rng_state = group_state["actor_rng"]
      items_before[g] = int(group_state["items_written"])
      p.actor.update(wait=True)  # act with the restored parameters
    state["last_eval"] = float(restored.get("last_eval", float("nan")))
    state["wall_offset"] = float(restored.get("wall_seconds", 0.0))

  def wall_seconds() -> float:
    return state["wall_offset"] + time.time() - start_time

  def learner_steps() -> int:
    return int(sum(p.learner.step_count for p in parts))

  class _Learning(loop_lib.Hook):
    """Each group's owed learner steps after every environment step, once its table
    holds `min_replay_size()` items (as `local._Learning`, with the group's agent steps
    as its actor steps)."""

    def __init__(self):
      self.start = [None] * len(parts)  # group steps when each group's learning started
      if restored is not None:
        self.start = [restored["groups"][p.group.name]["learning_start"] for p in parts]

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
            steps - self.start[g], items_before[g] + int(p.adder.items_written)))
        while p.learner.step_count < owed:
          p.learner.step()

  def run_evaluation(loop=None) -> None:
    del loop
    for p in parts:
      p.eval_actor.update(wait=True)
    stats = evaluate(config, groups, [p.eval_actor for p in parts])
    state["last_eval"] = stats["episode_return"]
    row = experiment_lib.evaluation_row(
        stats, actor_steps=training.steps, learner_steps=learner_steps(),
        episodes=training.episodes, wall_seconds=wall_seconds(),
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

  learning = _Learning()
  ckpt_dir = config.checkpoint_dir

  def save_checkpoint(loop=None) -> str:
    """A run checkpoint (`checkpointing.save_run`: atomic, checksummed): every group's
    learner state, fp32 policy, actor step count and selector RNG, items written and
    learning start; the in-process replay of every group's table (items, sampling RNG);
    the counters. Not kept: the episodes in progress and the environments' state."""
    del loop
    group_states = {p.group.name: {
        "learner": p.learner.save(),
        "policy_params": jax.device_get(p.learner.get_variables(["policy"])[0]),
        "learner_steps": int(p.learner.step_count), "actor_num_steps": int(p.actor.num_steps),
        "actor_rng": p.actor.rng_state, "learning_start": learning.start[g],
        "items_written": items_before[g] + int(p.adder.items_written),
        "group_steps": int(training.group_steps[g])} for g, p in enumerate(parts)}
    return checkpointing.save_run(ckpt_dir, {
        "multi_agent": True, "groups": group_states,
        "policy_params": {name: s["policy_params"] for name, s in group_states.items()},
        "learner_steps": learner_steps(), "actor_steps": int(training.steps),
        "episodes": int(training.episodes), "counter": counter.save(),
        "learning_started": any(s is not None for s in learning.start),
        "wall_seconds": wall_seconds(), "last_eval": state["last_eval"],
        "replay_state": client.state(), "env_id": config.env_id, "seed": config.seed,
        "num_steps": config.num_steps, "launch": "local"},
        step=training.steps, keep=config.keep_checkpoints)

  hooks = [learning, EpisodeLogger(train_logger),
           loop_lib.EveryNSteps(config.eval_every, run_evaluation), _Progress()]
  if ckpt_dir is not None and config.checkpoint_every:
    hooks.append(loop_lib.EveryNSeconds(60.0 * config.checkpoint_every, save_checkpoint))
  training = ma_loop.MultiAgentLoop(environments, groups, [p.actor for p in parts],
                                    hooks=hooks, max_episode_steps=config.max_episode_steps)
  if restored is not None:
    training.steps, training.episodes = int(restored["actor_steps"]), int(restored["episodes"])
    training.group_steps = [int(restored["groups"][p.group.name]["group_steps"])
                            for p in parts]
  try:  # an environment that raised leaves the run's state the last good one: kept
    local.run_to_end(config, training, evaluations, run_evaluation, save_checkpoint,
                     keep_state_on=(core.EnvironmentFailure,))
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
      resumed_from=resumed_from,
      resumed_actor_steps=int(restored["actor_steps"]) if restored else 0,
      params_checksum=local.params_checksum(params))
