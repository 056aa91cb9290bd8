"""The Python objects behind the nodes of a distributed program (`launch/distributed.py`).

Each is built *inside* its node (its own process under `local_mp`): environments,
networks, Reverb clients and JAX state are made in `__init__` there, never pickled.
Every node's `run()` returns within about a second of the program's stop event
(`lp.stop_event()`), and no call a node makes can block forever: Courier handles carry
a call timeout, Reverb writes go through `components.reverb_timeouts.TimeoutClient`,
and the learner's sampling (the builder's dataset, which has Reverb rate-limiter
timeouts) runs in a helper thread the node does not wait on after a stop.

Counter keys (one Counter node sums them): `actor_steps`, `actor_episodes`,
`learner_steps` (via the learner's child counter, prefix ``learner``), `limit_reached`.
"""
from __future__ import annotations

import os
import signal
import threading
import time
from typing import Any, Dict, Optional

import jax
import launchpad as lp
import numpy as np
from acme.utils import counting

from actorq.components import checkpointing
from actorq.components import environments
from actorq.components import logging as logging_lib
from actorq.components import reverb_timeouts
from actorq.components import variable_client as vc
from actorq.components.replay import ReplayTimeoutError

ACTOR_STEPS = "actor_steps"
ACTOR_EPISODES = "actor_episodes"
LEARNER_STEPS = "learner_steps"
LIMIT_REACHED = "limit_reached"


def watch_launcher(launcher_pid: Optional[int]) -> None:
  """In a node process started by the launcher: stop this node if the launcher dies.

  A daemon thread checks the parent pid every second; when the launcher is gone
  (the node was orphaned, e.g. the launcher was SIGKILLed) it sends SIGTERM to
  this process, which Launchpad's worker manager turns into the stop event. No-op
  when the node runs inside the launcher's process (`local_mt`) or without a pid.
  """
  if launcher_pid is None or launcher_pid == os.getpid():
    return

  def watch():
    while True:
      time.sleep(1.0)
      if os.getppid() != launcher_pid:
        os.kill(os.getpid(), signal.SIGTERM)
        return

  threading.Thread(target=watch, name="launcher-watchdog", daemon=True).start()


class NodeStopping(Exception):
  """A remote call was abandoned because this node is stopping."""


class StopAware:
  """Calls a Courier client's methods without blocking a stopping node.

  Each call runs in a daemon thread; the caller waits in 0.2 s slices and gets
  `NodeStopping` as soon as `stop` is set (the abandoned call ends at its own Courier
  timeout). Errors of the call are re-raised in the caller.
  """

  def __init__(self, client, stop: threading.Event):
    self._client = client
    self._stop = stop

  def __getattr__(self, method):
    fn = getattr(self._client, method)

    def call(*args, **kwargs):
      box = {}

      def target():
        try:
          box["value"] = fn(*args, **kwargs)
        except BaseException as e:  # pylint: disable=broad-except
          box["error"] = e

      t = threading.Thread(target=target, name=f"courier-{method}", daemon=True)
      t.start()
      while t.is_alive():
        if self._stop.is_set():
          raise NodeStopping(f"{method} abandoned: the node is stopping")
        t.join(0.2)
      if "error" in box:
        raise box["error"]
      return box["value"]

    return call


def wait_for_learner(learner, stop: threading.Event, timeout_s: float = 600.0) -> None:
  """Blocks until the learner answers `get_version()` (it may still be starting).

  Raises:
    NodeStopping: when `stop` is set first; TimeoutError after `timeout_s` seconds.
  """
  deadline = time.time() + timeout_s
  while True:
    try:
      learner.get_version()
      return
    except NodeStopping:
      raise
    except Exception as e:  # pylint: disable=broad-except
      if time.time() > deadline:
        raise TimeoutError(f"the learner did not answer within {timeout_s:.0f} s: {e}") from e
      if stop.wait(1.0):
        raise NodeStopping("stopping while waiting for the learner") from None


