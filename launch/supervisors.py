"""Launch types as supervisors: one class per way of running a distributed program's
nodes, registered in one table (`SUPERVISORS`: launch type name -> Supervisor class), so
that `distributed.launch` is the polling loop alone and every list of launch types
(`--launch` choices, checks, benchmarks) derives from the table.

    SUPERVISORS = {"local_mt": Threads,     # lp.launch: node threads of one process
                   "local_mp": Processes,   # one process per node
                   "hosts": Hosts,          # host runners on several machines
                   "test_mt": Threads}      # Launchpad's test type (not offered by the CLI)

A new launch type is one class that satisfies `Supervisor` plus one entry:

    class Mine:
      in_process = True          # do the nodes run in the launcher's process?
      one_process_per_node = False
      summary = "my way of running nodes"   # for actorq train --help
      def __init__(self, dp, launch_type, log_dir, echo): ...   # starts the nodes
      ...                        # check, ready, stopped_externally, stop, cpu_seconds,
                                 # describe_placement (a classmethod)
    supervisors.register("mine", Mine)
    distributed.launch(dp, "mine")

(`docs/guides/add-a-launch-mode.md` walks through `tests/launch/test_supervisors.py`, which
does exactly this from outside the package.) These are the Launchpad rows of the launch
table `launch.modes.MODES`, whose ``local`` row (one process, `launch.local.train`) runs no
program (no nodes to supervise, no counter to poll).
"""
from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Protocol, Tuple, Type

import launchpad as lp
import psutil
from absl import flags
from launchpad import address as lp_address

from actorq import core
from actorq.launch import hosts as hosts_lib
from actorq.launch import elastic
from actorq.components import placement
from actorq.components import processes
from actorq.agents import registry

# `dp` below is a `distributed.DistributedProgram` (not imported: distributed imports this
# module).


class Supervisor(Protocol):
  """What `distributed.launch` needs of a launch type: constructing one starts the
  program's nodes; the launcher then polls `check`, `stopped_externally` and `ready` about
  twice a second (and the counter node, once `ready`) and calls `stop` exactly once.

  Class attributes:
    in_process: True when the nodes run in the launcher's own process (threads): the
      learner then computes in this process (`placement.check_learner_device(...,
      in_process=True)`) and `--learner-device cpu` needs no separate process.
    one_process_per_node: `describe` says "one process each" for every group.
    summary: what the launch type does, a few words for ``actorq train --help``
      (``--launch``), e.g. "a Launchpad program in threads".

  Constructor: ``cls(dp, launch_type, log_dir, echo)``: `dp` the `DistributedProgram`
  (launched at most once), `launch_type` the name it was registered under, `log_dir`
  (``<logdir>/logs`` or None) where per-node output may go, `echo` whether node output
  may be echoed to this terminal. Raises ValueError for a program it cannot run.
  """
  in_process: bool
  one_process_per_node: bool
  summary: str
  abandoned: List[str]  # group names of nodes that did not stop within stop_grace_s
  # Optional (read with getattr; a supervisor without them restarts nothing):
  #   restarts() -> {node title: restarts so far} (`launch/elastic.py`);
  #   gone: set of node titles that are no longer expected to run (their host vanished).

  def check(self) -> Optional[str]:
    """None while every node runs; else one line: why the program must stop (a node
    failed or ended on its own). A node's clean finish (the limiter) is not a problem."""

  def ready(self) -> bool:
    """True once the counter node can be asked for counts."""

  def stopped_externally(self) -> bool:
    """True when something other than the launcher's own signal handler stopped the
    program (e.g. Launchpad's worker manager took SIGINT/SIGTERM)."""

  def stop(self, detail: str) -> None:
    """Stops every node (`detail`: ``"<reason>: <why>"``), within
    `DistributedOptions.stop_grace_s` plus a few seconds; names the nodes it could not
    stop in `abandoned`."""

  def cpu_seconds(self) -> Dict[str, float]:
    """CPU seconds (user + system) used so far, per node where the launcher sees it."""

  @classmethod
  def describe_placement(cls, dp: "DistributedProgram") -> Tuple[Dict[str, str], List[str]]:
    """For `distributed.describe`: a suffix per node title (e.g. `` on 10.0.0.2:9000``) and
    lines to print after the groups (both may be empty)."""


# --------------------------------------------------------------------------------------
# Helpers (Launchpad's own launchers' steps).


