"""The Python objects behind the nodes of a distributed program (`launch/distributed.py`).

Each is built *inside* its node (its own process under `local_mp`): environments,
networks, Reverb clients and JAX state are made in `__init__` there, never pickled.
Every node's `run()` returns within about a second of the program's stop event
(`lp.stop_event()`), and no call a node makes can block forever: Courier handles carry
a call timeout, Reverb writes go through `components.reverb_timeouts.TimeoutClient`,
and the learner's sampling (the builder's dataset, which has Reverb rate-limiter
timeouts) runs in a helper thread the node does not wait on after a stop.

Every node runs any builder: the environment family of `experiment.environments_of`
makes, steps and evaluates the environments (for a multi-agent builder, bound to the
environment's parameter groups: whole multi-agent environments on each actor node, one
batched actor per group; every group's table on the one Reverb node; every group's learner
on the one learner node, each stepped in its own thread, each with its `PolicyServer`).

Counter keys (one Counter node sums them): `actor_steps`, `actor_episodes`,
`learner_steps` (via the learner's child counter, prefix ``learner``; a multi-agent
learner adds `learner_<group>_steps` per group), `final_evaluation`
(the evaluator's evaluation at the step limit is written), `limit_reached`, and each actor's
own steps, `actor_steps_key(i)` (the launcher notices an actor that stopped stepping by it).
"""
from __future__ import annotations

import contextlib
import dataclasses
import math
import threading
import time
from typing import Any, Dict, List, Optional, Sequence

import jax
import launchpad as lp
from acme.utils import counting

from actorq import core
from actorq.agents.multiagent_common import decentralized
from actorq.components.acting import actors
from actorq.components.acting import loop as loop_lib
from actorq.components.replay import reverb_timeouts
from actorq.components import checkpointing
from actorq.components.envs import seeding
from actorq.launch import elastic
from actorq.launch import experiment as experiment_lib
from actorq.components import loggers as logging_lib
from actorq.components import placement
from actorq.components import processes
from actorq.components import profiling

ACTOR_STEPS = "actor_steps"
ACTOR_EPISODES = "actor_episodes"
LEARNER_STEPS = "learner_steps"
LIMIT_REACHED = "limit_reached"
FINAL_EVALUATION = "final_evaluation"
# Keys that belong to one launch and are not carried into a resumed program.
_PER_LAUNCH_KEYS = (LIMIT_REACHED, FINAL_EVALUATION)


def actor_steps_key(actor_id: int) -> str:
  """The counter key of actor `actor_id`'s own steps."""
  return f"actor_{int(actor_id)}_steps"


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


def make_tables(config: experiment_lib.ExperimentConfig, launcher_pid: Optional[int] = None):
  """The ReverbNode's table factory: the builder's tables (every parameter group's for a
  multi-agent builder), rate limiters kept."""
  processes.watch_launcher(launcher_pid)
  parts = experiment_lib.parts_of(config)
  return parts.builder.make_replay_tables(parts.environment_spec, parts.policy,
                                          rate_limited=True)


def restored_counts(state: Dict[str, Any]) -> Dict[str, float]:
  """The counter totals a resumed program starts from, from a run checkpoint (of a
  distributed or a single-process run): the saved counter's counts, with actor steps,
  episodes and learner steps taken from the checkpoint itself and `limit_reached` and
  `final_evaluation` dropped (they belong to the launch that wrote it).
  """
  saved = state.get("counter") or {}
  counts = dict(saved.get("counts", {})) if isinstance(saved, dict) else {}
  for key in list(counts):  # a launch's own restarts and dropped nodes are not carried on
    if key in _PER_LAUNCH_KEYS or key.startswith((elastic.RESTART_KEY_PREFIX,
                                                  elastic.DROPPED_KEY_PREFIX)):
      counts.pop(key)
  counts[ACTOR_STEPS] = int(state["actor_steps"])
  counts[ACTOR_EPISODES] = int(state.get("episodes", counts.get(ACTOR_EPISODES, 0)))
  counts[LEARNER_STEPS] = int(state["learner_steps"])
  return counts