def make_tables(builder, env_id: str, seed: int, launcher_pid: Optional[int] = None):
  """The ReverbNode's table factory: the builder's tables, rate limiters kept."""
  watch_launcher(launcher_pid)
  env = environments.make_environment(env_id, seed=seed)
  env_spec = environments.environment_spec(env)
  env.close()
  policy = builder.make_policy(builder.make_networks(env_spec), env_spec, evaluation=False)
  return builder.make_replay_tables(env_spec, policy, rate_limited=True)


def restored_counts(state: Dict[str, Any]) -> Dict[str, float]:
  """The counter totals a resumed program starts from, from a run checkpoint (of a
  distributed or a single-process run): the saved counter's counts, with actor steps,
  episodes and learner steps taken from the checkpoint itself and `limit_reached` dropped.
  """
  saved = state.get("counter") or {}
  counts = dict(saved.get("counts", {})) if isinstance(saved, dict) else {}
  counts.pop(LIMIT_REACHED, None)
  counts[ACTOR_STEPS] = int(state["actor_steps"])
  counts[ACTOR_EPISODES] = int(state.get("episodes", counts.get(ACTOR_EPISODES, 0)))
  counts[LEARNER_STEPS] = int(state["learner_steps"])
  return counts


class CounterNode(counting.Counter):
  """acme's thread-safe Counter as a Courier service (`increment`, `get_counts`),
  starting from `counts` (a resumed run's totals) if given."""

  def __init__(self, launcher_pid: Optional[int] = None,
               counts: Optional[Dict[str, float]] = None):
    super().__init__()
    watch_launcher(launcher_pid)
    if counts:
      self.restore({"counts": dict(counts), "cache": {}})


class PrecisionSource:
  """Actor-side view of the learner node: `get_variables(["policy"])` returns the
  payload (fp32 params or quantized) for one precision, converted on the learner."""

  def __init__(self, learner, precision: str):
    self._learner = learner
    self._precision = precision

  def get_variables(self, names=("policy",)):
    del names
    return [self._learner.get_policy(self._precision)]