def _slots(dp: "DistributedProgram") -> List[Dict[str, Any]]:
  """(`hosts`) Each node in program order: title, host index, host and its ports."""
  where = hosts_lib.place({label: len(nodes) for label, nodes in dp.program.groups.items()},
                          len(dp.hosts.hosts))
  slots, port = [], dp.hosts.port_base
  for label, nodes in dp.program.groups.items():
    for i, node in enumerate(nodes):
      title = f"{label}/{i}"
      ports = list(range(port, port + len(node.addresses)))
      port += len(ports)
      slots.append({"title": title, "host": where[title],
                    "address": dp.hosts.hosts[where[title]], "ports": ports})
  if port - 1 > 65535:
    raise ValueError(f"ports {dp.hosts.port_base}..{port - 1} run past 65535: lower the port base")
  return slots


def _one_line(error: BaseException) -> str:
  """`Type: first line of the message` of an exception, unwrapping a node's
  `RuntimeError("learner failed: ...")` to its cause."""
  while error.__cause__ is not None and isinstance(error, RuntimeError) and \
      not isinstance(error, core.RunFailure):
    error = error.__cause__
  text = str(error).strip().splitlines()
  return f"{type(error).__name__}: {text[0]}" if text else type(error).__name__


def _prepare(program: lp.Program) -> None:
  """What Launchpad's local_mp launcher does before binding addresses: each node's
  launch context, and every handle connected to the node it points at."""
  from launchpad import context  # pylint: disable=g-import-not-at-top
  for label, nodes in program.groups.items():
    for node in nodes:
      node._initialize_context(context.LaunchType.LOCAL_MULTI_PROCESSING,  # pylint: disable=protected-access
                               launch_config=None)
  for label, nodes in program.groups.items():
    for node in nodes:
      for handle in node.input_handles:
        handle.connect(node, label)


def _local_mp_commands(program: lp.Program,
                       node_env: Optional[Callable[[str], Dict[str, str]]] = None
                       ) -> List[processes.Command]:
  """The node processes of a `local_mp` launch, as Launchpad's local_mp launcher makes
  them (each group's functions in a data file, `process_entry` per node); `node_env(group)`:
  environment overrides of that group's processes, on top of Launchpad's own and of the
  ``PYTHONPATH`` that imports the agents `registry.get` imported from a directory
  (`registry.node_env`: the nodes unpickle the builder)."""
  _prepare(program)
  for node in program.get_all_nodes():
    node.bind_addresses()
  commands = []
  for label, nodes in program.groups.items():
    for command in nodes[0].to_executables(nodes, label, nodes[0].launch_context):
      env = {**command.env_overrides, **registry.node_env(),
             **(node_env(label) if node_env else {})}
      commands.append(processes.Command(command.title, command.command_as_list, env))
  return commands


class _StaticAddress(lp_address.AbstractAddressBuilder):
  """A fixed ``host:port`` (`hosts` launches; Launchpad's local builder picks a free
  localhost port instead)."""

  def __init__(self, host: str, port: int):
    self._address = f"{host}:{port}"

  def build(self) -> str:
    return self._address


def _hosts_node_envs(dp: "DistributedProgram", slots: List[Dict[str, Any]]) -> List[Dict[str, str]]:
  """(`hosts`) Each node's environment overrides, as `placement.node_env` gives them under
  `local_mp`: the CPU only and one thread for every node but the learner, whose TF/OpenMP
  pools get the cores (this machine's: the launcher runs on the learner's host) that the
  actors on its own host leave. XLA_FLAGS is the flag alone; the host runner appends it to
  its host's own XLA_FLAGS (`hosts.node_environment`). PYTHONPATH: the directories
  `registry.get` imported agents from (`registry.node_env`), before the host's own."""
  actors_on = {}
  for slot in slots:
    if slot["title"].startswith("actor/"):
      actors_on[slot["host"]] = actors_on.get(slot["host"], 0) + 1
  return [{**registry.node_env(environ={}),
           **placement.node_env(slot["title"].split("/")[0], dp.config.learner_device,
                                actors_on.get(slot["host"], 0), base_env={})}
          for slot in slots]


def _runner_command(config: hosts_lib.HostsConfig, index: int, program: str) -> List[str]:
  return (config.start_argv(index) or []) + config.runner_argv(index, program)