class CounterNode(counting.Counter):
  """acme's thread-safe Counter as a Courier service (`increment`, `get_counts`),
  starting from `counts` (a resumed run's totals) if given, and the program's stop.

  The stop (used by `hosts` launches, where no launcher can signal every node): any
  participant may `request_stop(reason)`; every participant polls `heartbeat(title)`
  about once a second, which returns the first reason given (None while the program
  runs), and calls `leave(title)` when it ends cleanly. This node's `run` requests the
  stop itself when a participant named in `participants` has not polled for
  `silent_after_s` seconds after its first poll (its host or process died) or never
  polled within `startup_timeout_s` of this node's start. Once a stop is requested
  (or this node's own stop event is set) it keeps serving until every participant has
  read the reason or left, at most `linger_s` seconds, and then ends. Without
  participants (`local_mt`, `local_mp`) none of this is active: the node ends on its
  stop event, as before.

  Elastic actors (`launch/elastic.py`): a participant in `droppable` (actor and evaluator
  nodes, when restarts are allowed) that falls silent is dropped instead (its host is
  gone; counted under ``dropped/<title>``): the run goes on without it, and a dropped
  node that polls again is told to stop. The stop is requested when no actor is left. A
  host runner about to restart one of its nodes says so first (`restarting`): the node
  then has `startup_timeout_s` to poll again, and the restart is counted under
  ``restarts/<title>``.
  """

  def __init__(self, launcher_pid: Optional[int] = None,
               counts: Optional[Dict[str, float]] = None,
               participants: Sequence[str] = (), silent_after_s: float = 15.0,
               startup_timeout_s: float = 180.0, linger_s: float = 5.0,
               droppable: Sequence[str] = ()):
    super().__init__()
    processes.watch_launcher(launcher_pid)
    if counts:
      self.restore({"counts": dict(counts), "cache": {}})
    self._participants = tuple(participants)
    self._silent_after_s = float(silent_after_s)
    self._startup_timeout_s = float(startup_timeout_s)
    self._linger_s = float(linger_s)
    self._stop_lock = threading.Lock()
    self._stop_reason: Optional[str] = None
    self._stop_at = 0.0
    self._seen: Dict[str, float] = {}  # title -> time.monotonic() of its last poll
    self._left: set = set()
    self._started = time.monotonic()
    self._droppable = set(droppable)
    self._dropped: Dict[str, str] = {}  # title -> why it was dropped
    self._restarting: Dict[str, float] = {}  # title -> time.monotonic() of its restart

  def request_stop(self, reason: str) -> None:
    """Asks every node of the program to stop; the first reason is kept."""
    with self._stop_lock:
      if self._stop_reason is None:
        self._stop_reason = str(reason)
        self._stop_at = time.monotonic()
        print(f"actorq: stop requested: {self._stop_reason}", flush=True)

  def heartbeat(self, title: str) -> Optional[str]:
    """A participant's poll: records that `title` is alive; returns the stop reason
    (None while the program runs)."""
    with self._stop_lock:
      if title in self._dropped:
        return self._dropped[title]
      if title not in self._seen:
        print(f"actorq: {title} joined {time.monotonic() - self._started:.1f} s after the "
              "counter node started", flush=True)
      self._seen[str(title)] = time.monotonic()
      self._restarting.pop(title, None)
      return self._stop_reason

  def restarting(self, title: str) -> Optional[str]:
    """A host runner restarts node `title` (its process died): counts the restart and
    gives the new process `startup_timeout_s` to poll. Returns the stop reason (None
    while the program runs: then restart it)."""
    with self._stop_lock:
      self._seen.pop(str(title), None)
      self._restarting[str(title)] = time.monotonic()
      reason = self._stop_reason
    self.increment(**{elastic.RESTART_KEY_PREFIX + str(title): 1})
    return reason

  def stop_reason(self) -> Optional[str]:
    """The stop's reason (None while the program runs), without counting as a poll."""
    with self._stop_lock:
      return self._stop_reason

  def leave(self, title: str) -> None:
    """`title` ended cleanly: it is no longer expected to poll."""
    with self._stop_lock:
      self._left.add(str(title))

  def active(self) -> List[str]:
    """Participants that have polled within `silent_after_s` and not left, in
    `participants` order (a dead host's nodes drop out once silent)."""
    now = time.monotonic()
    with self._stop_lock:
      return [t for t in self._participants if t not in self._left
              and now - self._seen.get(t, -math.inf) <= self._silent_after_s]

  def _check_participants(self) -> None:
    now = time.monotonic()
    with self._stop_lock:
      seen, left, restarting = dict(self._seen), set(self._left), dict(self._restarting)
    for title in self._participants:
      if title in left:
        continue
      if title in seen and now - seen[title] > self._silent_after_s:
        why = f"{title} silent for {now - seen[title]:.0f} s (its process or host is gone)"
        if title in self._droppable:
          self._drop(title, why)
        else:
          self.request_stop(why)
      elif title not in seen and now - restarting.get(title, self._started) > \
          self._startup_timeout_s:
        self.request_stop(f"{title} did not start within {self._startup_timeout_s:.0f} s"
                          + (" of its restart" if title in restarting else ""))

  def _drop(self, title: str, why: str) -> None:
    """The run goes on without `title` (a droppable participant fell silent); the stop is
    requested when no actor participant is left."""
    with self._stop_lock:
      self._left.add(title)
      self._dropped[title] = f"{title} was dropped from the run: {why}"
      actors = [t for t in self._participants if t.startswith("actor/")]
      left = [t for t in actors if t not in self._dropped]
    self.increment(**{elastic.DROPPED_KEY_PREFIX + title: 1})
    print(f"actorq: {why}: dropped, the run goes on with {len(left)} actor"
          f"{'s' if len(left) != 1 else ''}", flush=True)
    if not left:
      self.request_stop(f"{why}; no actor is left")

  def _all_told(self) -> bool:
    with self._stop_lock:
      return all(t in self._left or self._seen.get(t, 0.0) >= self._stop_at
                 for t in self._participants if t in self._seen)

  def run(self) -> None:
    stop = lp.stop_event()
    while self._stop_reason is None and not stop.wait(0.5):
      if self._participants:
        self._check_participants()
    if not self._participants:
      return
    self.request_stop("the counter node was stopped")
    deadline = time.monotonic() + self._linger_s
    while time.monotonic() < deadline and not self._all_told():
      time.sleep(0.1)