class LearnerNode:
  """The learner and the actors' variable source.

  Courier methods:
    get_policy(precision) -> payload of the newest version, converted once per
      version and precision by a `components.variable_client.PolicyPublisher`;
    get_version() -> int learner steps;
    get_variables(names) -> the learner's own variables (fp32);
    checkpoint() -> path of a new run checkpoint in `checkpoint_dir` (None without one).

  Checkpoints are written every `checkpoint_every` minutes (None or 0: only when asked)
  with `checkpointing.save_run`: the step loop is paused while Reverb writes its tables
  and the pickle (learner state, counter totals with `learner_steps` set to the saved
  learner's steps) is written, so the two halves match. `restore_path`: a run
  checkpoint whose learner state this learner starts from.

  Raises (at construction):
    checkpointing.CheckpointError: `restore_path` with a learner that has no `restore`.
  """

  def __init__(self, builder, env_id: str, seed: int, replay, counter, logdir: Optional[str],
               reverb_timeout_s: float, launcher_pid: Optional[int] = None, *,
               checkpoint_dir: Optional[str] = None, checkpoint_every: Optional[float] = None,
               keep_checkpoints: int = 3, num_actors: int = 1, num_steps: int = 0,
               restore_path: Optional[str] = None):
    watch_launcher(launcher_pid)
    env = environments.make_environment(env_id, seed=seed)
    self._env_spec = environments.environment_spec(env)
    env.close()
    self._builder = builder
    self._networks = builder.make_networks(self._env_spec)
    self._replay = reverb_timeouts.TimeoutClient(replay, reverb_timeout_s)
    self._logger_fn = logging_lib.make_logger_factory(logdir)
    iterator = builder.make_dataset_iterator(replay)
    key = jax.random.split(jax.random.PRNGKey(seed), 2)[0]
    self._counter = counting.Counter(counter, prefix="learner", time_delta=0.5)
    self._learner = builder.make_learner(
        key, self._networks, iterator, lambda label: self._logger_fn(label, time_delta=1.0),
        self._env_spec, replay, self._counter)
    self._publishers: Dict[str, vc.PolicyPublisher] = {}
    self._publishers_lock = threading.Lock()
    self._error: Optional[BaseException] = None
    self._counter_client = counter
    self._seed, self._env_id = seed, env_id
    self._ckpt_dir = checkpoint_dir
    self._ckpt_every = float(checkpoint_every or 0.0)
    self._keep = int(keep_checkpoints)
    self._num_actors, self._num_steps = int(num_actors), int(num_steps)
    self._step_lock = threading.Lock()  # held by each learner step and by a checkpoint
    self._ckpt_lock = threading.Lock()
    self._start = time.time()
    self._wall_offset = 0.0
    if restore_path is not None:
      if not hasattr(self._learner, "restore"):
        raise checkpointing.CheckpointError(
            f"{type(self._learner).__name__} has no restore(): this agent cannot resume")
      state = checkpointing.load(restore_path)
      self._learner.restore(state["learner"])
      self._wall_offset = float(state.get("wall_seconds", 0.0))

  def checkpoint(self) -> Optional[str]:
    """Writes a run checkpoint; returns its path (None: no checkpoint_dir, or a learner
    without `save()`)."""
    if self._ckpt_dir is None or not hasattr(self._learner, "save"):
      return None
    with self._ckpt_lock, self._step_lock:
      counts = dict(self._counter_client.get_counts())
      counts.pop(LIMIT_REACHED, None)
      learner_steps = int(self._learner.step_count)
      counts[LEARNER_STEPS] = learner_steps
      actor_steps = int(counts.get(ACTOR_STEPS, 0))
      state = {"learner": self._learner.save(),
               "policy_params": jax.device_get(self._learner.get_variables(["policy"])[0]),
               "learner_steps": learner_steps, "actor_steps": actor_steps,
               "episodes": int(counts.get(ACTOR_EPISODES, 0)),
               "actor_num_steps": actor_steps // self._num_actors,
               "counter": {"counts": counts, "cache": {}},
               "learning_started": learner_steps > 0,
               "wall_seconds": self._wall_offset + time.time() - self._start,
               "env_id": self._env_id, "seed": self._seed, "num_steps": self._num_steps,
               "launch": "distributed", "num_actors": self._num_actors}
      return checkpointing.save_run(self._ckpt_dir, state, step=actor_steps, keep=self._keep,
                                    replay_client=self._replay)

  def get_policy(self, precision: str):
    with self._publishers_lock:
      if precision not in self._publishers:
        self._publishers[precision] = vc.PolicyPublisher(self._learner, self._networks.spec,
                                                         precision)
      publisher = self._publishers[precision]
    return publisher.get_variables(["policy"])[0]

  def get_version(self) -> int:
    return int(self._learner.get_variables(["version"])[0])

  def get_variables(self, names):
    return self._learner.get_variables(names)

  def _min_replay_size(self) -> int:
    fn = getattr(self._builder, "min_replay_size", None)
    return int(fn()) if fn is not None else 0

  def _step_loop(self, stop: threading.Event) -> None:
    try:
      min_size = self._min_replay_size()
      table = self._builder.replay_table_name() if min_size else None
      while min_size and not stop.is_set():
        if int(self._replay.server_info()[table].current_size) >= min_size:
          break
        stop.wait(0.5)
      while not stop.is_set():
        with self._step_lock:
          self._learner.step()
    except BaseException as e:  # pylint: disable=broad-except
      if not stop.is_set():
        self._error = e

  def run(self) -> None:
    stop = lp.stop_event()
    stepper = threading.Thread(target=self._step_loop, args=(stop,), name="learner-steps",
                               daemon=True)
    stepper.start()
    last_checkpoint = time.time()
    try:
      while not stop.wait(0.5):
        if self._error is not None:
          raise RuntimeError(f"learner failed: {self._error!r}") from self._error
        if not stepper.is_alive():
          raise RuntimeError("learner step loop ended without a stop request")
        if self._ckpt_every and time.time() - last_checkpoint >= 60.0 * self._ckpt_every:
          self.checkpoint()
          last_checkpoint = time.time()
    finally:
      stepper.join(timeout=2.0)  # it may sit in a sample until the dataset's timeout
      self._logger_fn("learner").close()


