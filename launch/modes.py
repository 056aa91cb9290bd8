"""The launch table: every way a run can be launched, one row each (`MODES`), which
`launch.run(spec)` (`launch/engine.py`) looks `spec.launch` up in.

    MODES = {"local": Local(),                # one process, in-process replay (default)
             "local_mt": Program("local_mt"), # a Launchpad program in threads
             "local_mp": Program("local_mp"), # one process per node
             "hosts": Hosts("hosts"),         # one process per node on several machines
             "test_mt": Program("test_mt", listed=False)}

A row (`LaunchMode`) says what the mode is (`summary`, whether the learner computes in the
launcher's process, whether it runs actor nodes), which options of its own it takes
(`options`: `Option`s, which ``actorq train`` turns into flags and `RunSpec` keeps in
`launch_options`; `resolve_options` checks them), what ``--dry-run`` prints (`describe`)
and how it runs (`run`, returning an `Outcome`). A new launch mode is one class plus one
table entry (`register`); see docs/guides/add-a-launch-mode.md. A Launchpad launch type
registered in `supervisors.SUPERVISORS` (how a program's nodes are supervised) is a
`Program` row without an entry here.
"""
from __future__ import annotations

import dataclasses
import os
import sys
from typing import Any, Callable, Dict, List, Mapping, Optional, Protocol, Tuple

import jax

from actorq import core
from actorq.agents import population
from actorq.launch import anakin
from actorq.launch import distributed
from actorq.launch import distributed_nodes as n
from actorq.launch import elastic
from actorq.launch import engine
from actorq.launch import hosts as hosts_lib
from actorq.components import placement
from actorq.launch import local, pbt
from actorq.launch import supervisors


@dataclasses.dataclass(frozen=True)
class Option:
  """One option of a launch mode (``actorq train`` adds it as a flag).

  Attributes:
    flag: the command-line flag, e.g. ``"--hosts"``.
    dest: its key in `RunSpec.launch_options` (and in run.json's "train" with `in_run_json`).
    help: one line for ``actorq train --help``.
    default: the value when the flag is not given.
    kind: how the flag's text is read: "str", "positive_int" or "positive_float".
    metavar: the flag's placeholder in the help.
    exclusive: options of one mode with the same non-empty name exclude each other.
    in_run_json: recorded in run.json (what the run is), else how this invocation runs it.
  """
  flag: str
  dest: str
  help: str
  default: Any = None
  kind: str = "str"
  metavar: Optional[str] = None
  exclusive: str = ""
  in_run_json: bool = False


@dataclasses.dataclass
class Outcome:
  """How a launched run ended: `exit_code` (0: finished), the lines to print on stdout
  (`lines`) and on stderr (`errors`), the mode's own result (`local.RunResult`,
  `distributed.DistributedResult`) and `finish`, called after the lines are printed."""
  exit_code: int
  lines: List[str] = dataclasses.field(default_factory=list)
  errors: List[str] = dataclasses.field(default_factory=list)
  result: Any = None
  finish: Callable[[], None] = lambda: None


class Report(Protocol):
  """What a mode tells whoever launched it while it runs (``actorq train`` prints it; a
  run from Python passes None: nothing is told)."""

  def say(self, line: str) -> None:
    """A line for stdout (the run starts, resumes, ...)."""

  def warn(self, line: str) -> None:
    """A line for stderr."""

  def steps(self, counts: Dict[str, Any]) -> None:
    """After every actor step of an in-process run: actor_steps, episodes, learner_steps,
    eval_return."""

  def poll(self, counts: Dict[str, float]) -> None:
    """About twice a second in a program: the counter's totals."""


class LaunchMode(Protocol):
  """One row of the launch table.

  Attributes:
    summary: a few words for ``actorq train --help``.
    in_process: whether the learner computes in the launcher's process
      (`placement.check_learner_device`).
    distributed: whether it runs actor nodes (``--num-actors``).
    on_other_hosts: whether its nodes (the learner's among them) run on other machines,
      whose own jax decides the learner's device (`engine.place` checks none here).
    listed: offered by ``actorq train --launch``.
    options: the mode's own options (`Option`).
    populations: whether it runs a population's spec (`RunSpec.population`; `engine.run`
      refuses one elsewhere).
  """
  summary: str
  in_process: bool
  distributed: bool
  on_other_hosts: bool
  listed: bool
  options: Tuple[Option, ...]
  populations: bool

  def resolve_options(self, given: Mapping[str, Any], num_actors: Optional[int],
                      environ: Mapping[str, str]) -> Dict[str, Any]:
    """The mode's options as the run takes them (`given`: dest -> value or None).

    Raises:
      core.UsageError: one line naming the flag, the value and what is allowed."""

  def check(self, spec: Any) -> None:
    """Refuses, before anything is written, a run this mode cannot launch.

    Raises:
      core.UsageError: one line naming what is wrong and what is allowed."""

  def describe(self, spec: Any, config: Any) -> str:
    """What ``--dry-run`` prints."""

  def run(self, spec: Any, config: Any, report: Optional[Report], **kwargs: Any) -> Outcome:
    """Runs `config` (built from `spec`); run.json is written already."""


