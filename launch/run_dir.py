"""A run directory of `actorq train`: `run.json` + `checkpoints/`, written and read here.

`run.json` holds the agent's name, the environment id, the seed, the resolved config
(every field) and the train settings (steps, evaluation period and episodes; the launch
type and actor count of a distributed run).
"""
from __future__ import annotations

import json
import os
import shutil
import warnings
from typing import Any, Dict, List, Tuple

from actorq import core
from actorq.components import atomic, checkpointing, config_io
from actorq.launch import cli, registry
from actorq.quantization import network_spec

RUN_INFO = "run.json"
CHECKPOINTS = "checkpoints"
# What a run writes into its directory besides `<label>.csv` files: these (and those)
# make a directory a run's (`claim_logdir`). "program.actorq" is `launch.hosts.PROGRAM_FILE`.
RUN_ENTRIES = (RUN_INFO, CHECKPOINTS, "tensorboard", "logs", "program.actorq")


def write_info(logdir: str, info: Dict[str, Any]) -> None:
  """Writes `<logdir>/run.json` atomically.

  Raises:
    core.RunDirectoryError: it cannot be written (a full disk, ...); one line, exit 1.
  """
  path = os.path.join(logdir, RUN_INFO)
  try:
    with atomic.atomic_write(path) as f:
      json.dump(info, f, indent=2, sort_keys=True)
  except OSError as e:
    raise core.RunDirectoryError.writing(path, e) from e


def run_entries(logdir: str) -> List[str]:
  """The names in `logdir` that a run of `actorq train` writes (`RUN_ENTRIES` and
  `*.csv`), sorted; [] when `logdir` does not exist or holds none of them."""
  try:
    names = os.listdir(logdir)
  except (FileNotFoundError, NotADirectoryError):
    return []
  return sorted(n for n in names if n in RUN_ENTRIES or n.endswith(".csv"))


def _describe(logdir: str, entries: List[str]) -> str:
  """What a run directory holds, in a few words: the run.json's agent, environment and
  seed, and the newest checkpoint's step (else the entries' names)."""
  parts = []
  try:
    with open(os.path.join(logdir, RUN_INFO), encoding="utf-8") as f:
      info = json.load(f)
    parts.append(f"a run of {info['agent']} on {info['env']}, seed {info['seed']}")
  except (OSError, ValueError, KeyError, TypeError):
    parts.append(f"files of a run ({', '.join(entries[:4])}{', ...' if len(entries) > 4 else ''})")
  ckpts = checkpointing.list_checkpoints(os.path.join(logdir, CHECKPOINTS))
  if ckpts:
    step = int(os.path.basename(ckpts[-1])[len("ckpt-"):-len(".pkl")])
    parts.append(f"{len(ckpts)} checkpoint{'s' if len(ckpts) > 1 else ''}, the newest at "
                 f"actor step {step}")
  return "; ".join(parts)


