"""Distributed training: any experiment (`launch.experiment.ExperimentConfig`) as a
Launchpad program.

    program = make_program(ExperimentConfig(builder, "gym:CartPole-v1", num_steps=150_000,
                                            logdir="runs/x"), num_actors=2)
    result = launch(program)            # blocks; result.exit_code is 0 only on a clean finish

The nodes (`distributed_nodes`) run any builder, a multi-agent one included (its parameter
groups: every group's table on the one Reverb node, every group's learner on the one
learner node, whole multi-agent environments on each actor node; see
`agents/multiagent_common/decentralized.py`).

Groups (`describe(program)` lists them; `actorq train --dry-run` prints it):
  replay     a ReverbNode with the builder's tables (`rate_limited=True`: samples-per-insert
             is enforced by Reverb) and Reverb's checkpointer
             (`components.checkpointing.reverb_checkpointer(<logdir>/checkpoints, ...)`);
  counter    acme's Counter as a Courier service;
  learner    the builder's learner, also the actors' variable source: its `PolicyServer`
             converts each parameter version once per precision (int8 payloads are made on
             the learner, actors pull ``policy/<precision>``); it writes the run checkpoints;
  actor      N actors, each with its own seed (seed + 1 + i), environment, adder and
             variable client, acting in `components.loop.ActorLoop`; exploration
             schedules run on the summed actor steps (own steps x N,
             `actors.on_shared_schedule`);
  evaluator  greedy evaluation every `eval_every` actor steps (summed over actors, from the
             counter) and at `num_steps`, `<logdir>/eval.csv`;
  limiter    ends the run at `num_steps` actor steps (summed over actors), once the
             evaluation there is written (`final_eval_timeout_s` at most).

Checkpoints (`<logdir>/checkpoints`, `components.checkpointing.save_run`, the same format
as a single-process run): the learner node writes one every `checkpoint_every` minutes,
and the launcher asks it for one when the run finishes or is signalled. Each holds
`experiment.checkpoint_state` (the learner's state, the counter's totals with
`learner_steps` set to the saved learner's steps) and, beside it, the Reverb tables (Reverb's checkpointer, triggered by the
learner while its step loop is paused). `ExperimentConfig(resume=True)` continues from
the newest readable one: the Reverb node loads the tables (and their rate limiters), the
counter node starts from the saved totals (so the limiter counts on from them), the
learner restores its state, and each actor's exploration schedule continues from
`actor_steps // num_actors`. Not restored: episodes in progress, actors' RNG streams
(a resumed actor i uses seed `seed + 1 + i + actor_steps`).

Launch types (`launch/supervisors.py`: one Supervisor class each in the table
`supervisors.SUPERVISORS`, which `launch` looks the name up in and polls):
`local_mt` / `test_mt` (threads, through `lp.launch`), `local_mp` (one
process per node) and `hosts` (nodes on several machines, `launch/hosts.py`; the
program must be made with `make_program(..., hosts=HostsConfig(...))`). For `local_mp`
this module starts the node processes itself from the commands Launchpad's own local_mp
launcher builds: Launchpad 0.5.0's launch returns at once (launchpad#12) and, in
`current_terminal` mode, watches wrapper shells whose exit codes it cannot see and whose
`sed` dies first on SIGTERM. Here every node is a direct child with its exit code known,
its output written to `<logdir>/logs/<group>_<i>.log` and echoed to the terminal with a
`[group/i]` prefix (`components/processes.py`). For `hosts` the same supervision runs one
host runner per host (`[host/i]`), each of which supervises its host's nodes.

Placement (`actorq.components.placement`): the learner computes on
`config.learner_device` (auto: a GPU when jax sees one); actors, evaluator and replay on
the CPU. Under `local_mp` each node process starts with `placement.node_env(group, ...)`
on top of the launcher's environment: every node but the learner gets ``JAX_PLATFORMS=cpu``
and ``CUDA_VISIBLE_DEVICES=""`` (so jax there never starts a GPU backend nor reserves GPU
memory) and one thread (``--xla_cpu_multi_thread_eigen=false``, ``TF_NUM_INTRAOP_THREADS``,
``TF_NUM_INTEROP_THREADS`` and ``OMP_NUM_THREADS`` = 1); the learner gets
``TF_NUM_INTRAOP_THREADS`` = ``OMP_NUM_THREADS`` = max(1, cores - actors), and the CPU-only
pair too with `learner_device="cpu"`. Under `hosts` the same overrides travel in the program
file (the learner's thread count from the actors placed on its own host) and each host runner
applies them to the node processes it starts. Under `local_mt` every node is a thread of one process,
whose jax backends are shared: the learner's thread computes inside
`jax.default_device(learner device)`, and the actors' policy runtimes commit their
parameters to the CPU, so no actor array or computation is on the GPU, but the process
(the learner's) holds the GPU backend; thread counts cannot differ per thread there.

Stopping (acme#137, acme#213): the run ends when the limiter records the limit (clean
finish, exit 0), when any node fails or exits on its own (exit 1; the cause is the
node's exception, for `local_mp` the last exception line of its output), when an actor
has stopped answering, i.e. taken no step for `actor_stall_s` (or no first step within
`actor_start_s` of the launch; exit 1), or on
SIGINT/SIGTERM to the launcher (exit 128 + signal). A failure is printed as one line
(`actorq: stopped: ...`, stderr) before the nodes are stopped. In every case each node
gets its stop event (SIGTERM to a node process; on a signal to a `local_mp` launcher the
learner is first given up to 5 s for a checkpoint), the launcher waits `stop_grace_s`
(20 s) and then SIGKILLs whatever is left of each node's process tree, so nothing
outlives the launcher and the whole program is gone within 30 s. A node process whose
launcher vanished stops itself.
Under `local_mt` a node thread that does not stop (e.g. an environment step that never
returns) cannot be killed: after `stop_grace_s` the launcher returns anyway, naming it in
`DistributedResult.abandoned`, and `exit_now(result)` ends the process.

Elastic actors (`local_mp`, `hosts`; `launch/elastic.py`): an actor or evaluator node whose
process dies (an exception, a segfault, SIGKILL, the OOM killer) is first restarted in its
place, after a backoff of 1, 2, 4, ... s, up to `options.max_actor_restarts` times per node
(`--max-actor-restarts`, default 3), on a fresh seed, while the other nodes run on; only
then does its death stop the program. Learner, replay, counter and limiter are never
restarted. Restarts are counted in `DistributedResult.restarts`, the summary line and
``<logdir>/restarts.csv``. Under `hosts`, an actor host that falls silent for
`silent_after_s` is dropped and the run goes on with the other actors
(`DistributedResult.dropped`; the stop comes when no actor is left).

Stopping a `hosts` program: the launcher cannot signal nodes on other machines, so every
stop goes through the counter node (`CounterNode.request_stop`), which every node and
the launcher poll every `heartbeat_s`: a node that fails or ends on its own requests the
stop itself (an actor or evaluator that its runner restarts leaves it to the runner); a
host runner whose node died (and is not restarted) stops its host's other nodes and exits, and
the launcher requests the stop when a runner exits; the counter requests it when a
participant has been silent for `silent_after_s` (a host died, or the launcher was
killed); a node that cannot reach the counter for `silent_after_s` stops itself. After a
request every node stops within about `heartbeat_s` + its own stop time, and the launcher
then waits `stop_grace_s` for its host runners before killing what is left of them.
"""
from __future__ import annotations

