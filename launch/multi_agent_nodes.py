"""The nodes of a multi-agent Launchpad program (`launch.distributed.make_program` picks
them from `distributed.NODE_KINDS` for a `core.MultiAgentBuilder`; issue 44).

The program has the single-agent program's groups and the same replay, counter and limiter
nodes; what differs is per parameter group (`components.acting.multi_agent.ParameterGroup`):

  replay     ONE Reverb server with every group's table (`make_tables`: the tables of each
             group's single-agent builder, rate limiters kept);
  learner    ONE node stepping every group's learner (`MultiAgentLearnerNode`), each in its
             own thread (a group's learner blocked in its sampling never holds up another
             group's, nor a checkpoint: it waits for its sample outside its step lock), each with its `PolicyServer` (int8 payloads made once per version on
             this node, bias-corrected on the group's newest sample as in single process);
             one node rather than one per group because the groups share the counter's
             `learner_steps` and the checkpoint, which must hold every group at one moment;
  actor      N nodes (`MultiAgentActorNode`), each stepping `config.num_envs` whole
             environments with all their agents in `MultiAgentLoop` (environment e of actor i
             seeded `seed + 1 + i + e`), one batched actor per group (its own seeded
             generator, a variable client per group pulling ``<group>``'s
             ``policy/<precision>`` from the learner node, a batched adder with one state per
             (environment, agent) stream writing to the group's table);
  evaluator  greedy team evaluation (`MultiAgentEvaluatorNode`, `launch.multi_agent.evaluate`):
             eval.csv has the team return and `return_<agent>` per agent.

Counts: `actor_steps` are environment steps (all agents of one environment at once), summed
over environments and actors, as in a single-process multi-agent run; `learner_steps` sum the
groups' learner steps.

Checkpoints (`MultiAgentLearnerNode.checkpoint`, every `checkpoint_every` minutes, at the
finish and on a signal, as single-agent programs): every group's learner state and fp32
policy, the counter's totals and Reverb's tables (every group's). `resume=True` continues
as a single-agent program does (`distributed.make_program`): Reverb loads the tables, the
counter the totals, the learner node every group's state; actors start anew with seeds
`seed + 1 + i + actor_steps`. `actorq eval --checkpoint RUN` reads the same checkpoint.
"""
from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
from typing import Any, Dict, List, Optional, Sequence

import jax
import launchpad as lp
from acme.utils import counting

from actorq.components.acting import actors
from actorq.components.acting import multi_agent as ma_loop
from actorq.components.acting import variable_client as vc
from actorq.components.envs import multi_agent as ma_env
from actorq.components.replay import reverb_timeouts
from actorq.launch import checkpointing
from actorq.launch import distributed_nodes as nodes_lib
from actorq.launch import experiment as experiment_lib
from actorq.launch import logging as logging_lib
from actorq.launch import multi_agent
from actorq.launch import placement
from actorq.launch import processes
from actorq.quantization import bias_correction


def _groups(config: experiment_lib.ExperimentConfig, seed: int):
  """`(environment seeded seed, its parameter groups, one GroupParts per group)`."""
  env = ma_env.make_multi_agent_environment(config.env_id, seed=seed)
  groups = config.builder.make_groups(env)
  return env, groups, [multi_agent.GroupParts(g, config.builder.group_builder(g))
                       for g in groups]


def learner_label(parts: Sequence[multi_agent.GroupParts], part) -> str:
  """A group's learner logger label: ``learner`` with one group, else ``learner_<group>``
  (as in a single-process run)."""
  return "learner" if len(parts) == 1 else f"learner_{part.group.name}"


def make_tables(config: experiment_lib.ExperimentConfig, launcher_pid: Optional[int] = None):
  """The ReverbNode's table factory: every group's tables, rate limiters kept."""
  processes.watch_launcher(launcher_pid)
  env, _, parts = _groups(config, config.seed)
  env.close()
  return [t for p in parts for t in p.builder.make_replay_tables(
      p.group.environment_spec, p.policy, rate_limited=True)]


class GroupSource:
  """An actor's variable source for one group: `get_variables(names)` asks the learner
  node for the group's variables (`MultiAgentLearnerNode.get_group_variables`)."""

  def __init__(self, learner, group: str):
    self._learner, self._group = learner, group

  def get_variables(self, names):
    return self._learner.get_group_variables(self._group, list(names))