def _say(report: Optional[Report], line: str) -> None:
  if report is not None:
    report.say(line)


def _starting(report: Optional[Report], spec, how: str) -> None:
  """The line a mode says as its run starts: what trains, for how long (`how`), and where
  the logs go."""
  _say(report, f"actorq: {'resuming' if spec.resume else 'training'} {spec.agent} on "
       f"{spec.env} for {how}; logs in {spec.logdir}")


def _recording(spec, report: Optional[Report], progress):
  """`progress`, after which a resumed run records a changed setting into run.json at its
  first actor step (the checkpoint was taken: `engine.record_resumed_settings`)."""
  if not spec.resume:
    return progress
  recorded = []

  def first_then_progress(counts):
    if not recorded:
      recorded.append(True)
      engine.record_resumed_settings(spec, report)
    if progress is not None:
      progress(counts)
  return first_then_progress


class _OneProcess:
  """What the rows of one process and one actor share: the learner in this process, no
  actor nodes, no options of their own, nothing to check before the run."""
  in_process = True
  distributed = False
  on_other_hosts = False
  listed = True
  options: Tuple[Option, ...] = ()
  populations = False

  def resolve_options(self, given, num_actors, environ) -> Dict[str, Any]:
    del given, num_actors, environ
    return {}

  def check(self, spec) -> None:
    del spec


class Local(_OneProcess):
  """One process: the learner, one actor and a seeded in-process replay (`local.train`);
  a builder with a loop of its own (`own_loop`: a population) runs that loop."""
  summary = "one process (default)"
  populations = True  # runs a population's spec (`engine.run` asks)

  def describe(self, spec, config) -> str:
    del config
    return (f"launch local: one process (seeded in-process replay built from the agent's "
            f"reverb.Table definitions, 1 actor, learner, evaluation every {spec.eval_every} "
            "actor steps); no Launchpad program (--launch local_mt: real Reverb in one process)")

  def run(self, spec, config, report, progress=None, on_learner_step=None,
          **kwargs) -> Outcome:
    """`local.train(config)`; `progress` (default: `report.steps`) after every actor step.
    A builder with a loop of its own (`own_loop`) runs its loop instead (`kwargs` go to
    it); the outcome's result is what the loop returns."""
    own = own_loop(config.builder)
    if own is not None:
      return Outcome(0, result=own(spec, config, report, **kwargs))
    learner_on = placement.device_name(placement.learner_device(config.learner_device))
    _starting(report, spec, f"{spec.steps} steps (seed {spec.seed}, actors "
              f"{config.precision} on cpu, learner on {learner_on})")
    if progress is None and report is not None:
      progress = report.steps
    result = local.train(config, progress=_recording(spec, report, progress),
                         on_learner_step=on_learner_step)
    lines = []
    if result.resumed_from:
      lines.append(f"actorq: resumed from {result.resumed_from} (actor step "
                   f"{result.resumed_actor_steps})")
    lines += [f"actorq: done in {result.wall_seconds:.0f} s: {result.actor_steps} actor steps, "
              f"{result.learner_steps} learner steps, {result.episodes} episodes; best "
              f"evaluation return {result.best_eval_return:.1f} at step {result.best_eval_step}",
              f"final evaluation return: {result.final_eval_return:.1f} (mean over "
              f"{spec.eval_episodes} greedy episodes, actors {config.precision}); learner "
              f"parameters {result.params_checksum}"]
    return Outcome(0, lines, result=result)