import dataclasses
import os
import signal
import sys
import threading
import time
from typing import Any, Dict, List, Optional

import launchpad as lp

from actorq.components import fault_points
from actorq.components import checkpointing
from actorq.launch import distributed_nodes as nodes_lib
from actorq.launch import elastic
from actorq.launch import experiment as experiment_lib
from actorq.launch import hosts as hosts_lib
from actorq.components import run_dir
from actorq.components import processes
from actorq.launch import supervisors

GROUPS = ("replay", "counter", "learner", "actor", "evaluator", "limiter")

EXIT_FINISHED = 0
EXIT_FAILED = 1


@dataclasses.dataclass(frozen=True)
class DistributedOptions:
  """How a distributed program's nodes talk and stop (the experiment itself is an
  `ExperimentConfig`).

  Attributes:
    reverb_timeout_s: the longest one Reverb write or server_info may block (seconds).
    courier_timeout_s: the longest one Courier call (variables, counter) may take.
    stop_grace_s: seconds a node has to stop before it is killed, in (0, 25].
    actor_stall_s: an actor that took steps and then takes none for this many seconds
      has stopped answering: the program fails naming it.
    actor_start_s: the same for an actor's first step, counted from the launch (its
      start-up: imports, environment, waiting for the learner, which itself gives up
      after 600 s).
    heartbeat_s: (`hosts`) seconds between a node's polls of the program's stop.
    silent_after_s: (`hosts`) seconds without a poll after which the counter node
      takes a participant for dead (and a node the counter node) and stops the program.
    startup_timeout_s: (`hosts`) seconds a node may take to poll for the first time
      (its host runner starting, imports) before the program is stopped.
    final_eval_timeout_s: at the step limit, the longest the limiter waits for the
      evaluator's evaluation at the limit before it ends the run anyway (>= 0; 0: no wait,
      the last evaluation is whichever came before the limit).
    final_checkpoint_timeout_s: at the step limit, the longest the launcher waits for the
      learner node's final checkpoint (> 0). The checkpoint waits for every learner
      part's step in progress, and a part's first step compiles its update: on a loaded
      2-core machine that took over 60 s for three parameter groups at once, so a run
      that reaches its limit within its learner's first steps (a resumed run with few
      steps left) needs this wait. A wait that runs out is said in one line on stderr;
      the newest earlier checkpoint is then the run's last.
    max_actor_restarts: (`local_mp`, `hosts`) restarts allowed per actor or evaluator
      node whose process dies (`launch/elastic.py`; >= 0; 0: any node's death stops the
      program). Under `hosts` an actor host that falls silent for `silent_after_s` is
      dropped and the run goes on with the other actors. `local_mt` restarts nothing.
  """
  reverb_timeout_s: float = 120.0
  courier_timeout_s: float = 60.0
  stop_grace_s: float = 20.0
  actor_stall_s: float = 300.0
  actor_start_s: float = 900.0
  heartbeat_s: float = 1.0
  silent_after_s: float = 15.0
  startup_timeout_s: float = 180.0
  final_eval_timeout_s: float = 600.0
  final_checkpoint_timeout_s: float = 600.0
  max_actor_restarts: int = elastic.DEFAULT_MAX_RESTARTS

  def __post_init__(self):
    if (isinstance(self.max_actor_restarts, bool) or not isinstance(self.max_actor_restarts, int)
        or self.max_actor_restarts < 0):
      raise ValueError(f"max_actor_restarts must be an integer >= 0, got "
                       f"{self.max_actor_restarts!r}")
    for name in ("reverb_timeout_s", "courier_timeout_s", "actor_stall_s", "actor_start_s",
                 "heartbeat_s", "startup_timeout_s", "final_checkpoint_timeout_s"):
      if not getattr(self, name) > 0:
        raise ValueError(f"{name} must be > 0 seconds, got {getattr(self, name)!r}")
    if not self.silent_after_s >= 3 * self.heartbeat_s:
      raise ValueError(f"silent_after_s must be >= 3 heartbeats ({3 * self.heartbeat_s} s), "
                       f"got {self.silent_after_s!r}")
    if not self.final_eval_timeout_s >= 0:
      raise ValueError(f"final_eval_timeout_s must be >= 0 seconds, got "
                       f"{self.final_eval_timeout_s!r}")
    if not 0 < self.stop_grace_s <= 25:
      raise ValueError(f"stop_grace_s must be in (0, 25] seconds, got {self.stop_grace_s}")