class ActorNode:
  """One actor: its own environment (seeded), adder, variable client and policy.

  `initial_steps`: the actor's step count to start from (its exploration schedule
  continues from there in a resumed run).

  Courier method `status() -> {"steps", "episodes", "policy_version"}`.
  """

  def __init__(self, builder, env_id: str, seed: int, actor_id: int, replay, learner, counter,
               logdir: Optional[str], reverb_timeout_s: float,
               launcher_pid: Optional[int] = None, *, initial_steps: int = 0):
    watch_launcher(launcher_pid)
    self._stop = lp.stop_event()
    learner, counter = StopAware(learner, self._stop), StopAware(counter, self._stop)
    self._env = environments.make_environment(env_id, seed=seed)
    env_spec = environments.environment_spec(self._env)
    networks = builder.make_networks(env_spec)
    policy = builder.make_policy(networks, env_spec, evaluation=False)
    self._actor = None
    self._started = False
    try:
      wait_for_learner(learner, self._stop)
    except NodeStopping:
      return
    self._started = True
    client = reverb_timeouts.TimeoutClient(replay, reverb_timeout_s, should_stop=self._stop.is_set)
    self._adder = builder.make_adder(client, env_spec, policy)
    self._actor = builder.make_actor(jax.random.PRNGKey(seed), policy, env_spec,
                                     PrecisionSource(learner, policy.precision), self._adder)
    if initial_steps and hasattr(self._actor, "num_steps"):
      self._actor.num_steps = int(initial_steps)
    self._counter = counter
    self._label = f"actor_{actor_id}"
    self._logger = logging_lib.make_logger_factory(logdir)(self._label)
    self._precision = policy.precision
    self._steps = int(initial_steps)
    self._episodes = 0

  def status(self) -> Dict[str, Any]:
    return {"steps": self._steps, "episodes": self._episodes,
            "policy_version": self._actor.policy_version if self._actor else -1}

  def run(self) -> None:
    if not self._started:
      return
    pending_steps, pending_episodes, last_sync = 0, 0, time.time()
    try:
      timestep = self._env.reset()
      self._actor.observe_first(timestep)
      episode_return, episode_length, episode_start = 0.0, 0, time.time()
      while not self._stop.is_set():
        action = self._actor.select_action(timestep.observation)
        timestep = self._env.step(action)
        self._actor.observe(action, timestep)
        self._actor.update()
        self._steps += 1
        pending_steps += 1
        episode_return += float(timestep.reward)
        episode_length += 1
        if timestep.last():
          self._episodes += 1
          pending_episodes += 1
          elapsed = time.time() - episode_start
          self._logger.write({"actor_steps": self._steps, "episodes": self._episodes,
                              "episode_return": episode_return,
                              "episode_length": episode_length,
                              "steps_per_second": episode_length / max(elapsed, 1e-9),
                              "policy_version": self._actor.policy_version,
                              "actor_precision": self._precision})
          timestep = self._env.reset()
          self._actor.observe_first(timestep)
          episode_return, episode_length, episode_start = 0.0, 0, time.time()
        if time.time() - last_sync > 0.5:
          self._counter.increment(**{ACTOR_STEPS: pending_steps, ACTOR_EPISODES: pending_episodes})
          pending_steps, pending_episodes, last_sync = 0, 0, time.time()
    except (reverb_timeouts.WriterStoppedError, NodeStopping):
      pass  # the program is stopping while a write or a call waited
    finally:
      self._logger.close()
    # Steps not yet sent (< 0.5 s worth) are dropped: the counter stops with the program.


def evaluate_until_stopped(env, actor, episodes: int, stop: threading.Event):
  """`launch.local.evaluate`, one episode at a time, giving up when `stop` is set.

  Returns the stats dict, or None when stopped before `episodes` episodes ended."""
  from actorq.launch import local
  rows = []
  for _ in range(episodes):
    if stop.is_set():
      return None
    rows.append(local.evaluate(env, actor, 1))
  return {"episode_return": float(np.mean([r["episode_return"] for r in rows])),
          "episode_return_std": float(np.std([r["episode_return"] for r in rows])),
          "episode_length": float(np.mean([r["episode_length"] for r in rows]))}


