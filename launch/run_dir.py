"""Reading a run directory written by `actorq train`: run.json + checkpoints/."""
from __future__ import annotations

import json
import os
from typing import Any, Dict, Tuple

from actorq.components import checkpointing
from actorq.launch import cli

RUN_INFO = "run.json"
CHECKPOINTS = "checkpoints"


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
  with open(os.path.join(run_dir, RUN_INFO), encoding="utf-8") as f:
    info = json.load(f)
  ckpt_path, state = checkpointing.restore_latest(ckpt_dir)
  if state is None:
    raise cli.UsageError(f"no readable checkpoint in {ckpt_dir}")
  return info, state, ckpt_path


def make_builder(info: Dict[str, Any], **overrides):
  """The run's builder, its config rebuilt from run.json (plus `overrides`)."""
  from actorq.launch import registry
  config_cls, builder_cls = registry.get(info["agent"])
  config = dict(info["config"])
  config.update(overrides)
  for key, value in config.items():
    if isinstance(value, list):
      config[key] = tuple(value)
  return builder_cls(config_cls(**config))