@dataclasses.dataclass
class DistributedProgram:
  """An `lp.Program` plus what the launcher needs to supervise it."""
  program: lp.Program
  config: experiment_lib.ExperimentConfig
  num_actors: int
  options: DistributedOptions
  counter: Any        # CourierHandle of the counter node
  replay: Any         # ReverbHandle
  learner: Any        # CourierHandle
  actors: List[Any]   # CourierHandles
  descriptions: Dict[str, List[str]]
  resumed_from: Optional[str] = None  # the checkpoint a resumed program starts from
  resumed_counts: Optional[Dict[str, float]] = None  # its counter totals
  hosts: Optional[hosts_lib.HostsConfig] = None  # where a `hosts` launch places the nodes
  # Restarts per actor/evaluator node: `options.max_actor_restarts`, or 0 when the program's
  # actor node cannot take a fresh seed stream on a restart (`fresh_seed_on_restart`).
  max_actor_restarts: int = 0


@dataclasses.dataclass
class DistributedResult:
  """How a distributed run ended. `reason`: finished | failed | signal."""
  exit_code: int
  reason: str
  detail: str
  counts: Dict[str, float]
  wall_seconds: float
  evaluations: List[Dict[str, float]]
  checkpoint: Optional[str] = None  # the checkpoint written at the end (None: none)
  # local_mt: groups whose node threads did not stop within stop_grace_s (a thread cannot
  # be killed; the process must end with os._exit, see `exit_now`).
  abandoned: List[str] = dataclasses.field(default_factory=list)
  # CPU seconds (user + system) at the last poll before the stop (`Supervisor.cpu_seconds`).
  node_cpu_seconds: Dict[str, float] = dataclasses.field(default_factory=dict)
  # Node title -> its restarts (`launch/elastic.py`), and the nodes dropped with their host.
  restarts: Dict[str, int] = dataclasses.field(default_factory=dict)
  dropped: List[str] = dataclasses.field(default_factory=list)

  @property
  def final_eval_return(self) -> float:
    return self.evaluations[-1]["episode_return"] if self.evaluations else float("nan")

  @property
  def best_eval(self) -> Optional[Dict[str, float]]:
    return max(self.evaluations, key=lambda r: r["episode_return"]) if self.evaluations else None