class _Prefetch:
  """An iterator whose next item can be fetched ahead (`fetch`), so a group's step thread
  waits for its sample WITHOUT holding its step lock. Otherwise a checkpoint that has
  paused one group (its table then fills, and the actors, which write every group's table,
  block on it) could wait forever for another group's lock held by a step waiting for data
  those blocked actors never write."""

  def __init__(self, iterator):
    self._iterator, self._next, self._held = iterator, None, False

  def fetch(self) -> None:
    if not self._held:
      self._next, self._held = next(self._iterator), True

  def __iter__(self):
    return self

  def __next__(self):
    self.fetch()
    item, self._next, self._held = self._next, None, False
    return item


class MultiAgentLearnerNode(nodes_lib.LearnerNode):
  """Every parameter group's learner and, through one `PolicyServer` per group, the
  actors' variable source (see the module docstring).

  Courier methods:
    get_group_variables(group, names) -> the group's `PolicyServer.get_variables(names)`;
    get_variables(names) -> the first group's (what a single-group program's clients ask);
    get_version() -> int, the smallest of the groups' learner versions;
    checkpoint() -> the path of a new run checkpoint (None without a logdir);
    placement(), profile() as `LearnerNode`'s (profile's ``"served"`` per group).
  """

  # pylint: disable=super-init-not-called
  def __init__(self, config: experiment_lib.ExperimentConfig, replay, counter,
               num_actors: int, reverb_timeout_s: float, launcher_pid: Optional[int] = None,
               restore_path: Optional[str] = None):
    processes.watch_launcher(launcher_pid)
    self._config = config
    self._device = placement.learner_device(config.learner_device)
    print(f"actorq: learner on {placement.device_name(self._device)} "
          f"(learner_device={config.learner_device})", flush=True)
    self._replay = reverb_timeouts.TimeoutClient(replay, reverb_timeout_s)
    self._logger_fn = logging_lib.make_logger_factory(config.logdir)
    env, _, self._parts = _groups(config, config.seed)
    env.close()
    keys = jax.random.split(jax.random.split(jax.random.PRNGKey(config.seed), 4)[0],
                            len(self._parts))
    self._servers: Dict[str, vc.PolicyServer] = {}
    self._prefetch: Dict[str, _Prefetch] = {}
    for p, key in zip(self._parts, keys):
      label = learner_label(self._parts, p)
      with jax.default_device(self._device):
        iterator, calibration = bias_correction.tap(  # int8 bias correction (issue 39)
            p.builder.make_dataset_iterator(replay), p.networks.spec)
        iterator = self._prefetch[p.group.name] = _Prefetch(iterator)
        p.learner = p.builder.make_learner(
            key, p.networks, iterator,
            lambda _, label=label: self._logger_fn(label, time_delta=1.0),
            p.group.environment_spec, replay,
            counting.Counter(counter, prefix="learner", time_delta=0.5))
      p.server = vc.PolicyServer(p.learner, p.networks.spec, calibration=calibration)
      self._servers[p.group.name] = p.server
    self._server = self._parts[0].server
    self._learner = self._parts[0].learner
    self._error: Optional[BaseException] = None
    self._counter_client = counter
    self._num_actors = int(num_actors)
    self._step_locks = [threading.Lock() for _ in self._parts]
    self._step_lock = self._step_locks[0]
    self._ckpt_lock = threading.Lock()
    self._start = time.time()
    self._wall_offset = 0.0
    if restore_path is not None:
      state = checkpointing.load(restore_path)
      saved = state.get("groups") or {}
      if sorted(saved) != sorted(p.group.name for p in self._parts):
        raise checkpointing.CheckpointError(
            f"{restore_path} holds the parameter groups {', '.join(sorted(saved)) or 'none'}, "
            f"this run has {', '.join(p.group.name for p in self._parts)}")
      with jax.default_device(self._device):
        for p in self._parts:
          p.learner.restore(saved[p.group.name]["learner"])
      self._wall_offset = float(state.get("wall_seconds", 0.0))

  def checkpoint(self) -> Optional[str]:
    """Writes a run checkpoint (`checkpointing.save_run`, with Reverb's tables) while every
    group's step loop is paused (a sample a group fetched meanwhile is in neither half:
    one batch lost on resume); returns its path (None: no logdir). Per group
    (``groups[<name>]``): the learner's state, its fp32 policy and learner steps; the
    counter's totals with `learner_steps` the groups' sum; the same top-level keys as a
    single-agent distributed checkpoint otherwise (`restored_counts` reads them)."""
    if self._config.checkpoint_dir is None:
      return None
    with contextlib.ExitStack() as held:
      held.enter_context(self._ckpt_lock)
      for lock in self._step_locks:
        held.enter_context(lock)
      counts = dict(self._counter_client.get_counts())
      for key in nodes_lib._PER_LAUNCH_KEYS:  # pylint: disable=protected-access
        counts.pop(key, None)
      groups = {p.group.name: {
          "learner": p.learner.save(),
          "policy_params": jax.device_get(p.learner.get_variables(["policy"])[0]),
          "learner_steps": int(p.learner.step_count)} for p in self._parts}
      counts[nodes_lib.LEARNER_STEPS] = sum(g["learner_steps"] for g in groups.values())
      actor_steps = int(counts.get(nodes_lib.ACTOR_STEPS, 0))
      state = {
          "multi_agent": True, "groups": groups,
          "policy_params": {name: g["policy_params"] for name, g in groups.items()},
          "learner_steps": counts[nodes_lib.LEARNER_STEPS], "actor_steps": actor_steps,
          "episodes": int(counts.get(nodes_lib.ACTOR_EPISODES, 0)),
          "actor_num_steps": actor_steps // self._num_actors,
          "counter": {"counts": counts, "cache": {}},
          "learning_started": any(g["learner_steps"] > 0 for g in groups.values()),
          "wall_seconds": self._wall_offset + time.time() - self._start,
          "env_id": self._config.env_id, "seed": self._config.seed,
          "num_steps": self._config.num_steps, "launch": "distributed",
          "num_actors": self._num_actors}
      return checkpointing.save_run(self._config.checkpoint_dir, state, step=actor_steps,
                                    keep=self._config.keep_checkpoints,
                                    replay_client=self._replay)

  def get_group_variables(self, group: str, names):
    return self._servers[group].get_variables(names)

  def get_version(self) -> int:
    return min(int(p.learner.get_variables(["version"])[0]) for p in self._parts)

  def profile(self) -> Dict[str, Any]:
    return {"served": {p.group.name: p.server.served() for p in self._parts},
            "learner_steps": int(sum(p.learner.step_count for p in self._parts)),
            "time": time.time(), "timings": {}}

  def _group_steps(self, part, lock: threading.Lock, stop: threading.Event) -> None:
    with jax.default_device(self._device):  # thread-local: this thread's steps
      try:
        min_size = int(part.builder.min_replay_size())
        table = part.builder.replay_table_name()
        while min_size and not stop.is_set():
          if int(self._replay.server_info()[table].current_size) >= min_size:
            break
          stop.wait(0.5)
        while not stop.is_set():
          self._prefetch[part.group.name].fetch()  # waits for data unlocked (`_Prefetch`)
          with lock:
            part.learner.step()
      except BaseException as e:  # pylint: disable=broad-except
        if not stop.is_set():
          self._error = e

  def _step_loop_on_device(self, stop: threading.Event) -> None:
    threads = [threading.Thread(target=self._group_steps, args=(p, lock, stop),
                                name=f"learner-steps-{p.group.name}", daemon=True)
               for p, lock in zip(self._parts, self._step_locks)]
    for t in threads:
      t.start()
    while not stop.is_set() and self._error is None and all(t.is_alive() for t in threads):
      stop.wait(0.5)

  def run(self) -> None:
    try:
      super().run()  # closes the "learner" logger
    finally:
      for label in {learner_label(self._parts, p) for p in self._parts} - {"learner"}:
        self._logger_fn(label).close()