class _Supervisor:
  """The answers most supervisors share: the counter may be asked at once (`ready`), only
  the launcher stops the program (`stopped_externally`), `--dry-run` adds nothing per node
  (`describe_placement`)."""

  def ready(self) -> bool:
    return True

  def stopped_externally(self) -> bool:
    return False

  @classmethod
  def describe_placement(cls, dp: "DistributedProgram") -> Tuple[Dict[str, str], List[str]]:
    return {}, []


class _ProcessPerNode(_Supervisor):
  """What the supervisors that start one OS process per node share: the learner computes
  in another process than the launcher (its placement is decided there), and a node's exit
  is seen per process."""
  in_process = False
  one_process_per_node = True
  restarts_nodes = True  # a dead actor or evaluator process is restarted (launch/elastic.py)


class Hosts(_ProcessPerNode):
  """`hosts`: a running launch over several machines: the program written, one host
  runner per host started (unless `start` is ``print``; each supervises its host's nodes,
  `launch/hosts.py`), the stop through the counter node.

  Raises (from the constructor):
    ValueError: the program was made without `hosts`, or its ports run past 65535.
  """

  summary = "one process per node on the machines of --hosts"

  def __init__(self, dp: "DistributedProgram", launch_type: str, log_dir: Optional[str],
               echo: bool):
    del launch_type
    self.abandoned: List[str] = []
    if dp.hosts is None:
      raise ValueError("a hosts launch needs make_program(..., hosts=HostsConfig(...))")
    opts, cfg = dp.options, dp.hosts
    slots = _slots(dp)
    _prepare(dp.program)
    nodes = dp.program.get_all_nodes()
    for node, slot in zip(nodes, slots):
      for address, port in zip(node.addresses, slot["ports"]):
        address.bind(_StaticAddress(slot["address"], port))
    titles = [s["title"] for s in slots]
    header = {"name": dp.program.name, "hosts": list(cfg.hosts),
              "tasks": [{"title": s["title"], "host": s["host"], "env": env}
                        for s, env in zip(slots, _hosts_node_envs(dp, slots))],
              "counter": dp.counter._address.resolve(),  # pylint: disable=protected-access
              "counter_task": titles.index("counter/0"), "heartbeat_s": opts.heartbeat_s,
              "silent_after_s": opts.silent_after_s, "startup_timeout_s": opts.startup_timeout_s,
              "stop_grace_s": opts.stop_grace_s, "max_actor_restarts": dp.max_actor_restarts,
              "logdir": None if dp.config.logdir is None else os.path.abspath(dp.config.logdir)}
    data = hosts_lib.encode_program(header, [node.function for node in nodes])
    if dp.config.logdir is not None:
      path = hosts_lib.write_program(
          os.path.join(os.path.abspath(dp.config.logdir), hosts_lib.PROGRAM_FILE), data)
    else:
      path = "-"
    used = sorted({s["host"] for s in slots})
    self._grace = opts.stop_grace_s
    # Elastic: a runner whose nodes are all restartable may vanish with its host; the run
    # goes on without its nodes (`gone`), as the counter node drops them once silent.
    self._elastic = dp.max_actor_restarts > 0
    self._nodes_of = {f"host/{i}": [s["title"] for s in slots if s["host"] == i] for i in used}
    self._actors = {t for t in titles if t.startswith("actor/")}
    self.gone: set = set()
    self._poll = hosts_lib.stop_poll(header, hosts_lib.LAUNCHER)
    if cfg.start == "print":
      last_port = max(p for s in slots for p in s["ports"])
      print(f"actorq: program written to {path}; start on each host (TCP ports "
            f"{cfg.port_base}-{last_port} must be reachable between the hosts):", flush=True)
      for index in used:
        print(f"  [{cfg.hosts[index]}] " + " ".join(cfg.runner_argv(index, path)), flush=True)
      commands = []
    else:
      commands = [processes.Command(f"host/{i}", _runner_command(cfg, i, "-"), {}, data)
                  for i in used]
    self.procs = processes.NodeProcesses(commands, log_dir, echo=echo)

  def ready(self) -> bool:
    """True once the counter node has answered."""
    return self._poll.answered

  def check(self) -> Optional[str]:
    reason = self._poll()
    if reason is not None:
      return f"stop requested: {reason}"
    for runner, code in self.procs.exit_codes().items():
      if code is None or runner in self.gone:
        continue
      reason = self._poll()  # a node that failed may have said why
      if reason is not None:
        return f"stop requested: {reason}"
      nodes = self._nodes_of[runner]
      if not (code and self._elastic and all(elastic.restartable(t) for t in nodes)):
        return self.procs.problem(runner, code)
      self.gone.update([runner] + nodes)
      left = sorted(self._actors - self.gone)
      print(f"actorq: {runner} ended with {elastic.exit_cause(code)}: its nodes "
            f"{', '.join(nodes)} are gone; the run goes on with {len(left)} actor"
            f"{'s' if len(left) != 1 else ''}", file=sys.stderr, flush=True)
      if not left:
        return f"node {runner} exited with code {code}: no actor is left"
    return None

  def stop(self, detail: str) -> None:
    """Requests the stop; waits `stop_grace_s` for the nodes and host runners to end;
    then SIGTERM/SIGKILL to the runners started here (nodes of a killed runner stop
    themselves, see `processes.watch_launcher`)."""
    counter = self._poll.client
    try:
      counter.request_stop(f"{hosts_lib.LAUNCHER}: {detail}")
    except Exception as e:  # pylint: disable=broad-except
      print(f"actorq: the counter node did not take the stop request ({e!r}); "
            "nodes that cannot reach it stop by themselves", file=sys.stderr, flush=True)
    start = time.time()
    active = []
    while time.time() < start + self._grace:
      try:
        counter.heartbeat(hosts_lib.LAUNCHER)  # tells the counter we have heard
        active = counter.active()
      except Exception:  # pylint: disable=broad-except
        active = []  # the counter node has ended: it does so after the others
      if not active and not self.procs.running():
        break
      time.sleep(0.2)
    else:
      print(f"actorq: still running {self._grace:.0f} s after the stop request: "
            f"{', '.join(active + [t for t, c in self.procs.exit_codes().items() if c is None])}"
            "; killing the host runners started here", file=sys.stderr, flush=True)
    self.procs.stop(min(5.0, self._grace))

  def cpu_seconds(self) -> Dict[str, float]:
    """{}: the nodes run under host runners, possibly on other machines."""
    return {}

  @classmethod
  def describe_placement(cls, dp: "DistributedProgram") -> Tuple[Dict[str, str], List[str]]:
    """Each node's host and ports; the host runners' start commands."""
    slots = _slots(dp)
    where = {s["title"]: f" on {s['address']}" + "".join(f":{p}" for p in s["ports"])
             for s in slots}
    footer = ["  host runners (the program file arrives on their standard input):"]
    for index in sorted({s["host"] for s in slots}):
      footer.append("    " + " ".join(_runner_command(dp.hosts, index, "-")))
    return where, footer


