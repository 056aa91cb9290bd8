"""A run directory of `actorq train`, and the one module that reads and writes its files:

    run.json       the run's description, a `launch.spec.RunSpec`'s JSON (`write_info`,
                   `read_info`; `RunSpec.save` and `RunSpec.load` call them)
    eval.csv       one row per greedy evaluation (`experiment.evaluation_row`'s columns;
                   written through the run's "eval" logger, `components.loggers`), read
                   here (`read_eval_columns`, `read_evaluations`)
    train.csv      one row per training episode (`loop.EpisodeLogger`, "train" logger)
    learner.csv    the learner's logged values ("learner" logger)
    checkpoints/   `components.checkpointing` run checkpoints (`CHECKPOINTS`; read with
                   the run's agent resolved by `agents.registry.restore_run`)

`run.json` holds the agent's name, the environment id, the seed, the resolved config
(every field) and the train settings (steps, evaluation period and episodes; the launch
type and actor count of a distributed run); see `launch/spec.py`.
"""
from __future__ import annotations

import csv
import dataclasses
import json
import math
import os
import shutil
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

from actorq import core
from actorq.components import atomic
from actorq.components import checkpointing

RUN_INFO = "run.json"
CHECKPOINTS = "checkpoints"
EVAL_CSV = "eval.csv"
TRAIN_CSV = "train.csv"
# What a run writes into its directory besides `<label>.csv` files: these (and those)
# make a directory a run's (`claim_logdir`). "program.actorq" is `launch.hosts.PROGRAM_FILE`.
# "tracking.json", "wandb" and "mlruns" are `components.tracking`'s (`actorq train --track`).
RUN_ENTRIES = (RUN_INFO, CHECKPOINTS, "tensorboard", "logs", "program.actorq", "tracking.json",
               "wandb", "mlruns")
# A population run of `actorq pbt` (`launch.pbt`): its pbt.json (the run's spec, with its
# "population" section: `RunSpec.info_file`), and what it writes besides
# `*.csv` files (pbt.csv, pbt_member<m>.csv); as a Launchpad program, a train run's
# checkpoints/ and program file too.
POPULATION_INFO = "pbt.json"
POPULATION_ENTRIES = (POPULATION_INFO, "population", "best", "tensorboard", "logs",
                      "lineage.png", CHECKPOINTS, "program.actorq")


@dataclasses.dataclass(frozen=True)
class RunKind:
  """A kind of run directory: the command that owns it, the file that marks it (written
  first, before the run's other files) and the entries it writes besides `*.csv` files.
  A directory belongs to one kind (case B19): another kind's command refuses it, even
  with --overwrite."""
  command: str
  marker: str
  entries: Tuple[str, ...]
  what: str


TRAIN = RunKind("actorq train", RUN_INFO, RUN_ENTRIES, "a run")
POPULATION = RunKind("actorq pbt", POPULATION_INFO, POPULATION_ENTRIES, "a population run")
KINDS = (POPULATION, TRAIN)  # the order `kind_of` looks for their markers


def kind_of(logdir: str) -> Optional[RunKind]:
  """The kind of run whose marker `logdir` holds (`KINDS`), else None."""
  for kind in KINDS:
    if os.path.isfile(os.path.join(logdir, kind.marker)):
      return kind
  return None


def write_info(logdir: str, info: Dict[str, Any], name: str = RUN_INFO) -> None:
  """Writes `<logdir>/<name>` (run.json, or a population's pbt.json) atomically (creating
  `logdir`); `info` is a `RunSpec.to_json()` (`RunSpec.save`).

  Raises:
    core.RunDirectoryError: it cannot be written (a full disk, ...); one line, exit 1.
  """
  os.makedirs(logdir, exist_ok=True)
  path = os.path.join(logdir, name)
  try:
    atomic.write_json(path, info, indent=2, sort_keys=True)
  except OSError as e:
    raise core.RunDirectoryError.writing(path, e) from e


def run_entries(logdir: str, kind: RunKind = TRAIN) -> List[str]:
  """The names in `logdir` that a run of `kind` writes (its `entries` and `*.csv`;
  default: `actorq train`'s `RUN_ENTRIES`), sorted; [] when `logdir` does not exist or
  holds none of them."""
  try:
    names = os.listdir(logdir)
  except (FileNotFoundError, NotADirectoryError):
    return []
  return sorted(n for n in names if n in kind.entries or n.endswith(".csv"))