class _ReverbNode(lp.ReverbNode):
  """Launchpad's ReverbNode, stopping its server when the node stops (in `local_mt`
  the server would otherwise keep serving inside the launcher's process)."""

  def run(self):
    try:
      super().run()
    finally:
      server = getattr(self, "_server", None)
      if server is not None:
        server.stop()


def _with_timeout(handle, seconds: float):
  handle.set_client_kwargs(call_timeout=seconds)
  return handle


def _titles(num_actors: int) -> List[str]:
  return [f"{g}/{i}" for g in GROUPS for i in range(num_actors if g == "actor" else 1)]


def make_program(config: experiment_lib.ExperimentConfig, num_actors: int = 2, *,
                 options: DistributedOptions = DistributedOptions(),
                 launcher_pid: Optional[int] = None, name: str = "actorq",
                 hosts: Optional[hosts_lib.HostsConfig] = None) -> DistributedProgram:
  """Builds the program graph of `config` with `num_actors` actor nodes; starts nothing.

  Args:
    config: the experiment; `num_steps` and `eval_every` count actor steps summed over
      the actors.
    num_actors: actor nodes (>= 1).
    options: timeouts and the stop grace period.
    launcher_pid: the pid node processes watch (default: this process; not used with
      `hosts`, whose nodes watch their host runner and the counter node instead).
    hosts: for a `hosts` launch: where the nodes run; the counter node then
      coordinates the program's stop (`CounterNode`).

  Raises:
    ValueError: `num_actors` < 1.
    checkpointing.CheckpointError: `config.resume` and no readable checkpoint.
  """
  c = config
  if isinstance(num_actors, bool) or not isinstance(num_actors, int) or num_actors < 1:
    raise ValueError(f"num_actors must be an integer >= 1, got {num_actors!r}")
  if hosts is not None:
    launcher_pid = None
  elif launcher_pid is None:
    launcher_pid = os.getpid()
  if c.logdir is not None:
    os.makedirs(c.logdir, exist_ok=True)
  program = lp.Program(name)
  descriptions: Dict[str, List[str]] = {}

  ckpt_dir = c.checkpoint_dir
  resumed_from, restored = experiment_lib.restored_checkpoint(c)
  counts = None if restored is None else nodes_lib.restored_counts(restored)
  actor_steps = 0 if counts is None else int(counts[nodes_lib.ACTOR_STEPS])
  builder_name = type(c.builder).__name__

  checkpoint_ctor = None
  if ckpt_dir is not None:
    replay_name = restored.get("replay_checkpoint") if restored else None
    checkpoint_ctor = lambda: checkpointing.reverb_checkpointer(ckpt_dir, replay_name)
  with program.group("replay"):
    replay = program.add_node(_ReverbNode(lambda: nodes_lib.make_tables(c, launcher_pid),
                                          checkpoint_ctor))
  descriptions["replay"] = [f"ReverbNode: {builder_name}.make_replay_tables"
                            f"(rate_limited=True), checkpoints {ckpt_dir or 'off'}"
                            + (f", loads {restored.get('replay_checkpoint')}" if restored else "")]

  # Under `hosts` every node but the counter, and the launcher, poll the counter node.
  participants = ([] if hosts is None else
                  [t for t in _titles(num_actors) if t != "counter/0"] + [hosts_lib.LAUNCHER])
  # A restarted actor must not replay its predecessor's episodes: only an actor node that
  # takes a fresh seed on a restart (`elastic.restart_seed`) is restarted.
  max_restarts = (options.max_actor_restarts
                  if getattr(nodes_lib.ActorNode, "fresh_seed_on_restart", False) else 0)
  with program.group("counter"):
    counter = _with_timeout(program.add_node(lp.CourierNode(
        nodes_lib.CounterNode, launcher_pid, counts, participants,
        silent_after_s=options.silent_after_s, startup_timeout_s=options.startup_timeout_s,
        droppable=[t for t in participants if max_restarts and elastic.restartable(t)])),
        options.courier_timeout_s)
  descriptions["counter"] = ["CourierNode: acme Counter" + (
      f" (from {int(actor_steps)} actor steps)" if counts else "")]

  with program.group("learner"):
    learner = _with_timeout(program.add_node(lp.CourierNode(
        nodes_lib.LearnerNode, c, replay, counter, num_actors, options.reverb_timeout_s,
        launcher_pid, restore_path=resumed_from)), options.courier_timeout_s)
  descriptions["learner"] = [f"CourierNode: LearnerNode({builder_name}) on learner "
                             f"device {c.learner_device}, variable source (PolicyServer: one "
                             "publisher per precision)"
                             + (f", restores {resumed_from}" if resumed_from else "")]

  actors = []
  # A resumed actor continues its share of the exploration schedule, with new seeds.
  initial_steps = actor_steps // num_actors
  seeds = [c.seed + 1 + i + actor_steps for i in range(num_actors)]
  with program.group("actor"):
    for i in range(num_actors):
      actors.append(_with_timeout(program.add_node(lp.CourierNode(
          nodes_lib.ActorNode, c, i, seeds[i], replay, learner, counter,
          options.reverb_timeout_s, launcher_pid, initial_steps=initial_steps,
          num_actors=num_actors)),
          options.courier_timeout_s))
  descriptions["actor"] = [f"CourierNode: ActorNode {i} (seed {seeds[i]}, "
                           f"{c.precision}"
                           + (f", from step {initial_steps}" if restored else "") + ")"
                           for i in range(num_actors)]

  with program.group("evaluator"):
    program.add_node(lp.CourierNode(nodes_lib.EvaluatorNode, c, learner, counter, launcher_pid))
  descriptions["evaluator"] = [f"CourierNode: EvaluatorNode (greedy, every "
                               f"{c.eval_every} actor steps, {c.eval_episodes} episodes)"]

  with program.group("limiter"):
    program.add_node(lp.PyClassNode(nodes_lib.StepsLimiter, counter, c.num_steps, c.logdir,
                                    launcher_pid, options.final_eval_timeout_s))
  descriptions["limiter"] = [f"PyClassNode: StepsLimiter({c.num_steps} actor steps, then waits "
                             f"<= {options.final_eval_timeout_s:g} s for the evaluation there)"]
  assert [f"{label}/{i}" for label, nodes in program.groups.items()
          for i in range(len(nodes))] == _titles(num_actors)
  return DistributedProgram(program, c, num_actors, options, counter, replay, learner, actors,
                            descriptions, resumed_from, counts, hosts, max_restarts)


