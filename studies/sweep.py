"""A multi-seed sweep: one agent configuration trained with several seeds at each actor
precision, and its aggregate with confidence intervals (`actorq sweep`).

Each run is one `actorq train` in a child process, the argv of its `launch.spec.RunSpec`
(`run_spec`: the sweep's settings, the precision's resolved config, the seed),

    python -m actorq.cli.main train --agent A --env E --seed S --steps N --eval-every K
        --eval-episodes M --logdir DIR/<P>-s<S> [--set K=V ...] (each config field that
        differs from the agent's defaults, actor_precision included)
        [--launch local_mt|local_mp --num-actors N] [--num-envs B] --no-progress

(with `launch` "anakin" the seeds of each precision instead run as one compiled program
in this process, `launch.anakin.run`, writing the same run directories), so the sweep
depends only on the command line and the run directory it writes
(`run.json`, `eval.csv`), never on the training internals. Runs are ordered seed by
seed, each seed's precisions one after the other in an order rotated by one per seed
(a slow drift of a shared machine hits every precision alike); `jobs` of them run at
once. With `launch` (a Launchpad launch type) each run is a distributed program: its seed
fixes every node's seed but not the asynchrony, so a run does not repeat, and its
evaluations fall at or a little after each multiple of `eval_every` (the evaluator node
reads the summed actor steps; the last one at or past `steps`). A run whose `eval.csv`
already holds the final evaluation (at or past `steps`) and whose
`run.json` has the sweep's settings is reused, so an interrupted sweep resumes; an
unfinished run of the sweep's settings with a readable checkpoint is continued from it
(`actorq train --resume`), any other unfinished run directory is discarded and its run
started again. SIGINT/SIGTERM to the sweep is forwarded to its children (each started in
a session of its own), which checkpoint and exit; the sweep waits for them and exits
128 + the signal (`Stopped`), leaving nothing running.

Output files (in the sweep directory):
  sweep.json     settings, machine, each precision's resolved config, every run's
                 evaluations (actor_steps, episode_return, episode_return_std)
  seeds.csv      one row per run: precision, seed, final_return, last3_return,
                 best_return, first_step_at_target, evaluations, wall_seconds, run_dir
  aggregate.json `actorq.components.aggregate.aggregate` of the seeds.csv rows
  aggregate.csv  the same as rows (precision, vs, metric, statistic, value, ci_low, ...)
  curves.png     each seed's curve thin, the IQM over seeds with its 95% stratified
                 bootstrap interval thick, one colour per precision
  table.md       the table printed at the end
  protocol.json  the margin and comparisons declared when the sweep first started
                 (`declare`); a later start with another margin is refused
  <run>/final_eval.json  the run's final policy at fp32 and at its actor precision,
                 20 greedy episodes each from environment seed 12345 (`cross_eval`),
                 written after the run; seeds.csv's final_at_fp32 / final_at_own
`render(outdir)` rewrites all but sweep.json from sweep.json (no runs).

With a record folder (`record`, `actorq sweep --record DIR`, e.g. under docs/results/ and
committed), each finished run's run.json, eval.csv and final_eval.json are copied to
DIR/runs/<run>/ as it finishes, and a sweep started where those runs are missing (another
session, a fresh clone) restores them from there first (`restore`) and reuses them: a
30-seed sweep spans sessions from what is committed. The report files are written to the
record too.
"""
from __future__ import annotations

import concurrent.futures
import csv
import dataclasses
import json
import math
import os
import shlex
import shutil
import subprocess
import sys
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from actorq import core
from actorq.components import atomic, fault_points
from actorq.components import processes
from actorq.launch import anakin, engine
from actorq.components import checkpointing
from actorq.components import run_dir as run_dir_lib
from actorq.launch import spec as spec_lib
from actorq.quantization import runtimes
from actorq.components import aggregate as ag
from actorq.studies import cross_eval
from actorq.studies import tables

SWEEP_JSON = "sweep.json"
SEEDS_FIELDS = ("precision", "seed", "final_return", "last3_return", "best_return",
                "first_step_at_target", "evaluations", "wall_seconds", "run_dir",
                "final_at_fp32", "final_at_own")
# The 2x2 (`cross_eval`): each run's final policy at fp32 and at its own actor precision.
CROSS_METRICS = ("final_at_fp32", "final_at_own")
PROTOCOL_JSON = "protocol.json"
# What a record (`--record DIR`) keeps of each finished run: enough for the report and for
# a later sweep (another session, a fresh clone) to reuse the run.
RECORD_FILES = (run_dir_lib.RUN_INFO, run_dir_lib.EVAL_CSV, cross_eval.FINAL_EVAL_JSON)
CURVE_REPS = 2_000  # bootstrap resamples per evaluation step of the curves' bands
TABLE_STATISTICS = ("iqm", "median", "mean")  # the table's column order


def run_name(precision: str, seed: int) -> str:
  """The run's directory name: ``<precision>-s<seed>``; a per-layer ``mixed:...`` precision
  is named by `runtimes.precision_slug` (``mixed-<8 hex digits>-s<seed>``; its run.json and the
  sweep's files keep the whole name)."""
  return f"{runtimes.precision_slug(precision)}-s{seed}"