def _describe(logdir: str, entries: List[str], kind: RunKind = TRAIN) -> str:
  """What a run directory of `kind` holds, in a few words: its agent, environment and
  seed (and population size), and the newest checkpoint's step (else the entries'
  names)."""
  parts = []
  try:
    with open(os.path.join(logdir, kind.marker), encoding="utf-8") as f:
      info = json.load(f)
    if kind is POPULATION:  # (a pbt.json before issue 52 held "population": N, "env_id")
      size = info["population"]
      parts.append(f"a population run of {size['size'] if isinstance(size, dict) else size} "
                   f"{info['agent']} members on {info.get('env', info.get('env_id'))}, seed "
                   f"{info['seed']}")
    else:
      parts.append(f"a run of {info['agent']} on {info['env']}, seed {info['seed']}")
  except (OSError, ValueError, KeyError, TypeError):
    parts.append(f"files of a run ({', '.join(entries[:4])}{', ...' if len(entries) > 4 else ''})")
  ckpts = checkpointing.list_checkpoints(os.path.join(
      logdir, "population" if kind is POPULATION else CHECKPOINTS))
  if ckpts:
    step = checkpointing.step_of(ckpts[-1])
    parts.append(f"{len(ckpts)} checkpoint{'s' if len(ckpts) > 1 else ''}, the newest at "
                 f"{'total ' if kind is POPULATION else ''}actor step {step}")
  return "; ".join(parts)


def claim_logdir(logdir: str, *, overwrite: bool = False, flag: str = "--logdir",
                 kind: RunKind = TRAIN) -> None:
  """Makes `logdir` the directory of one new run of `kind` (default: `actorq train`): a
  directory that already holds a run of that kind (`run_entries`: its marker, checkpoints,
  CSV logs, ...) is refused, or with `overwrite` those entries are removed (other files
  are left alone); a directory marked as another kind's (`kind_of`: an `actorq pbt`
  population run for `actorq train`, or the reverse) is refused even with `overwrite`,
  naming the command that owns it (case B19). Call it after every other check of the
  command, right before the run's first write (case B8).

  Raises:
    core.UsageError: `logdir` holds a run and not `overwrite`; one line naming what it
      holds and the three ways on: `--resume`, another `--logdir`, `--overwrite`. Or it
      holds another kind's run: one line naming it and the command that continues it.
    core.RunDirectoryError: with `overwrite`, an entry cannot be removed.
  """
  logdir = os.path.abspath(logdir)
  owner = kind_of(logdir)
  if owner is not None and owner is not kind:
    raise core.UsageError(
        f"{flag} {logdir} holds {_describe(logdir, run_entries(logdir, owner), owner)} "
        f"(a directory of '{owner.command}'); continue it with '{owner.command} --resume "
        f"{logdir}' or give another {flag} (--overwrite starts over only a run of "
        f"'{kind.command}')")
  entries = run_entries(logdir, kind)
  if not entries:
    return
  if not overwrite:
    raise core.UsageError(
        f"{flag} {logdir} already holds {_describe(logdir, entries, kind)}; continue it with "
        f"'{kind.command} --resume {logdir}', give another {flag}, or add --overwrite to "
        f"remove its {', '.join(entries)} and start over")
  for name in entries:
    path = os.path.join(logdir, name)
    try:
      if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
      else:
        os.remove(path)
    except OSError as e:
      raise core.RunDirectoryError.writing(path, e, "--overwrite removes the earlier run "
                                           "first") from e


def refuse_run_directory(path: str, flag: str) -> None:
  """An output folder of another command (`bench --logdir`, `quantize --out`) must not be
  a run directory of `actorq train`: its files would mix with the run's.

  Raises:
    core.UsageError: `path` holds a run.json or checkpoints/; one line naming it and
      what to do instead.
  """
  path = os.path.abspath(path)
  held = [n for n in (RUN_INFO, CHECKPOINTS) if os.path.exists(os.path.join(path, n))]
  if held:
    raise core.UsageError(f"{flag} {path} is the directory of an 'actorq train' run (it holds "
                         f"{' and '.join(held)}); give another {flag}, e.g. a new folder "
                         "inside it")


def refuse_earlier_report(path: str, report_files: Sequence[str], flag: str, command: str,
                          overwrite: bool = False) -> None:
  """A report command (`actorq bench`, `actorq quantize`) does not replace a folder's
  earlier report of its own without being asked: `path` holding any of `report_files` is
  refused unless `overwrite` (then the command writes its files over them).

  Raises:
    core.UsageError: one line naming the folder, the report files it holds and the ways
      on: another `flag`, or --overwrite.
  """
  held = [n for n in report_files if os.path.exists(os.path.join(path, n))]
  if held and not overwrite:
    raise core.UsageError(f"{flag} {os.path.abspath(path)} already holds a report of "
                          f"'{command}' ({', '.join(held)}); give another {flag}, or add "
                          "--overwrite to replace it")