class Threads(_Supervisor):
  """`local_mt` (and `test_mt`, Launchpad's test launch type): every node a thread of this
  process, through `lp.launch`. Launchpad SIGKILLs its own process when a node thread
  outlives its 10 s stop notice (a thread cannot be killed), before anything can be
  reported; this supervisor bounds the stop itself and names the threads that did not
  stop in `abandoned` (`distributed.exit_now` then ends the process)."""
  in_process = True
  one_process_per_node = False
  summary = "a Launchpad program in threads"

  def __init__(self, dp: "DistributedProgram", launch_type: str, log_dir: Optional[str],
               echo: bool):
    del log_dir, echo  # node threads print to this process's own output
    flags.FLAGS.lp_termination_notice_secs = -1
    self._groups = tuple(dp.program.groups)
    self._grace = dp.options.stop_grace_s
    self._manager = lp.launch(dp.program, launch_type=launch_type, serialize_py_nodes=False)
    self.abandoned: List[str] = []

  def check(self) -> Optional[str]:
    try:
      self._manager.check_for_thread_worker_exception()
    except BaseException as e:  # pylint: disable=broad-except
      return f"a node failed: {_one_line(e)}"
    return None

  def stopped_externally(self) -> bool:
    # Launchpad's worker manager takes over SIGINT/SIGTERM in this mode.
    return self._manager.stop_event().is_set()

  def stop(self, detail: str) -> None:
    del detail
    stopping = threading.Thread(target=self._manager.stop_and_wait, name="actorq-stop",
                                daemon=True)
    stopping.start()
    stopping.join(self._grace)
    if stopping.is_alive():
      self.abandoned.extend(sorted({t.name for t in threading.enumerate()
                                    if t.name in self._groups and t.is_alive()}))

  def cpu_seconds(self) -> Dict[str, float]:
    """{``"process"``: this process}: every node thread and the launcher together
    (threads of one process share its counters)."""
    t = psutil.Process().cpu_times()
    return {"process": float(t.user + t.system)}


