"""A run directory of `actorq train`: `run.json` + `checkpoints/`, written and read here.

`run.json` holds the agent's name, the environment id, the seed, the resolved config
(every field) and the train settings (steps, evaluation period and episodes; the launch
type and actor count of a distributed run).
"""
from __future__ import annotations

import json
import os
import warnings
from typing import Any, Dict, Tuple

from actorq.components import atomic, checkpointing, config_io
from actorq.launch import cli, registry
from actorq.quantization import network_spec

RUN_INFO = "run.json"
CHECKPOINTS = "checkpoints"


def write_info(logdir: str, info: Dict[str, Any]) -> None:
  """Writes `<logdir>/run.json` atomically."""
  path = os.path.join(logdir, RUN_INFO)
  with atomic.atomic_write(path) as f:
    json.dump(info, f, indent=2, sort_keys=True)


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
  """`(run_info, checkpoint_state, checkpoint_path)` of the newest readable checkpoint.
  The run's agent is resolved first (`registry.get`): a checkpoint may hold its classes
  (e.g. a ``module:Builder`` agent's training-state tuple), which unpickle only once its
  module is imported.

  Raises:
    cli.UsageError: not a run directory, an agent that does not resolve, no readable
      checkpoint.
  """
  run_dir, ckpt_dir = resolve(path)
  info = read_info(run_dir)
  agent_classes(info)
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


def agent_classes(info: Dict[str, Any]):
  """`(ConfigClass, BuilderClass)` of the run's agent (`registry.get(info["agent"])`: a
  name or ``package.module:BuilderClass``).

  Raises:
    cli.UsageError: the agent does not resolve (one line, prefixed "run.json: ").
  """
  try:
    return registry.get(info["agent"])
  except registry.UnknownAgentError as e:
    raise cli.UsageError(f"run.json: {e}") from None


def make_builder(info: Dict[str, Any], **overrides):
  """The run's builder, its config rebuilt from run.json (plus `overrides`); unknown keys
  are dropped with a warning (`config_values`).

  Raises:
    cli.UsageError: an unknown agent, or a value this version refuses.
  """
  config_cls, builder_cls = agent_classes(info)
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