def read_info(run_path: str, name: str = RUN_INFO) -> Any:
  """The contents of `<run_path>/<name>` (run.json, or a population's pbt.json), as JSON
  (`RunSpec.load` makes it a spec).

  Raises:
    core.UsageError: unreadable or not JSON (naming the path).
  """
  path = os.path.join(run_path, name)
  try:
    with open(path, encoding="utf-8") as f:
      return json.load(f)
  except (OSError, ValueError) as e:
    raise core.UsageError(f"cannot read {path}: {e}") from None


def resolve(path: str) -> Tuple[str, str]:
  """`(run_dir, checkpoint_dir)` for a run directory or its `checkpoints/` folder.

  Raises:
    core.UsageError: if neither holds a run.json.
  """
  path = os.path.abspath(path)
  for run_dir in (path, os.path.dirname(path)):
    if os.path.isfile(os.path.join(run_dir, RUN_INFO)):
      return run_dir, os.path.join(run_dir, CHECKPOINTS)
  if kind_of(path) is POPULATION:
    raise core.UsageError(f"--checkpoint {path} is a population run of 'actorq pbt' (continue "
                          f"it with 'actorq pbt --resume {path}'; its best member's run "
                          f"directory is {os.path.join(path, 'best')})")
  raise core.UsageError(f"--checkpoint {path} is not a run directory of 'actorq train' "
                       f"(no {RUN_INFO} in it or its parent)")


def read_eval_columns(run_path: str) -> Dict[str, List[float]]:
  """Columns of the run's eval.csv as float lists sorted by actor_steps: actor_steps,
  episode_return, episode_return_std, wall_seconds and learner_steps (nan where a row has
  none). The last row per step wins (a resumed run evaluates some steps twice); repeated
  header rows and partial lines are skipped. {} without an eval.csv."""
  by_step: Dict[int, Dict[str, Any]] = {}
  for row in read_evaluations(run_path):
    step, episode_return = row.get("actor_steps"), row.get("episode_return")
    if isinstance(step, float) and math.isfinite(step) and isinstance(episode_return, float):
      by_step[int(step)] = row  # else a repeated header or a partial line
  columns: Dict[str, List[float]] = {}
  for step in sorted(by_step):
    for key in ("actor_steps", "episode_return", "episode_return_std", "wall_seconds",
                "learner_steps"):
      value = by_step[step].get(key)
      columns.setdefault(key, []).append(value if isinstance(value, float) else float("nan"))
  return columns


def read_evaluations(run_path: Optional[str]) -> List[Dict[str, Any]]:
  """The rows of the run's eval.csv in file order, each value a float where it parses
  (e.g. actor_precision stays a string); [] without a run directory or an eval.csv."""
  if run_path is None:
    return []
  path = os.path.join(run_path, EVAL_CSV)
  if not os.path.exists(path):
    return []
  rows = []
  with open(path, newline="", encoding="utf-8") as f:
    for row in csv.DictReader(f):
      out = {}
      for k, v in row.items():
        try:
          out[k] = float(v)
        except (TypeError, ValueError):
          out[k] = v
      rows.append(out)
  return rows


def default_logdir(*parts: str) -> str:
  """Where a command writes when it is given no directory: ``runs/<parts>-<stamp>``, the
  parts joined by "-" with ":", "?" and "&" written "_" (environment ids and their
  arguments, ``module:Builder`` agents) and
  the local time as ``YYYYmmdd-HHMMSS``; relative to the working directory."""
  name = "-".join(str(p).replace(":", "_").replace("?", "_").replace("&", "_")
                  for p in parts)
  return os.path.join("runs", f"{name}-{time.strftime('%Y%m%d-%H%M%S')}")


def report_dir(logdir: Optional[str], *default_parts: str, flag: str = "--logdir",
               report_files: Sequence[str] = (), command: str = "actorq bench",
               overwrite: bool = False) -> str:
  """The folder a report command (`actorq bench`) writes into: `logdir`, or
  `default_logdir(*default_parts)` when None; created and proven writable.

  Returns:
    its absolute path.
  Raises:
    core.UsageError: it holds a run of `actorq train` (`refuse_run_directory`), an earlier
      report of `command` (any of `report_files`) and not `overwrite`
      (`refuse_earlier_report`), it is not a directory or cannot be written; one line
      naming `flag`.
  """
  logdir = logdir if logdir is not None else default_logdir(*default_parts)
  refuse_run_directory(logdir, flag)
  refuse_earlier_report(logdir, report_files, flag, command, overwrite)
  return atomic.ensure_writable_dir(logdir, flag)
