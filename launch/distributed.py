"""Distributed training: any experiment (`launch.experiment.ExperimentConfig`) as a
Launchpad program.

    program = make_program(ExperimentConfig(builder, "gym:CartPole-v1", num_steps=150_000,
                                            logdir="runs/x"), num_actors=2)
    result = launch(program)            # blocks; result.exit_code is 0 only on a clean finish

Groups (`describe(program)` lists them; `actorq train --dry-run` prints it):
  replay     a ReverbNode with the builder's tables (`rate_limited=True`: samples-per-insert
             is enforced by Reverb) and Reverb's checkpointer
             (`components.checkpointing.reverb_checkpointer(<logdir>/checkpoints, ...)`);
  counter    acme's Counter as a Courier service;
  learner    the builder's learner, also the actors' variable source: its `PolicyServer`
             converts each parameter version once per precision (int8 payloads are made on
             the learner, actors pull ``policy/<precision>``); it writes the run checkpoints;
  actor      N actors, each with its own seed (seed + 1 + i), environment, adder and
             variable client, acting in `components.loop.ActorLoop`;
  evaluator  greedy evaluation every `eval_every` actor steps (summed over actors, from the
             counter), `<logdir>/eval.csv`;
  limiter    ends the run at `num_steps` actor steps (summed over actors).

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

Launch types: `local_mt` / `test_mt` (threads, through `lp.launch`) and `local_mp` (one
process per node). For `local_mp` this module starts the node processes itself from
the commands Launchpad's own local_mp launcher builds: Launchpad 0.5.0's launch returns
at once (launchpad#12) and, in `current_terminal` mode, watches wrapper shells whose
exit codes it cannot see and whose `sed` dies first on SIGTERM. Here every node is a
direct child with its exit code known, its output written to `<logdir>/logs/<group>_<i>.log`
and echoed to the terminal with a `[group/i]` prefix.

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
"""
from __future__ import annotations

import csv
import dataclasses
import os
import re
import signal
import subprocess
import sys
import threading
import time
from typing import Any, Dict, List, Optional

import launchpad as lp
import psutil
from absl import flags

from actorq import core
from actorq.components import checkpointing
from actorq.launch import distributed_nodes as nodes_lib
from actorq.launch import experiment as experiment_lib

LAUNCH_TYPES = ("local_mt", "local_mp")
GROUPS = ("replay", "counter", "learner", "actor", "evaluator", "limiter")

_ABSL_INFO = re.compile(r"^I\d{4} ")  # absl INFO lines go to the node's log file only

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
  """
  reverb_timeout_s: float = 120.0
  courier_timeout_s: float = 60.0
  stop_grace_s: float = 20.0
  actor_stall_s: float = 300.0
  actor_start_s: float = 900.0

  def __post_init__(self):
    for name in ("reverb_timeout_s", "courier_timeout_s", "actor_stall_s", "actor_start_s"):
      if not getattr(self, name) > 0:
        raise ValueError(f"{name} must be > 0 seconds, got {getattr(self, name)!r}")
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


def make_program(config: experiment_lib.ExperimentConfig, num_actors: int = 2, *,
                 options: DistributedOptions = DistributedOptions(),
                 launcher_pid: Optional[int] = None, name: str = "actorq") -> DistributedProgram:
  """Builds the program graph of `config` with `num_actors` actor nodes; starts nothing.

  Args:
    config: the experiment; `num_steps` and `eval_every` count actor steps summed over
      the actors.
    num_actors: actor nodes (>= 1).
    options: timeouts and the stop grace period.
    launcher_pid: the pid node processes watch (default: this process).

  Raises:
    ValueError: `num_actors` < 1.
    checkpointing.CheckpointError: `config.resume` and no readable checkpoint.
  """
  c = config
  if isinstance(num_actors, bool) or not isinstance(num_actors, int) or num_actors < 1:
    raise ValueError(f"num_actors must be an integer >= 1, got {num_actors!r}")
  launcher_pid = os.getpid() if launcher_pid is None else launcher_pid
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

  with program.group("counter"):
    counter = _with_timeout(program.add_node(lp.CourierNode(nodes_lib.CounterNode, launcher_pid,
                                                            counts)), options.courier_timeout_s)
  descriptions["counter"] = ["CourierNode: acme Counter" + (
      f" (from {int(actor_steps)} actor steps)" if counts else "")]

  with program.group("learner"):
    learner = _with_timeout(program.add_node(lp.CourierNode(
        nodes_lib.LearnerNode, c, replay, counter, num_actors, options.reverb_timeout_s,
        launcher_pid, restore_path=resumed_from)), options.courier_timeout_s)
  descriptions["learner"] = [f"CourierNode: LearnerNode({builder_name}), "
                             "variable source (PolicyServer: one publisher per precision)"
                             + (f", restores {resumed_from}" if resumed_from else "")]

  actors = []
  # A resumed actor continues its share of the exploration schedule, with new seeds.
  initial_steps = actor_steps // num_actors
  seeds = [c.seed + 1 + i + actor_steps for i in range(num_actors)]
  with program.group("actor"):
    for i in range(num_actors):
      actors.append(_with_timeout(program.add_node(lp.CourierNode(
          nodes_lib.ActorNode, c, i, seeds[i], replay, learner, counter,
          options.reverb_timeout_s, launcher_pid, initial_steps=initial_steps)),
          options.courier_timeout_s))
  descriptions["actor"] = [f"CourierNode: ActorNode {i} (seed {seeds[i]}, {c.precision}"
                           + (f", from step {initial_steps}" if restored else "") + ")"
                           for i in range(num_actors)]

  with program.group("evaluator"):
    program.add_node(lp.CourierNode(nodes_lib.EvaluatorNode, c, learner, counter, launcher_pid))
  descriptions["evaluator"] = [f"CourierNode: EvaluatorNode (greedy, every {c.eval_every} "
                               f"actor steps, {c.eval_episodes} episodes)"]

  with program.group("limiter"):
    program.add_node(lp.PyClassNode(nodes_lib.StepsLimiter, counter, c.num_steps, c.logdir,
                                    launcher_pid))
  descriptions["limiter"] = [f"PyClassNode: StepsLimiter({c.num_steps} actor steps)"]
  return DistributedProgram(program, c, num_actors, options, counter, replay, learner, actors,
                            descriptions, resumed_from, counts)


def describe(dp: DistributedProgram, launch_type: str = "local_mp") -> str:
  """The program's groups and nodes, one line each (what `--dry-run` prints)."""
  lines = [f"program {dp.program.name!r} ({launch_type}, env {dp.config.env_id}, "
           f"{dp.config.num_steps} actor steps):"]
  for label, group in dp.program.groups.items():
    descs = dp.descriptions.get(label, [])
    lines.append(f"  group {label} ({len(group)} node{'s' if len(group) != 1 else ''}"
                 f"{', one process each' if launch_type == 'local_mp' else ''})")
    for i, node in enumerate(group):
      text = descs[i] if i < len(descs) else type(node).__name__
      lines.append(f"    {label}/{i}: {text}")
  return "\n".join(lines)