def describe(dp: DistributedProgram, launch_type: str = "local_mp") -> str:
  """The program's groups and nodes, one line each (what `--dry-run` prints), with what
  the launch type's supervisor adds (`describe_placement`: for `hosts`, each node's host
  and ports and the host runners' start commands).

  Raises:
    ValueError: an unknown launch type.
  """
  supervisor_cls = supervisors.supervisor_for(launch_type)
  lines = [f"program {dp.program.name!r} ({launch_type}, env {dp.config.env_id}, "
           f"{dp.config.num_steps} actor steps):"]
  where, footer = supervisor_cls.describe_placement(dp)
  per_process = supervisor_cls.one_process_per_node
  for label, group in dp.program.groups.items():
    descs = dp.descriptions.get(label, [])
    lines.append(f"  group {label} ({len(group)} node{'s' if len(group) != 1 else ''}"
                 f"{', one process each' if per_process else ''})")
    for i, node in enumerate(group):
      text = descs[i] if i < len(descs) else type(node).__name__
      lines.append(f"    {label}/{i}{where.get(f'{label}/{i}', '')}: {text}")
  lines.extend(footer)
  if getattr(supervisor_cls, "restarts_nodes", False) and dp.max_actor_restarts:
    lines.append(f"  a dead actor or evaluator node is restarted (fresh seed, backoff 1, 2, 4, ... s),"
                 f" up to {dp.max_actor_restarts} times each")
  return "\n".join(lines)