class MultiAgentActorNode(nodes_lib.ActorNode):
  """One actor node: `config.num_envs` whole environments (environment e seeded
  `seed + e`) with all their agents, one batched actor per group (see the module
  docstring), acting in `MultiAgentLoop`; `actor_<i>.csv` has a row per episode with the
  team return and each agent's return.

  Courier methods `status()`, `placement()` and `profile()` as `ActorNode`'s.
  """

  def _prepare(self, seed: int, num_actors: int) -> None:
    config = self._config
    seed = experiment_lib.training_seed(config.seed, seed - config.seed, config.num_envs)
    env, self._groups, self._parts = _groups(config, seed)
    self._environments = [env] + [ma_env.make_multi_agent_environment(config.env_id,
                                                                      seed=seed + e)
                                  for e in range(1, config.num_envs)]
    for p in self._parts:  # exploration on the run's summed steps
      p.policy = dataclasses.replace(
          p.policy, selector=actors.on_shared_schedule(p.policy.selector, num_actors))

  def _make_loop(self, client, learner, counting_hook, seed: int, initial_steps: int):
    config = self._config
    # pylint: disable-next=protected-access
    keys = jax.random.split(nodes_lib._cpu_key(seed), len(self._parts))
    self._adders, group_actors = [], []
    for p, key in zip(self._parts, keys):
      spec = p.group.environment_spec
      adder = p.builder.make_batched_adder(client, spec, p.policy,
                                           config.num_envs * len(p.group.agents))
      actor = actors.batched(p.builder.make_actor(key, p.policy, spec,
                                                  GroupSource(learner, p.group.name)),
                             adder, spec.actions.generate_value())
      actor.num_steps = int(initial_steps)
      self._adders.append(adder)
      group_actors.append(actor)
    self._logger = logging_lib.make_logger_factory(config.logdir)(f"actor_{self._actor_id}")
    return ma_loop.MultiAgentLoop(
        self._environments, self._groups, group_actors, should_stop=self._stop.is_set,
        hooks=[counting_hook, multi_agent.EpisodeLogger(self._logger)],
        max_episode_steps=config.max_episode_steps)

  def placement(self) -> Dict[str, Any]:
    runtimes = [] if self._loop is None else [a.runtime for a in self._loop.actors]
    return {**placement.describe_process(),
            "runtime_devices": [d for r in runtimes for d in r.devices()] or None}

  def run(self) -> None:
    try:
      if self._loop is not None:
        super().run()
    finally:
      for adder in getattr(self, "_adders", []):
        try:
          adder.close()
        except Exception:  # pylint: disable=broad-except
          pass  # the program is stopping: Reverb may be gone
      for env in self._environments:
        env.close()