def claim_logdir(logdir: str, *, overwrite: bool = False, flag: str = "--logdir") -> None:
  """Makes `logdir` the directory of one new run: a directory that already holds a run
  (`run_entries`: run.json, checkpoints/, CSV logs, ...) is refused, or with `overwrite`
  those entries are removed (other files are left alone). Call it after every other
  check of the command, right before the run's first write (case B8).

  Raises:
    cli.UsageError: `logdir` holds a run and not `overwrite`; one line naming what it
      holds and the three ways on: `--resume`, another `--logdir`, `--overwrite`.
    core.RunDirectoryError: with `overwrite`, an entry cannot be removed.
  """
  logdir = os.path.abspath(logdir)
  entries = run_entries(logdir)
  if not entries:
    return
  if not overwrite:
    raise cli.UsageError(
        f"{flag} {logdir} already holds {_describe(logdir, entries)}; continue it with "
        f"'actorq train --resume {logdir}', give another {flag}, or add --overwrite to "
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
    cli.UsageError: `path` holds a run.json or checkpoints/; one line naming it and
      what to do instead.
  """
  path = os.path.abspath(path)
  held = [n for n in (RUN_INFO, CHECKPOINTS) if os.path.exists(os.path.join(path, n))]
  if held:
    raise cli.UsageError(f"{flag} {path} is the directory of an 'actorq train' run (it holds "
                         f"{' and '.join(held)}); give another {flag}, e.g. a new folder "
                         "inside it")


def read_info(run_path: str) -> Dict[str, Any]:
  """The run's `run.json`.

  Raises:
    cli.UsageError: unreadable or not a run.json of `actorq train`.
  """
  path = os.path.join(run_path, RUN_INFO)
  try:
    with open(path, encoding="utf-8") as f:
      info = json.load(f)
  except (OSError, ValueError) as e:
    raise cli.UsageError(f"cannot read {path}: {e}") from None
  missing = [k for k in ("agent", "env", "seed", "config") if not isinstance(info, dict)
             or k not in info]
  if missing:
    raise cli.UsageError(f"{path} is not a run.json of 'actorq train' (missing "
                         f"{', '.join(missing)})")
  return info


def resolve(path: str) -> Tuple[str, str]:
  """`(run_dir, checkpoint_dir)` for a run directory or its `checkpoints/` folder.

  Raises:
    cli.UsageError: if neither holds a run.json.
  """
  path = os.path.abspath(path)
  for run_dir in (path, os.path.dirname(path)):
    if os.path.isfile(os.path.join(run_dir, RUN_INFO)):
      return run_dir, os.path.join(run_dir, CHECKPOINTS)
  raise cli.UsageError(f"--checkpoint {path} is not a run directory of 'actorq train' "
                       f"(no {RUN_INFO} in it or its parent)")


def load(path: str) -> Tuple[Dict[str, Any], Dict[str, Any], str]:
  """`(run_info, checkpoint_state, checkpoint_path)` of the newest readable checkpoint."""
  run_dir, ckpt_dir = resolve(path)
  info = read_info(run_dir)
  ckpt_path, state = checkpointing.restore_latest(ckpt_dir)
  if state is None:
    raise cli.UsageError(f"no readable checkpoint in {ckpt_dir}")
  return info, state, ckpt_path


def config_values(info: Dict[str, Any], config_cls) -> Dict[str, Any]:
  """The run.json config's values this version's `config_cls` knows.

  A key it does not know (a run directory from another version) is dropped with a
  `UserWarning` naming it; its default is used in its place.
  """
  values = dict(info["config"])
  unknown = sorted(set(values) - config_io.field_names(config_cls))
  if unknown:
    warnings.warn(f"run.json: ignoring {config_cls.__name__} key(s) this version does not "
                  f"know: {', '.join(unknown)}", UserWarning, stacklevel=3)
    for key in unknown:
      del values[key]
  return values


def make_builder(info: Dict[str, Any], **overrides):
  """The run's builder, its config rebuilt from run.json (plus `overrides`); unknown keys
  are dropped with a warning (`config_values`).

  Raises:
    cli.UsageError: an unknown agent, or a value this version refuses.
  """
  try:
    config_cls, builder_cls = registry.get(info["agent"])
  except registry.UnknownAgentError as e:
    raise cli.UsageError(f"run.json: {e}") from None
  values = config_values(info, config_cls)
  try:
    return builder_cls(config_io.from_dict(config_cls, values, overrides))
  except ValueError as e:
    raise cli.UsageError(f"run.json: {e}") from None


def check_feed_forward(networks, info: Dict[str, Any], command: str) -> None:
  """`actorq export` and `quantize` execute one feed-forward `NetworkSpec`; a recurrent
  policy (R2D2's `RecurrentSpec`) is refused in one line (`actorq eval` runs it).

  Raises:
    cli.UsageError: naming the agent, the command and what does work.
  """
  if isinstance(networks.spec, network_spec.RecurrentSpec):
    raise cli.UsageError(
        f"actorq {command} does not support recurrent policies yet (agent "
        f"{info.get('agent')!r}: an LSTM Q-network); 'actorq eval --checkpoint RUN "
        "--precision P' evaluates it at fp32, fp16, bf16 or int8")