class _StallWatch:
  """Notices an actor that stopped stepping, from its own counter key
  (`distributed_nodes.actor_steps_key`): no change for `stall_s` seconds once it has
  stepped, or no first step within `start_s` seconds of the launch.

  `start_counts` are the counter's totals the program starts from (a resumed run's; None
  or {} for a fresh run, where every actor starts at 0). Comparing against them, not
  against the first poll, counts an actor that stepped (and perhaps hung) before the
  launcher's first successful poll as having stepped.
  """

  def __init__(self, num_actors: int, stall_s: float, start_s: float,
               start_counts: Optional[Dict[str, float]] = None):
    self._stall_s, self._start_s = float(stall_s), float(start_s)
    now = time.time()
    start_counts = start_counts or {}
    # actor -> (its count when last seen, since when, whether it has stepped since launch)
    self._last = {i: (start_counts.get(nodes_lib.actor_steps_key(i), 0), now, False)
                  for i in range(num_actors)}

  def check(self, counts: Dict[str, float], gone=()) -> Optional[str]:
    """None while every actor steps; else which actor stopped answering. Actors whose
    title (``actor/i``) is in `gone` (dropped with their host) are not expected to step."""
    now = time.time()
    for i, (value, since, stepped) in self._last.items():
      if f"actor/{i}" in gone:
        continue
      current = counts.get(nodes_lib.actor_steps_key(i), 0)
      if current != value:
        self._last[i] = (current, now, True)
      else:
        limit = self._stall_s if stepped else self._start_s
        if now - since > limit:
          what = "took no step" if stepped else "took no first step"
          return (f"actor/{i} {what} in {now - since:.0f} s (it stopped answering; the "
                  f"limit is {limit:g} s)")
    return None