class MultiAgentEvaluatorNode(nodes_lib.EvaluatorNode):
  """`EvaluatorNode`'s schedule (every `eval_every` actor steps and at the limit) with a
  greedy team evaluation (`launch.multi_agent.evaluate`): eval.csv's `episode_return` is
  the team return, `return_<agent>` each agent's mean return; `policy_version` and
  `learner_steps` are the first group's version."""

  # pylint: disable=super-init-not-called
  def __init__(self, config: experiment_lib.ExperimentConfig, learner, counter,
               launcher_pid: Optional[int] = None):
    processes.watch_launcher(launcher_pid)
    self._config = config
    self._stop = lp.stop_event()
    learner, counter = (nodes_lib.StopAware(learner, self._stop),
                        nodes_lib.StopAware(counter, self._stop))
    seed = config.seed + experiment_lib.EVAL_SEED_OFFSET
    env, self._groups, parts = _groups(config, config.seed)
    env.close()
    self._precision = parts[0].eval_policy.precision
    self._actor = None
    try:
      nodes_lib.wait_for_learner(learner, self._stop)
    except nodes_lib.NodeStopping:
      return
    # pylint: disable-next=protected-access
    keys = jax.random.split(nodes_lib._cpu_key(seed), len(parts))
    self._actors = [actors.batched(
        p.builder.make_actor(key, p.eval_policy, p.group.environment_spec,
                             GroupSource(learner, p.group.name)),
        None, p.group.environment_spec.actions.generate_value())
                    for p, key in zip(parts, keys)]
    self._actor = self._actors[0]
    self._counter = counter
    self._logger = logging_lib.make_logger_factory(config.logdir)("eval")
    self._start = time.time()

  def _evaluate(self):
    for actor in self._actors:
      actor.update(wait=True)
    stats = multi_agent.evaluate(self._config, self._groups, self._actors,
                                 should_stop=self._stop.is_set)
    return stats, self._actor.policy_version