def read_evaluations(logdir: Optional[str]) -> List[Dict[str, float]]:
  """Rows of `<logdir>/eval.csv` as floats (where numeric)."""
  if logdir is None:
    return []
  path = os.path.join(logdir, "eval.csv")
  if not os.path.exists(path):
    return []
  rows = []
  with open(path, encoding="utf-8") as f:
    for row in csv.DictReader(f):
      out = {}
      for k, v in row.items():
        try:
          out[k] = float(v)
        except (TypeError, ValueError):
          out[k] = v
      rows.append(out)
  return rows


# ---------------------------------------------------------------------------------------
# Supervision.


class _Signals:
  """Records SIGINT/SIGTERM to the launcher (restores the old handlers on exit)."""

  def __init__(self):
    self.received: Optional[int] = None
    self._old = {}

  def __enter__(self):
    if threading.current_thread() is threading.main_thread():
      for sig in (signal.SIGINT, signal.SIGTERM):
        self._old[sig] = signal.signal(sig, self._handle)
    return self

  def _handle(self, signum, frame):
    del frame
    if self.received is None:
      self.received = signum

  def __exit__(self, *exc):
    for sig, old in self._old.items():
      signal.signal(sig, old)


class ExceptionLines:
  """Finds the exception lines of Python tracebacks in a process's output: a traceback
  ends with its first unindented line after the frames, `Type: message`."""

  def __init__(self):
    self.last: Optional[str] = None
    self._in_traceback = False

  def feed(self, line: str) -> bool:
    """Reads one line; True when it is an exception line (then in `last`)."""
    if line.startswith("Traceback (most recent call last):"):
      self._in_traceback = True
    elif self._in_traceback and line.strip() and not line[0].isspace():
      self._in_traceback = False
      self.last = line.strip()
      return True
    return False