def _counts(dp: DistributedProgram, client_box: Dict[str, Any]) -> Dict[str, float]:
  if "counter" not in client_box:
    client_box["counter"] = dp.counter.dereference()
  return dict(client_box["counter"].get_counts())


def _final_checkpoint(dp: DistributedProgram, timeout_s: float) -> Optional[str]:
  """Asks the learner node for a run checkpoint; its path, or None (no logdir, the
  learner cannot save, or it did not answer within `timeout_s`: said on stderr)."""
  if dp.config.logdir is None:
    return None
  box = {}

  def call():
    try:
      box["path"] = dp.learner.dereference().checkpoint()
    except Exception as e:  # pylint: disable=broad-except
      box["error"] = e

  t = threading.Thread(target=call, daemon=True)
  t.start()
  t.join(timeout_s)
  if "error" in box:
    print(f"actorq: no final checkpoint: {box['error']!r}", file=sys.stderr, flush=True)
  elif t.is_alive():
    print(f"actorq: no final checkpoint: the learner node did not write it within "
          f"{timeout_s:g} s (it waits for every learner part's step in progress)",
          file=sys.stderr, flush=True)
  return box.get("path")


def launch(dp: DistributedProgram, launch_type: str = "local_mp", echo: bool = True,
           on_poll=None, on_cpu=None) -> DistributedResult:
  """Runs the program until it finishes, fails or the launcher is signalled: starts it
  with the launch type's supervisor (`supervisors.SUPERVISORS`) and polls.

  Args:
    dp: from `make_program` (launched at most once).
    launch_type: a name in `supervisors.SUPERVISORS`: local_mt, local_mp, hosts (needs
      `make_program(..., hosts=...)`), test_mt, or one registered since.
    echo: (local_mp, hosts) echo node output to this terminal, prefixed `[group/i]`
      (`[host/i] [group/j]` for hosts).
    on_poll: called with the counter's counts about twice a second (progress).
    on_cpu: called right before each `on_poll` with the supervisor's `cpu_seconds()` at
      that moment (local_mp: per node process; local_mt: the process; hosts: {}).

  Returns:
    a `DistributedResult`; `exit_code` 0 only when the step limit was reached.

  Raises:
    ValueError: an unknown launch type; `hosts` for a program made without hosts.
  """
  supervisor_cls = supervisors.supervisor_for(launch_type)
  c = dp.config
  start = time.time()
  box: Dict[str, Any] = {}
  counts: Dict[str, float] = {}
  reason, detail = "failed", ""
  checkpoint = None
  logs = None if c.logdir is None else os.path.join(os.path.abspath(c.logdir), "logs")

  cpu: Dict[str, float] = {}
  with processes.Signals() as sigs:
    supervisor = supervisor_cls(dp, launch_type, logs, echo)
    stall = _StallWatch(dp.num_actors, dp.options.actor_stall_s, dp.options.actor_start_s,
                        dp.resumed_counts)
    try:
      while True:
        fault_points.point("launch_poll")  # tests: a signal at the n-th poll
        if sigs.received is not None or (supervisor.stopped_externally()
                                         and reason != "finished"):
          reason = "signal"
          detail = f"signal {sigs.received or signal.SIGTERM} to the launcher"
          if sigs.received is not None:  # the nodes still run: keep the progress made
            # (at most 5 s, so the program is still gone within 30 s of the signal)
            checkpoint = _final_checkpoint(dp, timeout_s=5.0)
          break
        problem = supervisor.check()
        if problem is not None:
          reason, detail = "failed", problem
          break
        if not supervisor.ready():
          time.sleep(0.5)
          continue
        try:
          counts = _counts(dp, box)
        except Exception as e:  # pylint: disable=broad-except
          reason, detail = "failed", f"counter unreachable: {e}"
          break
        cpu = supervisor.cpu_seconds()
        if on_cpu is not None:
          on_cpu(cpu)
        if on_poll is not None:
          on_poll(counts)
        if counts.get(nodes_lib.LIMIT_REACHED, 0) >= 1:
          reason, detail = "finished", f"step limit {c.num_steps} reached"
          checkpoint = _final_checkpoint(dp, dp.options.final_checkpoint_timeout_s)
          if checkpoint:
            detail += f"; checkpoint {checkpoint}"
          break
        problem = stall.check(counts, _gone(supervisor, counts))
        if problem is not None:
          reason, detail = "failed", problem
          break
        time.sleep(0.5)
    finally:
      if reason == "failed":  # said before stopping, which may take stop_grace_s
        print(f"actorq: stopped: {detail}", file=sys.stderr, flush=True)
      supervisor.stop(f"{reason}: {detail}")

  if reason == "finished":
    code = EXIT_FINISHED
  elif reason == "signal":
    code = 128 + int(sigs.received or signal.SIGTERM)
  else:
    code = EXIT_FAILED
  abandoned = list(supervisor.abandoned)
  if abandoned:
    detail += (f"; node threads that did not stop within {dp.options.stop_grace_s:g} s: "
               f"{', '.join(abandoned)}")
  restarts = {**elastic.from_counts(counts), **(getattr(supervisor, "restarts", dict)())}
  return DistributedResult(code, reason, detail, counts, time.time() - start,
                           run_dir.read_evaluations(c.logdir), checkpoint, abandoned, cpu,
                           restarts=restarts, dropped=sorted(_gone(supervisor, counts)))