def plan(precisions: Sequence[str], seeds: Sequence[int]) -> List[Tuple[str, int]]:
  """(precision, seed) runs: seed by seed, the precision order rotated by one per seed."""
  out = []
  for i, seed in enumerate(seeds):
    k = i % len(precisions)
    out += [(p, seed) for p in list(precisions[k:]) + list(precisions[:k])]
  return out


def run_spec(settings: Dict[str, Any], precision: str, seed: int,
             run_dir: Optional[str] = None) -> spec_lib.RunSpec:
  """The `RunSpec` of one (precision, seed) run of the sweep: its agent, environment, train
  and launch settings, `settings["configs"][precision]` as its config, `run_dir` as logdir."""
  launch = settings.get("launch", spec_lib.LOCAL)
  return spec_lib.RunSpec(
      agent=settings["agent"], env=settings["env"], seed=seed,
      config=settings["configs"][precision], steps=settings["steps"],
      eval_every=settings["eval_every"], eval_episodes=settings["eval_episodes"],
      launch=launch,
      num_actors=settings["num_actors"] if launch not in spec_lib.SINGLE_PROCESS else None,
      num_envs=settings.get("num_envs", 1), logdir=run_dir)


def train_argv(settings: Dict[str, Any], precision: str, seed: int, run_dir: str) -> List[str]:
  """The child's command line: `actorq train` for one (precision, seed), the run's
  `RunSpec.to_argv()` (its config as `--set` of the fields that differ from the defaults)."""
  return ([sys.executable, "-m", "actorq.cli.main", "train"]
          + run_spec(settings, precision, seed, run_dir).to_argv() + ["--no-progress"])


def launch_flags(settings: Dict[str, Any]) -> List[str]:
  """`--launch L --num-actors N` of a sweep of distributed runs; [] for single-process
  (`--launch anakin` for compiled ones)."""
  if settings.get("launch", "local") == "local":
    return []
  if settings["launch"] in spec_lib.SINGLE_PROCESS:
    return ["--launch", settings["launch"]]
  return ["--launch", settings["launch"], "--num-actors", str(settings["num_actors"])]