class Processes(_ProcessPerNode):
  """`local_mp`: one process per node, started here from the commands Launchpad's own
  local_mp launcher builds (`_local_mp_commands`), each a direct child whose exit code is
  known, its output in ``<logdir>/logs/<group>_<i>.log`` and echoed with a ``[group/i]``
  prefix (`processes.NodeProcesses`); each gets `placement.node_env(group, ...)`."""
  summary = "a Launchpad program, one process per node"

  def __init__(self, dp: "DistributedProgram", launch_type: str, log_dir: Optional[str],
               echo: bool):
    del launch_type
    c = dp.config
    self._grace = dp.options.stop_grace_s
    self._restarts = elastic.Restarts(dp.max_actor_restarts, c.logdir)
    self.procs = processes.NodeProcesses(_local_mp_commands(
        dp.program, node_env=lambda group: placement.node_env(
            group, c.learner_device, dp.num_actors)), log_dir, echo=echo)
    self.abandoned: List[str] = []

  def check(self) -> Optional[str]:
    """None while the program runs: every node process runs, the limiter may have
    finished, and an actor or evaluator that died waits for its restart
    (`elastic.Restarts`, at most `dp.max_actor_restarts` per node) or has been
    restarted; else the line that stops the program."""
    for title in self._restarts.due():
      try:
        self.procs.restart(title, {elastic.RESTART_ENV: str(self._restarts.count(title))})
      except OSError as e:  # e.g. no memory or no process slot for it
        return f"node {title} could not be restarted: {e}"
    for title, code in self.procs.exit_codes().items():
      if code is None or self._restarts.pending(title):
        continue
      if code == 0 and title.startswith("limiter/"):
        continue
      if not (elastic.restartable(title) and self._restarts.max_restarts):
        return self.procs.problem(title, code)
      problem = self._restarts.exited(title, code, self.procs.last_error(title))
      if problem is not None:
        return problem
    return None

  def restarts(self) -> Dict[str, int]:
    """Node title -> its restarts so far."""
    return self._restarts.per_node()

  def stop(self, detail: str) -> None:
    del detail
    self.procs.stop(self._grace)

  def cpu_seconds(self) -> Dict[str, float]:
    """``group/i`` -> that node process's tree (`NodeProcesses.cpu_seconds`)."""
    return self.procs.cpu_seconds()


# The table: launch type name -> Supervisor class. `launch_types()` lists the public ones.
SUPERVISORS: Dict[str, Type[Supervisor]] = {
    "local_mt": Threads,
    "local_mp": Processes,
    "hosts": Hosts,
    "test_mt": Threads,  # Launchpad's test launch type (threads); not offered by the CLI
}
_UNLISTED = {"test_mt"}


def register(name: str, supervisor: Type[Supervisor], *, listed: bool = True) -> None:
  """Adds launch type `name` run by `supervisor` (a class satisfying `Supervisor`).
  `listed`: offered where launch types are listed (`launch_types()`: ``actorq train
  --launch`` choices and its errors); False keeps it usable by `distributed.launch` only.

  Raises:
    ValueError: `name` is empty, has whitespace, or is already registered (``local`` too).
  """
  if not isinstance(name, str) or not name or name.split() != [name]:
    raise ValueError(f"a launch type name must be a non-empty word, got {name!r}")
  if name in SUPERVISORS or name == "local":
    raise ValueError(f"launch type {name!r} is already registered")
  SUPERVISORS[name] = supervisor
  if not listed:
    _UNLISTED.add(name)


def launch_types() -> Tuple[str, ...]:
  """The listed launch types, in registration order (``local_mt, local_mp, hosts`` and
  any registered since)."""
  return tuple(name for name in SUPERVISORS if name not in _UNLISTED)


def supervisor_for(launch_type: str) -> Type[Supervisor]:
  """The Supervisor class of `launch_type`.

  Raises:
    ValueError: an unknown launch type (the message lists the known ones).
  """
  try:
    return SUPERVISORS[launch_type]
  except (KeyError, TypeError):
    raise ValueError(f"launch_type must be one of {tuple(SUPERVISORS)}, "
                     f"got {launch_type!r}") from None