def _gone(supervisor, counts: Dict[str, float]) -> set:
  """Node titles no longer expected to run: dropped by the counter node once silent (a
  `hosts` program's vanished actor host) or gone with their host runner."""
  dropped = {k[len(elastic.DROPPED_KEY_PREFIX):] for k, v in counts.items()
             if k.startswith(elastic.DROPPED_KEY_PREFIX) and v}
  return dropped | {t for t in getattr(supervisor, "gone", ()) if not t.startswith("host/")}


def exit_now(result: DistributedResult) -> None:
  """Ends this process with `result.exit_code` at once when `result.abandoned` names node
  threads that did not stop (`local_mt`): Python would otherwise wait for them at exit
  (Launchpad registers that wait) forever. Output is flushed first; a no-op otherwise."""
  if result.abandoned:
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(result.exit_code)  # pylint: disable=protected-access


def summary_line(result: DistributedResult) -> str:
  """One line with the counter's totals and the evaluations."""
  c = result.counts
  best = result.best_eval
  evals = (f"best evaluation return {best['episode_return']:.1f} at {int(best['actor_steps'])} "
           f"actor steps, final {result.final_eval_return:.1f}" if best else "no evaluation")
  restarts = elastic.summarize(result.restarts)
  faults = (f"; {restarts}" if restarts else "") + (
      f"; dropped with their host: {', '.join(result.dropped)}" if result.dropped else "")
  return (f"actorq: {result.reason} in {result.wall_seconds:.0f} s ({result.detail}): "
          f"{int(c.get(nodes_lib.ACTOR_STEPS, 0))} actor steps, "
          f"{int(c.get(nodes_lib.LEARNER_STEPS, 0))} learner steps, "
          f"{int(c.get(nodes_lib.ACTOR_EPISODES, 0))} episodes{faults}; {evals}")