def nominal_step(actor_steps: int, every: int, steps: int) -> int:
  """The evaluation step an evaluation at `actor_steps` stands for: the multiple of `every`
  at or below it, capped at `steps` (the last one). A single-process run evaluates exactly
  there; a distributed run's evaluator a little after (see the module docstring), so its
  seeds' curves are aligned on these steps."""
  return int(min((actor_steps // every) * every, steps))


def read_evaluations(run_dir: str) -> List[Dict[str, float]]:
  """A run's evaluations from its eval.csv (`run_dir.read_eval_columns`: step order, the
  last row per step; [] without one)."""
  cols = run_dir_lib.read_eval_columns(run_dir)
  keys = ("episode_return", "episode_return_std", "wall_seconds")
  return [dict({k: cols[k][i] for k in keys}, actor_steps=int(step))
          for i, step in enumerate(cols.get("actor_steps", []))]


def finished(run_dir: str, steps: int) -> bool:
  """Whether the run's eval.csv holds its final evaluation, at actor step `steps` (a
  distributed run's: at or past it)."""
  evals = read_evaluations(run_dir)
  return bool(evals) and int(evals[-1]["actor_steps"]) >= steps


def finished_as_written(run_dir: str) -> bool:
  """Whether the run finished at the `--steps` its own run.json records (a finished run of
  a sweep with fewer steps is finished too, not an interrupted run to start again)."""
  try:
    steps = spec_lib.RunSpec.load(run_dir).to_json().get("train", {}).get("steps")
  except core.UsageError:
    return False
  return isinstance(steps, int) and finished(run_dir, steps)


def mismatch(run_dir: str, settings: Dict[str, Any], precision: str, seed: int) -> Optional[str]:
  """What in a finished run's run.json differs from the sweep's settings, or None."""
  try:
    info = spec_lib.RunSpec.load(run_dir).to_json()
  except core.UsageError:
    return "no readable run.json"
  want = run_spec(settings, precision, seed).to_json()
  for key, value in want.items():
    if info.get(key) != value:
      if key in ("config", "train"):
        got = info.get(key) or {}
        diff = sorted(k for k in set(value) | set(got) if value.get(k) != got.get(k))
        return f"{key} {', '.join(f'{k}={got.get(k)!r}' for k in diff)} (sweep: " + ", ".join(
            f"{k}={value.get(k)!r}" for k in diff) + ")"
      return f"{key} {info.get(key)!r} (sweep: {value!r})"
  return None


def check_reusable(outdir: str, settings: Dict[str, Any]) -> None:
  """Refuses a sweep directory holding finished runs of other settings, or a non-empty
  directory where a run would go that `actorq train` did not write (it would be replaced).

  Also refuses the directory of an `actorq train` run (its run.json or checkpoints/):
  a sweep's runs go into folders of their own beside its reports.

  Raises:
    ValueError: naming the run and the first setting that differs.
  """
  held = [n for n in (run_dir_lib.RUN_INFO, run_dir_lib.CHECKPOINTS)
          if os.path.exists(os.path.join(outdir, n))]
  if held:
    raise ValueError(f"{outdir} is the run directory of an 'actorq train' run (it holds "
                     f"{' and '.join(held)}); give a new --logdir")
  for precision, seed in plan(settings["precisions"], settings["seeds"]):
    run_dir = os.path.join(outdir, run_name(precision, seed))
    if (os.path.isdir(run_dir) and os.listdir(run_dir)
        and not os.path.isfile(os.path.join(run_dir, run_dir_lib.RUN_INFO))):
      raise ValueError(f"{run_dir} is not a run directory of 'actorq train' (no run.json) and "
                       "a run would replace it; give a new --logdir")
    if finished(run_dir, settings["steps"]) or finished_as_written(run_dir):
      why = mismatch(run_dir, settings, precision, seed)
      if why:
        raise ValueError(f"{run_dir} is a finished run of other settings: {why}; "
                         "give a new --logdir")


def declare(outdir: str, settings: Dict[str, Any]) -> Dict[str, Any]:
  """Writes DIR/protocol.json at the sweep's first start (the margin of its verdicts, the
  reference, precisions, seeds and the time: declared before any run) and returns it; a
  later start keeps the first declaration.

  Raises:
    ValueError: the sweep was declared with another margin (or with one, and none now).
  """
  path = os.path.join(outdir, PROTOCOL_JSON)
  if os.path.isfile(path):
    with open(path, encoding="utf-8") as f:
      declared = json.load(f)
    if declared.get("margin") != settings.get("margin"):
      raise ValueError(f"{path} declares margin {declared.get('margin')} (at "
                       f"{declared.get('declared')}), before its runs; this start gives "
                       f"{settings.get('margin')}: a margin is fixed before the runs (use "
                       "the declared one, or a new --logdir)")
    return declared
  declared = {"margin": settings.get("margin"), "reference": settings["reference"],
              "precisions": list(settings["precisions"]), "seeds": list(settings["seeds"]),
              "declared": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "command": command(settings)}
  write_protocol(outdir, declared)
  return declared


def write_protocol(directory: str, declared: Dict[str, Any]) -> None:
  """DIR/protocol.json (atomically): `declare`'s record, also kept beside a record's runs."""
  atomic.write_json(os.path.join(directory, PROTOCOL_JSON), declared)


def restore(settings: Dict[str, Any], outdir: str, record: str,
            log: Callable[[str], None] = print) -> List[str]:
  """Copies into `outdir` each planned run that is unfinished there and finished in the
  record (RECORD_FILES of DIR/runs/<run>/), and the record's protocol.json where `outdir`
  has none (so `declare` keeps the first declaration); returns the runs' names. A run of other settings
  is then refused by `check_reusable` as any finished run is."""
  restored = []
  declared = os.path.join(record, PROTOCOL_JSON)
  if os.path.isfile(declared) and not os.path.exists(os.path.join(outdir, PROTOCOL_JSON)):
    shutil.copy2(declared, os.path.join(outdir, PROTOCOL_JSON))  # the first declaration
  for precision, seed in plan(settings["precisions"], settings["seeds"]):
    name = run_name(precision, seed)
    src, dst = os.path.join(record, "runs", name), os.path.join(outdir, name)
    if finished(dst, settings["steps"]) or not finished(src, settings["steps"]):
      continue
    if os.path.exists(dst):  # an unfinished attempt: the recorded run replaces it
      shutil.rmtree(dst)
    os.makedirs(dst)
    for f in RECORD_FILES:
      if os.path.isfile(os.path.join(src, f)):
        shutil.copy2(os.path.join(src, f), os.path.join(dst, f))
    restored.append(name)
    log(f"  {name}: restored from the record {record}")
  return restored


def keep(outdir: str, record: str, name: str) -> None:
  """Copies a finished run's RECORD_FILES to RECORD/runs/<name>/ (each file atomically)."""
  dst = os.path.join(record, "runs", name)
  os.makedirs(dst, exist_ok=True)
  for f in RECORD_FILES:
    src = os.path.join(outdir, name, f)
    if os.path.isfile(src):
      with open(src, "rb") as fin, atomic.atomic_write(os.path.join(dst, f), "wb") as fout:
        fout.write(fin.read())


def cross_eval_argv(run_dir: str) -> List[str]:
  """The child that writes a finished run's final_eval.json (`cross_eval`)."""
  return [sys.executable, "-m", "actorq.studies.cross_eval", run_dir]


def needs_cross_eval(run_dir: str) -> bool:
  """A finished single-process run without final_eval.json but with a checkpoint."""
  return (cross_eval.read(run_dir) is None and bool(checkpointing.list_checkpoints(
      os.path.join(run_dir, run_dir_lib.CHECKPOINTS))))


def resume_argv(settings: Dict[str, Any], run_dir: str) -> List[str]:
  """The child's command line that continues an interrupted run of this sweep from its
  newest checkpoint (`actorq train --resume`: agent, environment, seed, config and steps
  come from its run.json)."""
  return ([sys.executable, "-m", "actorq.cli.main", "train", "--resume", run_dir,
           "--no-progress"] + launch_flags(settings))


def resumable(run_dir: str, settings: Dict[str, Any], precision: str, seed: int) -> bool:
  """Whether an unfinished run directory is this sweep's run (its run.json has the sweep's
  settings) with a readable checkpoint to continue from."""
  if not os.path.isdir(run_dir) or mismatch(run_dir, settings, precision, seed) is not None:
    return False
  path, _ = checkpointing.restore_latest(os.path.join(run_dir, "checkpoints"),
                                         checkpointing.validate_run)
  return path is not None


def _run_one(settings, outdir, precision, seed, children: Optional[processes.ChildGroup] = None
             ) -> Tuple[str, int, Optional[str], float]:
  """Trains one (precision, seed) in a child; (precision, seed, error or None, seconds).

  An unfinished run of this sweep with a readable checkpoint (a sweep stopped before) is
  continued (`--resume`); any other unfinished run directory is started again.
  """
  children = children or processes.ChildGroup()
  name = run_name(precision, seed)
  run_dir = os.path.join(outdir, name)
  if resumable(run_dir, settings, precision, seed):
    argv = resume_argv(settings, run_dir)
  else:
    if os.path.exists(run_dir):  # interrupted before its first checkpoint: start again
      shutil.rmtree(run_dir)
    argv = train_argv(settings, precision, seed, run_dir)
  os.makedirs(os.path.join(outdir, "logs"), exist_ok=True)
  log_path = os.path.join(outdir, "logs", f"{name}.log")
  start = time.time()
  with open(log_path, "a" if "--resume" in argv else "w", encoding="utf-8") as logf:
    proc = children.start(argv, stdout=logf, stderr=subprocess.STDOUT,
                          stdin=subprocess.DEVNULL,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2",
                                   **{core.STOP_WITH_PARENT_ENV: str(os.getpid())}))
    if proc is None:
      return precision, seed, f"{name}: not started (the sweep was stopped)", 0.0
    fault_points.point("sweep_child")
    try:
      proc.wait()
    finally:
      children.finished(proc)
  seconds = time.time() - start
  if children.stopping is not None:
    done = finished(run_dir, settings["steps"])
    return precision, seed, None if done else (
        f"{name} stopped by signal {children.stopping} (exit {proc.returncode})"), seconds
  if proc.returncode == 0 and finished(run_dir, settings["steps"]):
    proc = _cross_eval(run_dir, log_path, children)
    if proc is None or children.stopping is not None:
      return precision, seed, None, seconds  # the run is finished; its 2x2 comes on rerun
  if proc.returncode != 0 or not finished(run_dir, settings["steps"]):
    with open(log_path, encoding="utf-8") as f:
      tail = "".join(f.readlines()[-10:])
    why = (f"exit {proc.returncode}" if proc.returncode else
           f"exit 0 but no evaluation at step {settings['steps']} in its eval.csv")
    return precision, seed, f"{name} failed ({why}); last lines of {log_path}:\n{tail}", seconds
  return precision, seed, None, seconds


def _cross_eval(run_dir: str, log_path: str, children: processes.ChildGroup):
  """Runs the `cross_eval` child of a finished run (its output appended to the run's
  log); the finished process, or None when the sweep was stopped before it started."""
  with open(log_path, "a", encoding="utf-8") as logf:
    proc = children.start(cross_eval_argv(run_dir), stdout=logf, stderr=subprocess.STDOUT,
                          stdin=subprocess.DEVNULL,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    if proc is None:
      return None
    try:
      proc.wait()
    finally:
      children.finished(proc)
  return proc


class Stopped(Exception):
  """The sweep was stopped by a signal (`signum`) after its children were stopped and
  reaped. `runs`: the runs stopped part-way with a checkpoint (each resumes from it when
  the same sweep runs again); `restart`: those stopped before their first checkpoint
  (each starts again)."""

  def __init__(self, signum: int, runs: List[str], restart: Sequence[str] = ()):
    super().__init__(f"signal {signum}")
    self.signum, self.runs, self.restart = int(signum), list(runs), list(restart)


def run_all(settings: Dict[str, Any], outdir: str, jobs: int = 1,
            log: Callable[[str], None] = print, record: Optional[str] = None) -> List[str]:
  """Trains every (precision, seed) of the sweep not already finished in `outdir`,
  `jobs` at a time; returns the failures' messages (empty: all runs finished).

  SIGINT or SIGTERM to the sweep (in the main thread) is forwarded to the running
  children, which checkpoint and exit as `actorq train` does; no new run starts, every
  child is waited for, and then `Stopped` is raised (case B11).

  A reused single-process run without its final_eval.json (a run of an earlier version
  of the sweep) gets it first (`cross_eval`). With `record`, every finished run is kept
  there (`keep`).

  Raises:
    Stopped: the sweep was signalled.
  """
  todo, total = [], 0
  for precision, seed in plan(settings["precisions"], settings["seeds"]):
    total += 1
    name = run_name(precision, seed)
    run_dir = os.path.join(outdir, name)
    if finished(run_dir, settings["steps"]):
      log(f"  {name}: finished before, reused")
      if settings.get("launch", "local") == "local" and needs_cross_eval(run_dir):
        log(f"  {name}: evaluating its final policy at fp32 and {precision} (final_eval.json)")
        subprocess.run(cross_eval_argv(run_dir), check=False, stdin=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
      if record:
        keep(outdir, record, name)
    else:
      todo.append((precision, seed))
  if settings.get("launch") == spec_lib.ANAKIN:
    return _run_compiled(settings, outdir, todo, total, log)
  failures, stopped = [], []
  done = total - len(todo)
  children = processes.ChildGroup()
  with processes.Signals() as sigs, \
      concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
    futures = [pool.submit(_run_one, settings, outdir, p, s, children) for p, s in todo]
    pending = set(futures)
    while pending:
      finished_now, pending = concurrent.futures.wait(
          pending, timeout=0.2, return_when=concurrent.futures.FIRST_COMPLETED)
      if sigs.received is not None and children.stopping is None:
        log(f"actorq sweep: signal {sigs.received}: stopping the running runs (each "
            "writes a checkpoint) ...")
        children.stop(sigs.received)
      for future in finished_now:
        precision, seed, error, seconds = future.result()
        if children.stopping is not None:
          if error and "not started" not in error:
            stopped.append((precision, seed))
          continue
        done += 1
        if error:
          failures.append(error)
          log(f"[{done}/{total}] {run_name(precision, seed)}: FAILED after {seconds:.0f} s")
          continue
        evals = read_evaluations(os.path.join(outdir, run_name(precision, seed)))
        log(f"[{done}/{total}] {run_name(precision, seed)}: final return "
            f"{evals[-1]['episode_return']:.1f} ({seconds:.0f} s)")
        if record:
          keep(outdir, record, run_name(precision, seed))
  if children.stopping is not None:
    ckpt = lambda p, s: checkpointing.list_checkpoints(
        os.path.join(outdir, run_name(p, s), "checkpoints"))
    raise Stopped(children.stopping, sorted(run_name(p, s) for p, s in stopped if ckpt(p, s)),
                  sorted(run_name(p, s) for p, s in stopped if not ckpt(p, s)))
  return failures


def _run_compiled(settings: Dict[str, Any], outdir: str, todo: List[Tuple[str, int]],
                  total: int, log: Callable[[str], None]) -> List[str]:
  """`--launch anakin`: each precision's unfinished seeds as ONE compiled program in this
  process (`launch.anakin.run`, seeds vmapped), writing the same run directories as the
  child runs. The seeds of a precision resume together when every one has a checkpoint
  of this sweep; otherwise they start again. A signal checkpoints them and raises
  `Stopped`."""
  failures: List[str] = []
  done = total - len(todo)
  for precision in settings["precisions"]:
    seeds = [s for p, s in todo if p == precision]
    if not seeds:
      continue
    dirs = [os.path.join(outdir, run_name(precision, s)) for s in seeds]
    resume = all(resumable(d, settings, precision, s) for d, s in zip(dirs, seeds))
    if not resume:
      for d in dirs:
        if os.path.exists(d):
          shutil.rmtree(d)
    specs = [engine.open_run_dir(dataclasses.replace(run_spec(settings, precision, s, d),
                                                     resume=resume))
             for s, d in zip(seeds, dirs)]  # run.json by its one writer
    start = time.time()
    log(f"  {precision}: seeds {seed_text(seeds)} in one compiled program"
        + (" (resumed)" if resume else ""))
    try:
      results = anakin.run(specs, log=log)
    except KeyboardInterrupt as e:
      raise Stopped(getattr(e, "signum", 2), [run_name(precision, s) for s in seeds]) from None
    except (core.RunFailure, checkpointing.CheckpointError) as e:
      failures.append(f"{precision} seeds {seed_text(seeds)} failed: {e}")
      continue
    seconds = time.time() - start
    for s, r in zip(seeds, results):
      done += 1
      log(f"[{done}/{total}] {run_name(precision, s)}: final return {r.final_eval_return:.1f} "
          f"({seconds:.0f} s for the {len(seeds)} seeds)")
  return failures


def collect(settings: Dict[str, Any], outdir: str) -> List[Dict[str, Any]]:
  """Every run's evaluations, in plan order, for sweep.json."""
  return [{"precision": p, "seed": s, "run_dir": run_name(p, s),
           "evaluations": read_evaluations(os.path.join(outdir, run_name(p, s))),
           "final_eval": cross_eval.read(os.path.join(outdir, run_name(p, s)))}
          for p, s in plan(settings["precisions"], settings["seeds"])]


# ---------------------------------------------------------------------------------
# Report: seeds.csv, aggregate.{json,csv}, curves.png, table.md.
# ---------------------------------------------------------------------------------
def seed_rows(runs: Sequence[Dict[str, Any]], target: Optional[float]) -> List[Dict[str, Any]]:
  """One row per run (SEEDS_FIELDS), sorted by precision order of appearance and seed."""
  rows = []
  for r in runs:
    ev = r["evaluations"]
    scores = ag.run_scores([e["actor_steps"] for e in ev], [e["episode_return"] for e in ev],
                           target)
    cross = (r.get("final_eval") or {}).get("mean", {})
    rows.append(dict(scores, precision=r["precision"], seed=r["seed"], evaluations=len(ev),
                     wall_seconds=ev[-1].get("wall_seconds", math.nan), run_dir=r["run_dir"],
                     final_at_fp32=cross.get(core.FP32, math.nan),
                     final_at_own=cross.get(r["precision"], math.nan)))
  order = {p: i for i, p in enumerate(dict.fromkeys(r["precision"] for r in runs))}
  return sorted(rows, key=lambda row: (order[row["precision"]], row["seed"]))


def read_seeds_csv(path: str) -> List[Dict[str, Any]]:
  """seeds.csv back as typed rows (floats written with repr read back exactly)."""
  with open(path, newline="", encoding="utf-8") as f:
    rows = list(csv.DictReader(f))
  for row in rows:
    row["seed"] = int(row["seed"])
    for key in ("final_return", "last3_return", "best_return", "wall_seconds"):
      row[key] = float(row[key])
    for key in CROSS_METRICS:  # absent in a seeds.csv of an earlier version: NaN
      row[key] = float(row.get(key) or "nan")
    row["evaluations"] = int(row["evaluations"])
    step = row["first_step_at_target"]
    row["first_step_at_target"] = int(step) if step else None
  return rows


def _ci_cell(entry: Dict[str, float], digits: int = 1) -> str:
  v, lo, hi = (entry[k] for k in ("value", "ci_low", "ci_high"))
  return f"{v:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"


def format_table(result: Dict[str, Any], meta: Dict[str, Any]) -> str:
  """Markdown: per precision the IQM, median and mean of the final and last-3 returns with
  95% intervals and the target figures; then each precision vs the reference, paired."""
  target = result["target"]
  header = ["precision", "seeds", "final IQM [95% CI]", "final median", "final mean",
            f"last-{ag.LAST_EVALS} IQM [95% CI]", f"last-{ag.LAST_EVALS} median",
            f"last-{ag.LAST_EVALS} mean"]
  if target is not None:
    header += [f"reached {target:g}", f"median step to {target:g}"]
  rows = []
  for p, e in result["precisions"].items():
    row = [p, str(e["n"])]
    for metric in ag.METRICS:
      row += [_ci_cell(e[metric][s]) for s in TABLE_STATISTICS]
    if target is not None:
      t = e["target"]
      row += [f"{t['reached']}/{t['runs']}",
              "not reached" if t["median_first_step"] is None else f"{t['median_first_step']:,.0f}"]
    rows.append(row)
  out = tables.markdown_table(header, rows)
  if result["comparisons"]:
    header = ["paired by seed", "seeds", "final: mean difference [95% CI]",
              "final: P(X > ref) [95% CI]", f"last-{ag.LAST_EVALS}: mean difference [95% CI]",
              f"last-{ag.LAST_EVALS}: P(X > ref) [95% CI]"]
    margin = result.get("margin")
    if margin is not None:
      header += [f"final: verdict at margin {margin:g} (90% paired t)",
                 f"last-{ag.LAST_EVALS}: verdict at margin {margin:g} (90% paired t)",
                 "final: pairs needed (sd)"]
    rows = []
    for p, c in result["comparisons"].items():
      row = [f"{p} vs {c['reference']}", str(c["n"])]
      for metric in ag.METRICS:
        row += [_ci_cell(c[metric]["difference"]),
                _ci_cell(c[metric]["probability_of_improvement"], 2)]
      if margin is not None:
        row += [_verdict_cell(c[metric]["tost"]) for metric in ag.METRICS]
        t = c["final_return"]["tost"]
        row.append("-" if t.get("pairs_needed") is None else
                   f"{t['pairs_needed']} ({t['sd_difference']:.1f})")
      rows.append(row)
    out += "\n\n" + tables.markdown_table(header, rows)
  b = result["bootstrap"]
  m = meta["machine"]
  launch = meta.get("launch", "local")
  distributed = launch not in spec_lib.SINGLE_PROCESS
  repeat = ("distributed runs are asynchronous: a seed does not repeat them" if distributed else
            "seeded per-seed values repeat on the same kind of CPU: XLA compiles for the host")
  cpu = (f" (family/model {m['cpu_family_model']}, AVX-512 {'yes' if m.get('avx512') else 'no'}"
         f"; {repeat})" if "cpu_family_model" in m else "")
  where = (f", each a Launchpad program (--launch {meta['launch']}, {meta['num_actors']} actor "
           f"node{'s' if meta.get('num_actors') != 1 else ''}; steps summed over actors)"
           if distributed else
           ", each precision's seeds vmapped in one compiled program (--launch anakin)"
           if launch == spec_lib.ANAKIN else "")
  at = "at or just past" if launch != "local" else "at"
  out += (f"\n\n{meta['agent']} on {meta['env']}, {meta['steps']:,} actor steps per run{where}, "
          f"seeds {seed_text(meta['seeds'])}; return = greedy evaluation, mean over "
          f"{meta['eval_episodes']} episodes, every {meta['eval_every']:,} steps; final = the "
          f"evaluation {at} step {meta['steps']:,}, last-{ag.LAST_EVALS} = mean of the last "
          f"{ag.LAST_EVALS}. Intervals: {b['confidence']:.0%} {b['method']}, {b['reps']:,} "
          f"resamples, generator seed {b['seed']}. P(X > ref): Agarwal et al. 2021, ties 0.5; "
          f"difference: X - ref, mean over seeds."
          + (f" Verdicts: two one-sided paired t-tests (Schuirmann 1987) at margin "
             f"{result['margin']:g} declared before the runs: equivalent when the 90% paired t "
             "interval of the mean difference lies inside (-margin, margin), worse / better "
             "when it lies below / above 0 and is not inside, else inconclusive; pairs needed: "
             "seeds for 80% power at a true difference 0 with the measured sd of the "
             "differences (actorq.components.aggregate)."
             if result.get("margin") is not None else "")
          + f" Machine: {m['nproc']} cores, {m['cpu_model']}"
          f"{cpu}.\n\nReproduce: {command(meta)}")
  return out


def _verdict_cell(t: Dict[str, Any]) -> str:
  """``worse: -53.2 [-110.4, 4.0]`` (verdict, mean difference, 90% paired t interval)."""
  if "ci_low" not in t:
    return f"{t['verdict']} ({t['n']} pair{'s' if t['n'] != 1 else ''})"
  return (f"{t['verdict']}: {t['mean_difference']:.1f} "
          f"[{t['ci_low']:.1f}, {t['ci_high']:.1f}]")


def cross_precision(rows: Sequence[Dict[str, Any]], reference: str,
                    margin: Optional[float]) -> Dict[str, Any]:
  """The 2x2 statistics of the runs with a final_eval.json: `aggregate.aggregate` of
  final_at_fp32 (each arm's final policy at fp32: the training effect against the
  reference arm) and final_at_own (at the arm's own precision: training and deployment
  together), and per arm the deployment effect final_at_own - final_at_fp32 (paired
  within each run: same parameters, same episodes) with its 90% paired t interval."""
  result = ag.aggregate(rows, reference=reference, margin=margin, metrics=CROSS_METRICS)
  result["deployment"] = {}
  for p in result["precisions"]:
    own = [r["final_at_own"] for r in rows if r["precision"] == p]
    at_fp32 = [r["final_at_fp32"] for r in rows if r["precision"] == p]
    entry = {"n": len(own), "mean_difference": float(np.mean(np.subtract(own, at_fp32)))}
    if len(own) >= 2:
      _, low, high, sd = ag.paired_t_interval(own, at_fp32)
      entry.update(ci_low=low, ci_high=high, sd_difference=sd, confidence=0.90)
    result["deployment"][p] = entry
  return result


def format_cross_table(cross: Dict[str, Any]) -> str:
  """Markdown: the 2x2 of actors during training x precision at evaluation."""
  margin = cross.get("margin")
  header = ["actors during training", "runs", "final policy at fp32: IQM [95% CI]",
            "at its own precision: IQM [95% CI]",
            "deployment effect (own - fp32), mean [90% paired t]",
            "training effect (at fp32) vs " + cross["reference"],
            "training + deployment (at own) vs " + cross["reference"]]
  rows = []
  for p, e in cross["precisions"].items():
    d = cross["deployment"][p]
    dep = (f"{d['mean_difference']:.1f} [{d['ci_low']:.1f}, {d['ci_high']:.1f}]"
           if "ci_low" in d else f"{d['mean_difference']:.1f}")
    c = cross["comparisons"].get(p)
    if c is None:
      effects = ["(reference)", "(reference)"]
    elif margin is not None:
      effects = [_verdict_cell(c[m]["tost"]) for m in CROSS_METRICS]
    else:
      effects = [_ci_cell(c[m]["difference"]) for m in CROSS_METRICS]
    rows.append([p, str(e["n"]), _ci_cell(e["final_at_fp32"]["iqm"]),
                 _ci_cell(e["final_at_own"]["iqm"]), dep] + effects)
  return (tables.markdown_table(header, rows) + "\n\nThe 2x2: each run's final parameters, "
          f"{cross_eval.EPISODES} greedy episodes from environment seed {cross_eval.SEED} at "
          "fp32 and at the precision its actors trained with (`actorq.studies.cross_eval`; "
          "int8 payloads bias-corrected on fp32 calibration episodes, as in training). The "
          "effects against the reference are paired by seed"
          + (f", verdicts at margin {margin:g} as above." if margin is not None else "."))


def precisions_text(precisions: Sequence[str]) -> str:
  """`--precisions` as given back to `actorq sweep`: comma-separated, or ';'-separated when a
  ``mixed:...`` name (a family's name, with commas of its own) is among them."""
  return (";" if any("," in p for p in precisions) else ",").join(precisions)


def command(settings: Dict[str, Any]) -> str:
  """The `actorq sweep` command line that reproduces the sweep's runs."""
  argv = ["actorq", "sweep", "--agent", settings["agent"], "--env", settings["env"], "--seeds",
          seed_text(settings["seeds"]), "--precisions", precisions_text(settings["precisions"]),
          "--steps", str(settings["steps"]), "--eval-every", str(settings["eval_every"]),
          "--eval-episodes", str(settings["eval_episodes"])]
  argv += launch_flags(settings)
  if settings.get("num_envs", 1) > 1:
    argv += ["--num-envs", str(settings["num_envs"])]
  if settings.get("config"):
    argv += ["--config", settings["config"]]
  for assignment in settings.get("set", []):
    argv += ["--set", assignment]
  if settings.get("target") is not None:
    argv += ["--target", f"{settings['target']:g}"]
  if settings.get("margin") is not None:
    argv += ["--margin", f"{settings['margin']:g}"]
  return shlex.join(argv)


def seed_text(seeds: Sequence[int]) -> str:
  """`0-9` for a run of consecutive seeds, else `0,3,7`."""
  seeds = list(seeds)
  if len(seeds) > 2 and seeds == list(range(seeds[0], seeds[-1] + 1)):
    return f"{seeds[0]}-{seeds[-1]}"
  return ",".join(map(str, seeds))


def plot(path: str, runs: Sequence[Dict[str, Any]], meta: Dict[str, Any]) -> None:
  """curves.png: each seed's evaluations thin, per precision the IQM over seeds at each
  evaluation step with its 95% stratified bootstrap interval as a band (thick)."""
  import matplotlib
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  fig, ax = plt.subplots(figsize=(7.5, 4.5))
  for p in meta["precisions"]:
    color = tables.PRECISION_COLORS.get(p, "grey")
    curves = [r["evaluations"] for r in runs if r["precision"] == p and r["evaluations"]]
    for ev in curves:
      ax.plot([e["actor_steps"] for e in ev], [e["episode_return"] for e in ev], color=color,
              lw=0.7, alpha=0.35)
    if not curves:
      continue
    at = lambda e: nominal_step(e["actor_steps"], meta["eval_every"], meta["steps"])
    steps = sorted(set.intersection(*[{at(e) for e in ev} for ev in curves]))
    by_step = [{at(e): e["episode_return"] for e in ev} for ev in curves]
    bands = [ag.interval([c[s] for c in by_step], "iqm", reps=CURVE_REPS) for s in steps]
    ax.plot(steps, [b[0] for b in bands], color=color, lw=2.4,
            label=f"{p}: IQM over {len(curves)} seeds")
    ax.fill_between(steps, [b[1] for b in bands], [b[2] for b in bands], color=color,
                    alpha=0.2, linewidth=0)
  if meta.get("target") is not None:
    ax.axhline(meta["target"], color="grey", ls="--", lw=1, label=f"target {meta['target']:g}")
  ax.set_xlabel("actor steps")
  ax.set_ylabel(f"greedy return (mean of {meta['eval_episodes']} episodes)")
  ax.set_title(f"{meta['agent']} on {meta['env']}: seeds thin, IQM with 95% stratified "
               "bootstrap CI thick", fontsize=9)
  ax.grid(alpha=0.3)
  ax.legend(fontsize=8, loc="best")
  fig.tight_layout()
  with atomic.atomic_write(path, "wb") as f:
    fig.savefig(f, dpi=110, format="png")
  plt.close(fig)


def report(outdir: str, data: Dict[str, Any]) -> Tuple[Dict[str, Any], str]:
  """seeds.csv, aggregate.json, aggregate.csv, curves.png and table.md from sweep.json's
  contents; returns (aggregate, table)."""
  meta, runs = data["settings"], data["runs"]
  rows = seed_rows(runs, meta.get("target"))
  tables.write_csv(os.path.join(outdir, "seeds.csv"), SEEDS_FIELDS, rows)
  # Aggregated from seeds.csv as written, so the files agree to the last digit.
  result = ag.aggregate(read_seeds_csv(os.path.join(outdir, "seeds.csv")),
                        target=meta.get("target"), reference=meta["reference"],
                        margin=meta.get("margin"))
  cross = [r for r in read_seeds_csv(os.path.join(outdir, "seeds.csv"))
           if all(math.isfinite(r[k]) for k in CROSS_METRICS)]
  if cross:
    result["cross_precision"] = cross_precision(cross, meta["reference"], meta.get("margin"))
  atomic.write_json(os.path.join(outdir, "aggregate.json"), result)
  tables.write_csv(os.path.join(outdir, "aggregate.csv"), ag.CSV_FIELDS, ag.flat_rows(result) + (
      ag.flat_rows(result["cross_precision"]) if "cross_precision" in result else []))
  plot(os.path.join(outdir, "curves.png"), runs, meta)
  meta = dict(meta, machine=data["machine"])
  table = format_table(result, meta)
  if "cross_precision" in result:
    table += "\n\n" + format_cross_table(result["cross_precision"])
  with atomic.atomic_write(os.path.join(outdir, "table.md")) as f:
    f.write(table + "\n")
  return result, table


def write_sweep_json(outdir: str, settings: Dict[str, Any], runs, machine) -> Dict[str, Any]:
  data = {"settings": settings, "machine": machine, "runs": runs}
  atomic.write_json(os.path.join(outdir, SWEEP_JSON), data)
  return data


def load(outdir: str) -> Dict[str, Any]:
  """A finished sweep's sweep.json.

  Raises:
    FileNotFoundError: `outdir` has none.
  """
  path = os.path.join(outdir, SWEEP_JSON)
  if not os.path.isfile(path):
    raise FileNotFoundError(f"{outdir}: no {SWEEP_JSON} there (not the directory of a finished "
                            "'actorq sweep')")
  with open(path, encoding="utf-8") as f:
    return json.load(f)


def render(outdir: str) -> Tuple[Dict[str, Any], str]:
  """Rewrites a finished sweep's report from its sweep.json (no runs)."""
  return report(outdir, load(outdir))