def own_loop(builder) -> Optional[Callable[..., Any]]:
  """The loop `builder` runs in one process instead of `local.train`'s one actor, from the
  table below (builder class -> train(spec, config, report, **kwargs) returning the run's
  result), else None. A population steps its N members' actors and learner together
  (`launch.pbt.train`). (A function, read when a run starts: `pbt` imports this module.)"""
  return {population.PopulationBuilder: pbt.train}.get(type(builder))


# Elastic actors (`launch/elastic.py`): the option of every launch type whose supervisor
# restarts a dead actor or evaluator node (`restarts_nodes`).
MAX_ACTOR_RESTARTS = Option(
    "--max-actor-restarts", "max_actor_restarts", "restart a dead actor or evaluator node in "
    "its place, with a fresh seed, up to K times per node (default: "
    f"{elastic.DEFAULT_MAX_RESTARTS}); 0: any node's death stops the run", kind="nonnegative_int",
    metavar="K")


class Anakin(_OneProcess):
  """One process, compiled: acting, replay and learning of an agent on a JAX environment
  in one jitted program (`launch/anakin.py`; Hessel et al. 2021's Anakin architecture)."""
  summary = ("one process, acting and learning compiled into one jitted program vmapped "
             "over seeds (JAX environments, e.g. gymnax:CartPole-v1)")

  def check(self, spec) -> None:
    anakin.check(spec)  # an environment with a JAX form, an agent with a compiled system

  def describe(self, spec, config) -> str:
    del config
    return anakin.describe(spec)

  def run(self, spec, config, report, progress=None) -> Outcome:
    """`anakin.run([spec])`: one seed (`actorq sweep --launch anakin` vmaps several)."""
    del config, progress
    _starting(report, spec, f"{spec.steps} steps (seed {spec.seed}, --launch anakin: "
              f"compiled, actors {spec.config.get('actor_precision', 'fp32')} on "
              f"{jax.devices()[0].platform})")
    result, = anakin.run([spec], log=(lambda m: None) if report is None else report.say)
    engine.record_resumed_settings(spec, report)
    return Outcome(0, anakin.train_lines(spec, result), result=result)


class Program:
  """A Launchpad program (`distributed.make_program`) run by the launch type's supervisor
  (`supervisors.SUPERVISORS[name]`); a supervisor that restarts dead actor nodes
  (`restarts_nodes`) gives the row the `MAX_ACTOR_RESTARTS` option."""
  distributed = True
  on_other_hosts = False
  populations = True  # (`agents.population.program`)

  def __init__(self, name: str, listed: bool = True):
    self.name, self.listed = name, listed

  @property
  def options(self) -> Tuple[Option, ...]:
    restarts = getattr(supervisors.supervisor_for(self.name), "restarts_nodes", False)
    return (MAX_ACTOR_RESTARTS,) if restarts else ()

  @property
  def summary(self) -> str:
    return supervisors.supervisor_for(self.name).summary

  @property
  def in_process(self) -> bool:
    return supervisors.supervisor_for(self.name).in_process

  def resolve_options(self, given, num_actors, environ) -> Dict[str, Any]:
    del num_actors, environ
    if MAX_ACTOR_RESTARTS in self.options:
      return {MAX_ACTOR_RESTARTS.dest: given.get(MAX_ACTOR_RESTARTS.dest)}
    return {}

  def check(self, spec) -> None:
    del spec

  def program(self, spec, config):
    """The program (`distributed.make_program`) of `config`.

    Raises:
      checkpointing.CheckpointError: `config.resume` and no readable checkpoint."""
    return distributed.make_program(config, spec.num_actors, name=f"actorq-{spec.agent}",
                                    **self._program_kwargs(spec))

  def _program_kwargs(self, spec) -> Dict[str, Any]:
    return {"options": self._options(spec)}

  def _options(self, spec):
    """The program's `distributed.DistributedOptions` from the row's options."""
    restarts = spec.launch_options.get(MAX_ACTOR_RESTARTS.dest)
    return distributed.DistributedOptions(
        max_actor_restarts=elastic.DEFAULT_MAX_RESTARTS if restarts is None else restarts)

  def describe(self, spec, config) -> str:
    return distributed.describe(self.program(spec, config), spec.launch)

  def run(self, spec, config, report) -> Outcome:
    dp = self.program(spec, config)
    engine.record_resumed_settings(spec, report)  # the program took the checkpoint
    _starting(report, spec, f"{spec.steps} actor steps with {spec.num_actors} actors "
              f"({spec.launch}, seed {spec.seed}, actors {config.precision} on cpu, learner "
              f"device {config.learner_device})")
    if dp.resumed_from:
      _say(report, f"actorq: resuming from {dp.resumed_from} (actor step "
           f"{int(dp.resumed_counts[n.ACTOR_STEPS])}, learner step "
           f"{int(dp.resumed_counts[n.LEARNER_STEPS])})")
    result = distributed.launch(dp, spec.launch, echo=report is not None,
                                on_poll=None if report is None else report.poll)
    outcome = Outcome(result.exit_code, [distributed.summary_line(result)], result=result,
                      finish=lambda: distributed.exit_now(result))
    if result.reason == "signal":  # which checkpoint the run continues from, truthfully
      outcome.errors.append(engine.stop_message(spec.logdir, result.checkpoint))
    if result.evaluations:
      outcome.lines.append(f"final evaluation return: {result.final_eval_return:.1f} (mean "
                           f"over {spec.eval_episodes} greedy episodes, actors "
                           f"{config.precision})")
    return outcome