class EvaluatorNode:
  """Greedy evaluation every `eval_every` learner steps (same precision as the actors
  unless the builder's evaluation policy says otherwise). Writes `eval.csv`."""

  def __init__(self, builder, env_id: str, seed: int, learner, counter, logdir: Optional[str],
               eval_every: int, eval_episodes: int, launcher_pid: Optional[int] = None):
    watch_launcher(launcher_pid)
    if eval_every < 1 or eval_episodes < 1:
      raise ValueError(f"eval_every ({eval_every}) and eval_episodes ({eval_episodes}) must be >= 1")
    self._stop = lp.stop_event()
    learner, counter = StopAware(learner, self._stop), StopAware(counter, self._stop)
    self._env = environments.make_environment(env_id, seed=seed)
    env_spec = environments.environment_spec(self._env)
    networks = builder.make_networks(env_spec)
    policy = builder.make_policy(networks, env_spec, evaluation=True)
    self._precision = policy.precision
    self._learner = learner
    self._actor = None
    try:
      wait_for_learner(learner, self._stop)
    except NodeStopping:
      return
    self._actor = builder.make_actor(jax.random.PRNGKey(seed), policy, env_spec,
                                     PrecisionSource(learner, policy.precision), None)
    self._counter = counter
    self._logger = logging_lib.make_logger_factory(logdir)("eval")
    self._every = int(eval_every)
    self._episodes = int(eval_episodes)
    self._start = time.time()

  def run(self) -> None:
    if self._actor is None:
      return
    try:
      # A resumed learner starts past 0: the next evaluation is at the next multiple.
      next_eval = (int(self._learner.get_version()) // self._every + 1) * self._every
      while not self._stop.is_set():
        version = int(self._learner.get_version())
        if version < next_eval:
          self._stop.wait(1.0)
          continue
        self._actor.update(wait=True)
        counts = self._counter.get_counts()
        stats = evaluate_until_stopped(self._env, self._actor, self._episodes, self._stop)
        if stats is None:
          break
        self._logger.write({"actor_steps": int(counts.get(ACTOR_STEPS, 0)),
                            "learner_steps": self._actor.policy_version,
                            "episodes": int(counts.get(ACTOR_EPISODES, 0)),
                            "wall_seconds": time.time() - self._start,
                            "actor_precision": self._precision,
                            "policy_version": self._actor.policy_version, **stats})
        next_eval = (self._actor.policy_version // self._every + 1) * self._every
    except NodeStopping:
      pass
    finally:
      self._logger.close()


class StepsLimiter:
  """Ends the run at `max_actor_steps` (summed over actors, from the counter).

  When the limit is reached it records `limit_reached` in the counter and returns;
  the launcher takes that as the program's clean finish and stops every node. It
  also writes the counter's totals to `counter.csv` every few seconds.
  """

  def __init__(self, counter, max_actor_steps: int, logdir: Optional[str],
               launcher_pid: Optional[int] = None):
    watch_launcher(launcher_pid)
    if max_actor_steps < 1:
      raise ValueError(f"max_actor_steps must be >= 1, got {max_actor_steps}")
    self._counter = counter
    self._max = int(max_actor_steps)
    self._logger = logging_lib.make_logger_factory(logdir)("counter", time_delta=5.0)

  def run(self) -> None:
    stop = lp.stop_event()
    counter = StopAware(self._counter, stop)
    start = time.time()
    try:
      while not stop.wait(0.5):
        try:
          counts = counter.get_counts()
        except NodeStopping:
          return
        self._logger.write({"wall_seconds": time.time() - start,
                            **{k: counts.get(k, 0) for k in (ACTOR_STEPS, ACTOR_EPISODES,
                                                             LEARNER_STEPS)}})
        if counts.get(ACTOR_STEPS, 0) >= self._max:
          counter.increment(**{LIMIT_REACHED: 1})
          return
    finally:
      self._logger.close()


__all__ = ["restored_counts", "CounterNode", "LearnerNode", "ActorNode", "EvaluatorNode", "StepsLimiter",
           "PrecisionSource", "make_tables", "watch_launcher", "ReplayTimeoutError"]