class _Prefetch:
  """An iterator whose next item can be fetched ahead (`fetch`), so a learner part's step
  thread waits for its sample WITHOUT holding its step lock. Otherwise a checkpoint that
  has paused one parameter group (its table then fills, and the actors, which write every
  group's table, block on it) could wait forever for another group's lock held by a step
  waiting for data those blocked actors never write."""

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


class LearnerNode:
  """The learner and, through its `PolicyServer`, the actors' variable source.

  Courier methods:
    get_variables(names) -> for ``"policy/<precision>"`` the payload of the newest
      version at that precision (converted once per version and precision on this
      node), for any other name the learner's own variable (fp32); a multi-agent
      learner's group's as ``"<group>/<name>"`` (`decentralized.GroupServers`);
    get_version() -> int learner steps (a multi-agent learner: its groups' smallest);
    checkpoint() -> path of a new run checkpoint (None without a logdir);
    placement() -> the node's placement (`placement.describe_process`) and learner device;
    profile() -> what this node measured (`profile` below; the distributed benchmark).

  The learner is built, restored and stepped inside `jax.default_device` of
  `placement.learner_device(config.learner_device)` (a GPU when there is one and the choice
  allows it); in `local_mp` the launcher gave this node's process its environment
  (`placement.node_env`). Each learner part (`experiment.split`: the learner, or one per
  parameter group) steps in its own thread, waiting for its table's `min_replay_size()`
  items first and for each sample outside its step lock (`_Prefetch`).

  Checkpoints are written every `config.checkpoint_every` minutes (None or 0: only when
  asked) with `checkpointing.save_run`: every part's step loop is paused while Reverb
  writes its tables and the pickle (`experiment.checkpoint_state`, with the counter's
  totals and `learner_steps` set to the saved learner's steps; per group under
  ``groups[<name>]`` for a multi-agent learner) is written, so the two halves match (a
  sample fetched meanwhile is in neither: one batch lost on resume).
  `restore_path`: a run checkpoint whose learner state this learner starts from.
  """

  def __init__(self, config: experiment_lib.ExperimentConfig, replay, counter,
               num_actors: int, reverb_timeout_s: float, launcher_pid: Optional[int] = None,
               restore_path: Optional[str] = None):
    processes.watch_launcher(launcher_pid)
    self._config = config
    self._device = placement.learner_device(config.learner_device)
    print(f"actorq: learner on {placement.device_name(self._device)} "
          f"(learner_device={config.learner_device})",
          flush=True)
    parts = experiment_lib.parts_of(config)
    builder = self._builder = parts.builder
    self._replay = reverb_timeouts.TimeoutClient(replay, reverb_timeout_s)
    self._logger_fn = logging_lib.make_logger_factory(config.logdir)
    self._counter = counting.Counter(counter, prefix="learner", time_delta=0.5)
    with jax.default_device(self._device):
      iterator, calibrations = experiment_lib.tapped_dataset(builder, parts.networks, replay)
      self._prefetch = {n: _Prefetch(it) for n, it in experiment_lib.split(iterator).items()}
      if "" in self._prefetch:
        iterator = self._prefetch[""]
      else:
        iterator = decentralized.Groups(self._prefetch)
      key = jax.random.split(jax.random.PRNGKey(config.seed), 2)[0]
      self._learner = builder.make_learner(
          key, parts.networks, iterator, lambda label: self._logger_fn(label, time_delta=1.0),
          parts.environment_spec, replay, self._counter)
      if config.init_from is not None and restore_path is None:  # agents/warm_start.py
        config.init_from.apply(self._learner)
    self._server = experiment_lib.policy_server(self._learner, parts.networks, calibrations)
    self._parts = experiment_lib.split(self._learner)
    self._error: Optional[BaseException] = None
    self._counter_client = counter
    self._num_actors = int(num_actors)
    # Each held by its part's learner steps; all of them by a checkpoint.
    self._step_locks = {name: threading.Lock() for name in self._parts}
    self._ckpt_lock = threading.Lock()
    self._start = time.time()
    self._wall_offset = 0.0
    if restore_path is not None:
      state = checkpointing.load(restore_path)
      saved = experiment_lib.part_states(state, self._parts, restore_path)
      with jax.default_device(self._device):
        for name, learner in self._parts.items():
          learner.restore(saved[name]["learner"])
      self._wall_offset = float(state.get("wall_seconds", 0.0))

  def checkpoint(self) -> Optional[str]:
    """Writes a run checkpoint; returns its path (None: no logdir)."""
    if self._config.checkpoint_dir is None:
      return None
    with self._ckpt_lock, self._steps_paused():
      counts = dict(self._counter_client.get_counts())
      for key in _PER_LAUNCH_KEYS:
        counts.pop(key, None)
      counts[LEARNER_STEPS] = int(self._learner.step_count)
      actor_steps = int(counts.get(ACTOR_STEPS, 0))
      state = experiment_lib.checkpoint_state(
          self._config, self._learner, actor_steps=actor_steps,
          episodes=int(counts.get(ACTOR_EPISODES, 0)),
          actor_num_steps=actor_steps // self._num_actors, counts=counts,
          learning_started=self._learner.step_count > 0,
          wall_seconds=self._wall_offset + time.time() - self._start,
          launch="distributed", num_actors=self._num_actors)
      return checkpointing.save_run(self._config.checkpoint_dir, state, step=actor_steps,
                                    keep=self._config.keep_checkpoints,
                                    replay_client=self._replay)

  def get_variables(self, names):
    return self._server.get_variables(names)

  def learner_call(self, method: str, *args):
    """Runs one of the learner's `REMOTE_STEPS` (a population's `record_round`) with every
    part's step loop paused; returns its result. Raises ValueError: `method` is not one."""
    if method not in getattr(self._learner, "REMOTE_STEPS", ()):
      raise ValueError(f"{type(self._learner).__name__} has no remote step {method!r}")
    with self._steps_paused(), jax.default_device(self._device):
      return getattr(self._learner, method)(*args)

  @contextlib.contextmanager
  def _steps_paused(self):
    """Holds every part's step lock (what a checkpoint and a remote step need)."""
    with contextlib.ExitStack() as held:
      for lock in self._step_locks.values():
        held.enter_context(lock)
      yield

  def get_version(self) -> int:
    return int(self._learner.get_variables(["version"])[0])

  def placement(self) -> Dict[str, Any]:
    """This node's process placement (`placement.describe_process`) and the learner's device."""
    return {**placement.describe_process(),
            "learner_device": placement.device_name(self._device)}

  def profile(self) -> Dict[str, Any]:
    """What this node has measured, as plain numbers: ``"served"``, precision -> the
    variable source's counts (`PolicyServer.served`: pulls, bytes_sent, payload_bytes,
    conversions, convert_seconds; per group for a multi-agent learner);
    ``"learner_steps"``; ``"time"`` (this node's `time.time()`); and, when the builder is
    instrumented (`components.profiling.InstrumentedBuilder`), its `snapshot()` under
    ``"timings"``."""
    snapshot = getattr(self._config.builder, "snapshot", None)
    return {"served": self._server.served(), "learner_steps": int(self._learner.step_count),
            "time": time.time(), "timings": snapshot() if callable(snapshot) else {}}

  def _part_steps(self, name: str, stop: threading.Event) -> None:
    """Steps learner part `name` until `stop` (in its own thread)."""
    builder = self._builder if name == "" else self._builder.builders[name]
    learner, lock = self._parts[name], self._step_locks[name]
    with jax.default_device(self._device):  # thread-local: this thread's steps
      try:
        min_size = int(builder.min_replay_size())
        table = builder.replay_table_name()
        while min_size and not stop.is_set():
          if int(self._replay.server_info()[table].current_size) >= min_size:
            break
          stop.wait(0.5)
        while not stop.is_set():
          self._prefetch[name].fetch()  # waits for data unlocked (`_Prefetch`)
          with lock:
            if stop.is_set():  # no step once `run` has seen the stop (see its `finally`)
              break
            learner.step()
      except BaseException as e:  # pylint: disable=broad-except
        if not stop.is_set():
          self._error = e

  def run(self) -> None:
    stop = lp.stop_event()
    steppers = [threading.Thread(target=self._part_steps, args=(name, stop),
                                 name=f"learner-steps{'-' + name if name else ''}", daemon=True)
                for name in self._parts]
    for stepper in steppers:
      stepper.start()
    every = float(self._config.checkpoint_every or 0.0)
    last_checkpoint = time.time()
    try:
      while not stop.wait(0.5):
        if self._error is not None:
          raise RuntimeError(f"learner failed: {self._error!r}") from self._error
        if not all(stepper.is_alive() for stepper in steppers):
          raise RuntimeError("learner step loop ended without a stop request")
        if every and time.time() - last_checkpoint >= 60.0 * every:
          self.checkpoint()
          last_checkpoint = time.time()
    finally:
      # Wait (2 s at most in all) for a step in progress, not for the step threads: one may
      # sit in a rate-limited sample until the dataset's timeout (it ends on its own, a
      # daemon). Taking a part's step lock after the stop means it steps no more.
      deadline = time.monotonic() + 2.0
      for name in self._parts:
        lock = self._step_locks[name]
        if lock.acquire(timeout=max(0.0, deadline - time.monotonic())):
          lock.release()
      self._logger_fn.close_all()