class Hosts(Program):
  """A Launchpad program on several machines (`launch/hosts.py`): its options say where
  (``--hosts``/``--hosts-file`` or the SLURM allocation), on which ports, how each host's
  runner starts, with which Python, and when a silent node is taken for dead."""
  on_other_hosts = True
  populations = False  # (not tried on several machines yet)
  options = (MAX_ACTOR_RESTARTS,
      Option("--hosts", "hosts", "machines, reachable from each other; the first runs replay, "
             "counter and learner, the others actors and evaluator; 'slurm': the SLURM "
             "allocation's nodes (the default inside one)", metavar="H1,H2,...",
             exclusive="where", in_run_json=True),
      Option("--hosts-file", "hosts_file", "one host per line, '#' comments", metavar="FILE",
             exclusive="where"),
      Option("--port-base", "port_base", f"node k listens on PORT+k of its host (default: "
             f"{hosts_lib.DEFAULT_PORT_BASE}; 2 actors use 6 ports)",
             default=hosts_lib.DEFAULT_PORT_BASE, kind="positive_int", metavar="PORT",
             in_run_json=True),
      Option("--start", "start", "how each host's runner is started: ssh (default), srun "
             "(default inside a SLURM allocation), print (print the commands, start nothing), "
             "or a command template with {host} and/or {index}, e.g. 'ssh -p 2222 {host}'",
             metavar="HOW", in_run_json=True),
      Option("--host-timeout", "host_timeout", "a node (or the launcher) that has not polled "
             "the program's stop for this long is taken for dead and the program stops "
             "(default: 15; at least 3 s)", kind="positive_float", metavar="SECONDS"),
      Option("--node-python", "node_python", "Python with actorq installed on the hosts "
             "(default: this one's path)", default=sys.executable, metavar="PATH"),
  )

  def resolve_options(self, given, num_actors, environ) -> Dict[str, Any]:
    """hosts (from hosts, hosts_file or the SLURM allocation), port_base, start,
    node_python and host_timeout (None: the default of `distributed.DistributedOptions`)."""
    try:
      if given.get("hosts_file") is not None:
        names = hosts_lib.read_hosts_file(given["hosts_file"])
      elif given.get("hosts") not in (None, "slurm"):
        names = (hosts_lib.parse_host_list(given["hosts"]) if isinstance(given["hosts"], str)
                 else tuple(given["hosts"]))
      else:
        names = hosts_lib.slurm_hosts(environ)
        if names is None:
          raise ValueError("--launch hosts needs --hosts H1,H2,..., --hosts-file FILE or a "
                           "SLURM allocation (SLURM_JOB_NODELIST)" + (
                               " (--hosts slurm: SLURM_JOB_NODELIST is not set)"
                               if given.get("hosts") == "slurm" else ""))
      slurm = given.get("hosts") in (None, "slurm") and given.get("hosts_file") is None
      port_base = given.get("port_base") or hosts_lib.DEFAULT_PORT_BASE
      config = hosts_lib.HostsConfig(names, port_base,
                                     given.get("start") or ("srun" if slurm else "ssh"),
                                     given.get("node_python") or sys.executable)
      timeout = given.get("host_timeout")
      if timeout is not None and timeout < 3:
        raise ValueError(f"--host-timeout must be >= 3 seconds, got {timeout:g}")
      if config.port_base + 3 + num_actors > 65535:
        raise ValueError(f"--port-base {port_base}: the program's "
                         f"{4 + num_actors} ports run past 65535")
    except ValueError as e:
      raise core.UsageError(str(e)) from None
    return {"hosts": config.hosts, "port_base": config.port_base, "start": config.start,
            "node_python": config.python, "host_timeout": timeout,
            MAX_ACTOR_RESTARTS.dest: given.get(MAX_ACTOR_RESTARTS.dest)}

  def _program_kwargs(self, spec) -> Dict[str, Any]:
    o = spec.launch_options
    options = self._options(spec)
    if o.get("host_timeout") is not None:
      options = dataclasses.replace(options, silent_after_s=o["host_timeout"])
    return {"hosts": hosts_lib.HostsConfig(o["hosts"], o["port_base"], o["start"],
                                           o.get("node_python") or sys.executable),
            "options": options}