class _NodeProcesses:
  """The node processes of a `local_mp` launch, children of this process."""

  def __init__(self, program: lp.Program, log_dir: Optional[str], echo: bool = True):
    # The same preparation as launchpad.launch.local_multi_processing.launch.
    from launchpad import context
    for label, nodes in program.groups.items():
      for node in nodes:
        node._initialize_context(context.LaunchType.LOCAL_MULTI_PROCESSING,  # pylint: disable=protected-access
                                 launch_config=None)
    for label, nodes in program.groups.items():
      for node in nodes:
        for handle in node.input_handles:
          handle.connect(node, label)
    for node in program.get_all_nodes():
      node.bind_addresses()
    self.procs: List[subprocess.Popen] = []
    self.titles: List[str] = []
    self.errors: Dict[str, str] = {}  # title -> the last exception line of its output
    self._threads: List[threading.Thread] = []
    if log_dir is not None:
      os.makedirs(log_dir, exist_ok=True)
    self._echo = echo
    lock = threading.Lock()
    for label, nodes in program.groups.items():
      commands = nodes[0].to_executables(nodes, label, nodes[0].launch_context)
      for command in commands:
        title = command.title
        env = {**os.environ, **command.env_overrides}
        proc = subprocess.Popen(command.command_as_list, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
        self.procs.append(proc)
        self.titles.append(title)
        path = None if log_dir is None else os.path.join(log_dir, title.replace("/", "_") + ".log")
        t = threading.Thread(target=self._pump, args=(proc, title, path, lock), daemon=True)
        t.start()
        self._threads.append(t)

  def _pump(self, proc, title, path, lock):
    out = open(path, "w", encoding="utf-8", errors="replace") if path else None
    exceptions = ExceptionLines()
    try:
      for raw in iter(proc.stdout.readline, b""):
        line = raw.decode("utf-8", "replace")
        if exceptions.feed(line):
          self.errors[title] = exceptions.last
        if out is not None:
          out.write(line)
          out.flush()
        if self._echo and not _ABSL_INFO.match(line):
          with lock:
            try:
              sys.stdout.write(f"[{title}] {line}")
              sys.stdout.flush()
            except (OSError, ValueError):
              pass
    finally:
      if out is not None:
        out.close()

  def check(self, finish_title_prefix: str) -> Optional[str]:
    """None while fine; else why the program must end (a node exited)."""
    for proc, title in zip(self.procs, self.titles):
      code = proc.poll()
      if code is None:
        continue
      if code == 0 and title.startswith(finish_title_prefix):
        continue
      if not code:
        return f"node {title} exited early"
      for t in self._threads:  # its output up to the exit (the pump ends at EOF)
        t.join(timeout=1.0)
      cause = self.errors.get(title)
      return f"node {title} exited with code {code}" + (f": {cause}" if cause else "")
    return None

  def stop(self, grace_s: float) -> None:
    """SIGTERM to every node, then SIGKILL to what is left of each tree after `grace_s`."""
    trees = {}
    for proc in self.procs:
      try:
        p = psutil.Process(proc.pid)
        trees[proc.pid] = [p] + p.children(recursive=True)
      except psutil.NoSuchProcess:
        trees[proc.pid] = []
      if proc.poll() is None:
        try:
          proc.send_signal(signal.SIGTERM)
        except ProcessLookupError:
          pass
    deadline = time.time() + grace_s
    while time.time() < deadline and any(p.poll() is None for p in self.procs):
      time.sleep(0.1)
    for proc in self.procs:
      # Children a node started (and a node that ignored SIGTERM) go too.
      for p in trees.get(proc.pid, []):
        try:
          if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
            p.kill()
        except psutil.NoSuchProcess:
          pass
      try:
        proc.wait(timeout=5)
      except subprocess.TimeoutExpired:
        pass
    for t in self._threads:
      t.join(timeout=2)


def _one_line(error: BaseException) -> str:
  """`Type: first line of the message` of an exception, unwrapping a node's
  `RuntimeError("learner failed: ...")` to its cause."""
  while error.__cause__ is not None and isinstance(error, RuntimeError) and \
      not isinstance(error, core.RunFailure):
    error = error.__cause__
  text = str(error).strip().splitlines()
  return f"{type(error).__name__}: {text[0]}" if text else type(error).__name__


class _StallWatch:
  """Notices an actor that stopped stepping, from its own counter key
  (`distributed_nodes.actor_steps_key`): no change for `stall_s` seconds once it has
  stepped, or no first step within `start_s` seconds of the launch."""

  def __init__(self, num_actors: int, stall_s: float, start_s: float):
    self._stall_s, self._start_s = float(stall_s), float(start_s)
    now = time.time()
    # actor -> (its count when last seen, since when, whether it has stepped since launch)
    self._last = {i: (None, now, False) for i in range(num_actors)}

  def check(self, counts: Dict[str, float]) -> Optional[str]:
    """None while every actor steps; else which actor stopped answering."""
    now = time.time()
    for i, (value, since, stepped) in self._last.items():
      current = counts.get(nodes_lib.actor_steps_key(i), 0)
      if value is None:  # the first poll: a resumed run's count is where it starts
        self._last[i] = (current, since, False)
      elif current != value:
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


def _final_checkpoint(dp: DistributedProgram, timeout_s: float = 60.0) -> Optional[str]:
  """Asks the learner node for a run checkpoint; its path, or None (no logdir, the
  learner cannot save, or it did not answer within `timeout_s`)."""
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
  return box.get("path")


def launch(dp: DistributedProgram, launch_type: str = "local_mp", echo: bool = True,
           on_poll=None) -> DistributedResult:
  """Runs the program until it finishes, fails or the launcher is signalled.

  Args:
    dp: from `make_program` (launched at most once).
    launch_type: local_mt, local_mp or test_mt.
    echo: (local_mp) echo node output to this terminal, prefixed `[group/i]`.
    on_poll: called with the counter's counts about twice a second (progress).

  Returns:
    a `DistributedResult`; `exit_code` 0 only when the step limit was reached.
  """
  if launch_type not in LAUNCH_TYPES + ("test_mt",):
    raise ValueError(f"launch_type must be one of {LAUNCH_TYPES + ('test_mt',)}, got {launch_type!r}")
  c = dp.config
  start = time.time()
  box: Dict[str, Any] = {}
  counts: Dict[str, float] = {}
  reason, detail = "failed", ""
  checkpoint = None
  abandoned: List[str] = []
  logs = None if c.logdir is None else os.path.join(os.path.abspath(c.logdir), "logs")

  with _Signals() as sigs:
    if launch_type == "local_mp":
      procs = _NodeProcesses(dp.program, logs, echo=echo)
      check = lambda: procs.check(finish_title_prefix="limiter/")
      stop = lambda: procs.stop(dp.options.stop_grace_s)
      external_stop = lambda: None
    else:
      # Launchpad SIGKILLs its own process when a node thread outlives its 10 s stop
      # notice (a thread cannot be killed), before anything can be reported; this
      # launcher bounds the stop itself and reports the threads that did not stop.
      flags.FLAGS.lp_termination_notice_secs = -1
      manager = lp.launch(dp.program, launch_type=launch_type, serialize_py_nodes=False)

      def check():
        try:
          manager.check_for_thread_worker_exception()
        except BaseException as e:  # pylint: disable=broad-except
          return f"a node failed: {_one_line(e)}"
        return None

      def stop():
        stopping = threading.Thread(target=manager.stop_and_wait, name="actorq-stop",
                                    daemon=True)
        stopping.start()
        stopping.join(dp.options.stop_grace_s)
        if stopping.is_alive():
          abandoned.extend(sorted({t.name for t in threading.enumerate()
                                   if t.name in GROUPS and t.is_alive()}))

      # Launchpad's worker manager takes over SIGINT/SIGTERM in this mode.
      external_stop = lambda: manager.stop_event().is_set()

    stall = _StallWatch(dp.num_actors, dp.options.actor_stall_s, dp.options.actor_start_s)
    try:
      while True:
        if sigs.received is not None or (external_stop() and reason != "finished"):
          reason = "signal"
          detail = f"signal {sigs.received or signal.SIGTERM} to the launcher"
          if sigs.received is not None:  # the nodes still run: keep the progress made
            # (at most 5 s, so the program is still gone within 30 s of the signal)
            checkpoint = _final_checkpoint(dp, timeout_s=5.0)
          break
        problem = check()
        if problem is not None:
          reason, detail = "failed", problem
          break
        try:
          counts = _counts(dp, box)
        except Exception as e:  # pylint: disable=broad-except
          reason, detail = "failed", f"counter unreachable: {e}"
          break
        if on_poll is not None:
          on_poll(counts)
        if counts.get(nodes_lib.LIMIT_REACHED, 0) >= 1:
          reason, detail = "finished", f"step limit {c.num_steps} reached"
          checkpoint = _final_checkpoint(dp)
          if checkpoint:
            detail += f"; checkpoint {checkpoint}"
          break
        problem = stall.check(counts)
        if problem is not None:
          reason, detail = "failed", problem
          break
        time.sleep(0.5)
    finally:
      if reason == "failed":  # said before stopping, which may take stop_grace_s
        print(f"actorq: stopped: {detail}", file=sys.stderr, flush=True)
      stop()

  if reason == "finished":
    code = EXIT_FINISHED
  elif reason == "signal":
    code = 128 + int(sigs.received or signal.SIGTERM)
  else:
    code = EXIT_FAILED
  if abandoned:
    detail += (f"; node threads that did not stop within {dp.options.stop_grace_s:g} s: "
               f"{', '.join(abandoned)}")
  return DistributedResult(code, reason, detail, counts, time.time() - start,
                           read_evaluations(c.logdir), checkpoint, abandoned)


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
  return (f"actorq: {result.reason} in {result.wall_seconds:.0f} s ({result.detail}): "
          f"{int(c.get(nodes_lib.ACTOR_STEPS, 0))} actor steps, "
          f"{int(c.get(nodes_lib.LEARNER_STEPS, 0))} learner steps, "
          f"{int(c.get(nodes_lib.ACTOR_EPISODES, 0))} episodes; {evals}")