class _Counting(loop_lib.Hook):
  """Sends the actor's steps (to the total and to its own key) and episodes to the
  counter node at its first step and then about every 0.5 s; steps not yet sent when the
  program stops are dropped (the counter stops with it)."""

  def __init__(self, counter, actor_id: int, period_s: float = 0.5):
    self._counter = counter
    self._own = actor_steps_key(actor_id)
    self._period_s = period_s
    self._steps, self._episodes, self._last = 0, 0, 0.0

  def on_step(self, loop, action, timestep):
    self._steps += 1
    if time.time() - self._last > self._period_s:
      self._counter.increment(**{ACTOR_STEPS: self._steps, self._own: self._steps,
                                 ACTOR_EPISODES: self._episodes})
      self._steps, self._episodes, self._last = 0, 0, time.time()

  def on_episode_end(self, loop, stats):
    self._episodes += 1


class ActorNode:
  """One actor: its own environment (seeded), adder, variable client and policy.

  `initial_steps`: the actor's step count to start from (its exploration schedule
  continues from there in a resumed run). `num_actors`: the program's actor nodes; the
  policy's exploration schedule (epsilon decay, random warm-up) runs on this actor's steps
  times `num_actors` (`actors.on_shared_schedule`), i.e. on the run's summed actor steps,
  as every other schedule of the run and as in a single-process run.

  Courier methods `status() -> {"steps", "episodes", "policy_version"}`, `placement()` and
  `profile()` (`status()`, this node's `time.time()` and, with an instrumented builder,
  its actor's timings).
  Its policy runtime computes on the CPU; in `local_mp` its process cannot see a GPU
  (`placement.node_env`: ``JAX_PLATFORMS=cpu``, ``CUDA_VISIBLE_DEVICES=""``, one thread).

  A restarted actor (its process died and the supervisor started it again,
  `launch/elastic.py`; restart number k > 0 in `elastic.RESTART_ENV`) acts on
  `elastic.restart_seed(seed, k)` (environment and PRNG key: never its predecessor's
  stream) and continues the exploration schedule from the run's summed actor steps
  (the counter's, as a resumed actor does), connecting anew to replay, learner and counter.
  """
  fresh_seed_on_restart = True  # make_program lets supervisors restart this node

  def __init__(self, config: experiment_lib.ExperimentConfig, actor_id: int, seed: int,
               replay, learner, counter, reverb_timeout_s: float,
               launcher_pid: Optional[int] = None, *, initial_steps: int = 0,
               num_actors: int = 1):
    processes.watch_launcher(launcher_pid)
    self._stop = lp.stop_event()
    self._config = config
    self._env_id, self._actor_id = config.env_id, actor_id
    learner, counter = StopAware(learner, self._stop), StopAware(counter, self._stop)
    restart = elastic.restart_number()
    if restart:
      first, seed = seed, elastic.restart_seed(seed, restart)
      print(f"actorq: actor/{actor_id} restart {restart}: seed {seed} (first start: {first})",
            flush=True)
    self._prepare(seed, num_actors)
    self._loop = None
    try:
      wait_for_learner(learner, self._stop)
      if restart:  # the schedule goes on from the run's steps, not the launch's start
        initial_steps = int(counter.get_counts().get(ACTOR_STEPS, 0)) // int(num_actors)
    except NodeStopping:
      return
    client = reverb_timeouts.TimeoutClient(replay, reverb_timeout_s, should_stop=self._stop.is_set)
    self._loop = self._make_loop(client, learner, _Counting(counter, actor_id), seed,
                                 initial_steps)
    self._loop.steps = int(initial_steps)

  def _prepare(self, seed: int, num_actors: int) -> None:
    """What is built before the learner answers: the environments and the agent's parts
    (its policy's exploration on the run's summed steps; every group's)."""
    config = self._config
    self._family = experiment_lib.environments_of(config)
    self._env = self._family.make(config, seed)
    self._parts = experiment_lib.parts_for(config, self._env)
    shared = {name: dataclasses.replace(
        policy, selector=actors.on_shared_schedule(policy.selector, num_actors))
              for name, policy in experiment_lib.split(self._parts.policy).items()}
    self._parts.policy = shared[""] if "" in shared else decentralized.Groups(shared)

  def _make_loop(self, client, learner, counting_hook: loop_lib.Hook, seed: int,
                 initial_steps: int):
    """The acting loop (its adder writing through `client`, its variable client pulling
    from `learner`, `counting_hook` among its hooks); sets `_logger` (`actor_<i>.csv`)."""
    config, parts = self._config, self._parts
    self._adder, self._actor = self._family.make_actor(config, parts, _cpu_key(seed), client,
                                                       learner)
    for actor in experiment_lib.split(self._actor).values():
      actor.num_steps = int(initial_steps)
    self._logger = logging_lib.make_logger_factory(config.logdir)(f"actor_{self._actor_id}")
    return self._family.make_loop(
        config, self._env, self._actor, should_stop=self._stop.is_set,
        hooks=[counting_hook, self._family.episode_logger(self._logger, parts.policy.precision)])

  def status(self) -> Dict[str, Any]:
    if self._loop is None:
      return {"steps": 0, "episodes": 0, "policy_version": -1}
    return {"steps": self._loop.steps, "episodes": self._loop.episodes,
            "policy_version": self._loop.actor.policy_version}

  def profile(self) -> Dict[str, Any]:
    """`status()`, ``"time"`` and ``"timings"``: {"actor": `profiling.actor_snapshot` of
    this node's actor} ({} when the builder is not instrumented)."""
    actor = None if self._loop is None else self._loop.actor
    snap = profiling.actor_snapshot(actor)
    return {**self.status(), "time": time.time(), "timings": {"actor": snap} if snap else {}}

  def placement(self) -> Dict[str, Any]:
    """This node's process placement (`placement.describe_process`) and the devices its
    policy runtime computes on (None before the actor was built)."""
    runtimes = ([] if self._loop is None else
                [a.runtime for a in experiment_lib.split(self._actor).values()])
    return {**placement.describe_process(),
            "runtime_devices": [d for r in runtimes for d in r.devices()] or None}

  def run(self) -> None:
    if self._loop is None:
      return
    try:
      self._loop.run()
    except (reverb_timeouts.WriterStoppedError, NodeStopping):
      pass  # the program is stopping while a write or a call waited
    except core.EnvironmentFailure as e:
      raise core.EnvironmentFailure(f"{self._env_id} (actor {self._actor_id}): {e}") from e
    finally:
      self._logger.close()
      self._family.close_acting(self._adder, self._env)