# The table: launch mode name -> its row. A `Program` row for a launch type registered in
# `supervisors.SUPERVISORS` alone is made when asked for (`mode_for`).
MODES: Dict[str, LaunchMode] = {
    "local": Local(),
    "anakin": Anakin(),
    "local_mt": Program("local_mt"),
    "local_mp": Program("local_mp"),
    "hosts": Hosts("hosts"),
    "test_mt": Program("test_mt", listed=False),
}


def register(name: str, mode: LaunchMode) -> None:
  """Adds launch mode `name` (an instance satisfying `LaunchMode`).

  Raises:
    ValueError: `name` is not a word, or is taken (here or in `supervisors.SUPERVISORS`).
  """
  if not isinstance(name, str) or not name or name.split() != [name]:
    raise ValueError(f"a launch mode name must be a non-empty word, got {name!r}")
  if name in MODES or name in supervisors.SUPERVISORS:
    raise ValueError(f"launch mode {name!r} is already registered")
  MODES[name] = mode


def mode_for(name: str) -> LaunchMode:
  """The row of launch mode `name`.

  Raises:
    ValueError: an unknown name (the message lists the known ones).
  """
  if name in MODES:
    return MODES[name]
  if name in supervisors.SUPERVISORS:
    return Program(name)
  raise ValueError(f"launch must be one of {', '.join(names(listed_only=False))}, got {name!r}")


def names(listed_only: bool = True) -> Tuple[str, ...]:
  """The launch modes: the table's, then the launch types registered in
  `supervisors.SUPERVISORS` since (``local, local_mt, local_mp, hosts, ...``)."""
  listed = set(supervisors.launch_types())
  found = [n for n, m in MODES.items() if m.listed or not listed_only]
  return tuple(found + [n for n in supervisors.SUPERVISORS if n not in MODES
                        and (n in listed or not listed_only)])


def options() -> List[Tuple[str, Option]]:
  """Every mode's options as (mode name, option), in table order."""
  return [(name, o) for name in names(listed_only=False) for o in mode_for(name).options]


def options_by_flag() -> List[Tuple[Tuple[str, ...], Option]]:
  """Every option once, with the modes that have it (an option several modes share, e.g.
  `MAX_ACTOR_RESTARTS`, is one flag), in table order."""
  found: Dict[str, Tuple[List[str], Option]] = {}
  for name, option in options():
    found.setdefault(option.flag, ([], option))[0].append(name)
  return [(tuple(names_), option) for names_, option in found.values()]


def resolve(launch: str, given: Mapping[str, Any], num_actors: Optional[int],
            environ: Mapping[str, str] = os.environ) -> Dict[str, Any]:
  """The options of launch mode `launch` from `given` (dest -> value, None or the option's
  default when not given).

  Raises:
    core.UsageError: an option of another mode given (``--hosts needs --launch hosts``),
      or one `resolve_options` refuses.
  """
  mode = mode_for(launch)
  own = {o.dest for o in mode.options}
  for modes_, option in options_by_flag():
    if option.dest not in own and given.get(option.dest) not in (None, option.default):
      *others, last = modes_
      why = _WHY_NOT.get(option.dest)
      raise core.UsageError(f"{option.flag} needs --launch "
                            f"{' or '.join([', '.join(others), last] if others else [last])}"
                            + (f" (--launch {launch} {why})" if why else ""))
  return mode.resolve_options({k: v for k, v in given.items() if k in own}, num_actors,
                              environ)



# Why a launch mode lacks an option (the end of `resolve`'s refusal), where it helps.
_WHY_NOT = {MAX_ACTOR_RESTARTS.dest: "runs its actors in one process and restarts none"}