def _cpu_key(seed: int):
  """An actor's PRNG key, committed to the CPU with the actor (its seed is drawn with jax:
  computations on a committed array run where it lives)."""
  cpu = placement.cpu_device()
  with jax.default_device(cpu):
    return jax.device_put(jax.random.PRNGKey(seed), cpu)


def next_evaluation(actor_steps: int, every: int, limit: int) -> int:
  """The actor-step count (summed over actors) at which the evaluator evaluates next, having
  last looked at `actor_steps`: the next multiple of `every` above it, or the step limit
  `limit` if that comes first (so the last evaluation is at the limit, as in a
  single-process run, also when `limit` is no multiple of `every` or the run is shorter
  than `every`). At or past the limit: `limit` (evaluate now)."""
  if actor_steps >= limit:
    return int(limit)
  return int(min((actor_steps // every + 1) * every, limit))


# Seconds between the evaluator's reads of the counter while it waits for the next
# evaluation's step; one Courier call to the counter per read. 1 s, as before 3adbfa5:
# at 0.25 s a plain fresh-clone CI once found a resumed multi-agent test_mt program's
# final checkpoint missing (the launcher's 60 s wait for the learner's checkpoint ran
# out), and the ~0.4 s it saves per run is not worth an unexplained race at a stop.
EVALUATOR_POLL_S = 1.0


class EvaluatorNode:
  """Greedy evaluation every `config.eval_every` actor steps (summed over actors, read
  from the counter every `EVALUATOR_POLL_S` seconds) and once more at `config.num_steps`
  (`next_evaluation`), at the builder's evaluation precision. Writes `eval.csv`.

  After the evaluation at the limit is written it increments the counter's
  `final_evaluation` and evaluates no more; the `StepsLimiter` waits for that before it
  ends the run. Actors and learner go on meanwhile (a paused actor would starve the
  learner's rate-limited sampling into its timeout): the row's `actor_steps` (>= the limit)
  and `policy_version` say which policy was evaluated, the one the learner held when the
  evaluation began.
  """

  def __init__(self, config: experiment_lib.ExperimentConfig, learner, counter,
               launcher_pid: Optional[int] = None):
    processes.watch_launcher(launcher_pid)
    self._config = config
    self._stop = lp.stop_event()
    learner, counter = StopAware(learner, self._stop), StopAware(counter, self._stop)
    seed = config.seed + seeding.EVAL_SEED_OFFSET
    parts = self._parts = experiment_lib.parts_of(config)
    self._family = experiment_lib.environments_of(config)
    self._precision = parts.eval_policy.precision
    self._actor = None
    try:
      wait_for_learner(learner, self._stop)
    except NodeStopping:
      return
    self._actor = parts.builder.make_actor(_cpu_key(seed), parts.eval_policy,
                                           parts.environment_spec, learner, None)
    self._counter = counter
    self._logger = logging_lib.make_logger_factory(config.logdir)("eval")
    self._start = time.time()

  def _evaluate(self, actor_steps: int):
    """`(stats, policy version)` of one evaluation with the newest parameters at
    `actor_steps` (the counter's); stats None when the node's stop ended it first."""
    self._actor.update(wait=True)
    stats = self._family.evaluate(self._config, self._parts, self._actor,
                                  self._config.seed + seeding.EVAL_SEED_OFFSET,
                                  should_stop=self._stop.is_set, actor_steps=actor_steps)
    return stats, self._actor.policy_version

  def run(self) -> None:
    if self._actor is None:
      return
    every, limit = int(self._config.eval_every), int(self._config.num_steps)
    final_written = False
    try:
      # A resumed run starts past 0: the next evaluation is at the next multiple.
      next_eval = next_evaluation(int(self._counter.get_counts().get(ACTOR_STEPS, 0)), every,
                                  limit)
      while not self._stop.is_set():
        counts = self._counter.get_counts()
        actor_steps = int(counts.get(ACTOR_STEPS, 0))
        if final_written or actor_steps < next_eval:
          self._stop.wait(EVALUATOR_POLL_S)
          continue
        try:
          stats, version = self._evaluate(actor_steps)
        except core.EnvironmentFailure as e:
          raise core.EnvironmentFailure(f"{self._config.env_id} (evaluator): {e}") from e
        if stats is None:
          break
        self._logger.write(experiment_lib.evaluation_row(
            stats, actor_steps=actor_steps, learner_steps=version,
            episodes=int(counts.get(ACTOR_EPISODES, 0)), wall_seconds=time.time() - self._start,
            precision=self._precision, policy_version=version))
        if actor_steps >= limit:
          # The row is on disk (rows are flushed as written) before the limiter is told.
          self._counter.increment(**{FINAL_EVALUATION: 1})
          final_written = True
        next_eval = next_evaluation(actor_steps, every, limit)
    except NodeStopping:
      pass
    finally:
      self._logger.close()


class StepsLimiter:
  """Ends the run at `max_actor_steps` (summed over actors, from the counter).

  When the limit is reached it waits for the evaluator's evaluation at the limit (the
  counter's `final_evaluation`, see `EvaluatorNode`) for at most `final_eval_timeout_s`
  seconds (0: no wait), then records `limit_reached` in the counter and returns; the
  launcher takes that as the program's clean finish and stops every node. A wait that
  runs out is said in one line on stdout (the node's log) and the run still finishes. It
  also writes the counter's totals to `counter.csv` every few seconds.

  Raises:
    ValueError: `max_actor_steps` < 1 or `final_eval_timeout_s` < 0.
  """

  def __init__(self, counter, max_actor_steps: int, logdir: Optional[str],
               launcher_pid: Optional[int] = None, final_eval_timeout_s: float = 0.0):
    processes.watch_launcher(launcher_pid)
    if max_actor_steps < 1:
      raise ValueError(f"max_actor_steps must be >= 1, got {max_actor_steps}")
    if not final_eval_timeout_s >= 0:
      raise ValueError(f"final_eval_timeout_s must be >= 0 seconds, got {final_eval_timeout_s!r}")
    self._counter = counter
    self._max = int(max_actor_steps)
    self._wait_s = float(final_eval_timeout_s)
    self._logger = logging_lib.make_logger_factory(logdir)("counter", time_delta=5.0)

  def run(self) -> None:
    stop = lp.stop_event()
    counter = StopAware(self._counter, stop)
    start = time.time()
    reached_at: Optional[float] = None  # time.monotonic() when the limit was first seen
    try:
      while not stop.wait(0.5):
        try:
          counts = counter.get_counts()
        except NodeStopping:
          return
        self._logger.write({"wall_seconds": time.time() - start,
                            **{k: counts.get(k, 0) for k in (ACTOR_STEPS, ACTOR_EPISODES,
                                                             LEARNER_STEPS)}})
        if counts.get(ACTOR_STEPS, 0) < self._max:
          continue
        if reached_at is None:
          reached_at = time.monotonic()
        evaluated = counts.get(FINAL_EVALUATION, 0) >= 1
        if not evaluated and time.monotonic() - reached_at < self._wait_s:
          continue
        if not evaluated and self._wait_s > 0:
          print(f"actorq: no evaluation at the step limit within {self._wait_s:g} s; the run "
                "ends without it", flush=True)
        try:
          counter.increment(**{LIMIT_REACHED: 1})
        except NodeStopping:
          pass
        return
    finally:
      self._logger.close()
