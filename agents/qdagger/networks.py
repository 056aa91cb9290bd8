"""QDagger's networks: the student's are DQN's (`make_networks`, any `hidden_sizes`); the
teacher's is read from a run directory of `actorq train` (a DQN or QDagger run) with its
fp32 parameters, its replay and its final greedy return (`load_teacher`).

Read with `components.checkpoint_file` (the checkpoint format), not through the launch
floor: an agent reads another run's files without importing `actorq.launch`.
"""
from __future__ import annotations

import csv
import dataclasses
import functools
import json
import os
from typing import Any, Dict, Optional

import haiku as hk
import jax
import numpy as np
from acme import specs

from actorq.agents.dqn import config as dqn_config
from actorq.agents.dqn import networks as dqn_networks
from actorq.components import checkpoint_file, config_io

TEACHER_AGENTS = ("dqn", "qdagger")
make_networks = dqn_networks.make_networks  # the student's: DQN's Q-network


@dataclasses.dataclass
class Teacher:
  """Attributes:
    run: the run directory (absolute).
    env_id: its environment id.
    config: its DQN config (the DQN fields of its run.json's config).
    network: its Q-network, `apply(params, obs[B, ...]) -> q[B, A]` (dueling combined).
    params: its fp32 policy parameters (the checkpoint's `policy_params`).
    replay_state: its in-process replay (`LocalReplayClient.state()`), None for a
      distributed run.
    final_return: its last greedy evaluation return (eval.csv), None without one.
    checkpoint: the checkpoint read.
  """
  run: str
  env_id: str
  config: dqn_config.DQNConfig
  network: hk.Transformed
  params: Any
  replay_state: Optional[Dict[str, Any]]
  final_return: Optional[float]
  checkpoint: str


def _final_return(run: str) -> Optional[float]:
  try:
    with open(os.path.join(run, "eval.csv"), newline="", encoding="utf-8") as f:
      rows = [r for r in csv.DictReader(f) if r.get("episode_return") not in (None, "",
                                                                              "episode_return")]
    return float(rows[-1]["episode_return"]) if rows else None
  except (OSError, ValueError, KeyError):
    return None


@functools.lru_cache(maxsize=4)
def _read(run: str, mtime: float):
  """(run.json, checkpoint path, state) of the newest readable checkpoint (cached per
  run and checkpoint-folder modification time)."""
  del mtime
  try:
    with open(os.path.join(run, "run.json"), encoding="utf-8") as f:
      info = json.load(f)
  except (OSError, ValueError) as e:
    raise ValueError(f"teacher {run} is not a run directory of 'actorq train' ({e})") from None
  for path in reversed(checkpoint_file.list_paths(os.path.join(run, "checkpoints"))):
    try:
      return info, path, checkpoint_file.read(path)
    except (ValueError, OSError, EOFError):
      continue
  raise ValueError(f"teacher {run} has no readable checkpoint")


def load_teacher(run: Optional[str], environment_spec: specs.EnvironmentSpec) -> Teacher:
  """The teacher in run directory `run`, checked against the student's environment.

  Raises:
    ValueError: one line: no `run` given, not a run directory, no readable checkpoint, an
      agent other than dqn/qdagger, or a network that does not fit this environment's
      observations and actions (naming the layer).
  """
  if not run:
    raise ValueError("qdagger needs a teacher: --set teacher=RUN_DIR (a dqn run of this "
                     "environment)")
  run = os.path.abspath(run)
  ckpt_dir = os.path.join(run, "checkpoints")
  info, path, state = _read(run, os.path.getmtime(ckpt_dir) if os.path.isdir(ckpt_dir) else 0.0)
  if info.get("agent") not in TEACHER_AGENTS:
    raise ValueError(f"teacher {run} is a run of {info.get('agent')!r}; a QDagger teacher is a "
                     f"run of {' or '.join(TEACHER_AGENTS)}")
  fields = config_io.field_names(dqn_config.DQNConfig)
  config = config_io.from_dict(dqn_config.DQNConfig,
                               {k: v for k, v in info["config"].items() if k in fields})
  networks = dqn_networks.make_networks(environment_spec, config.hidden_sizes,
                                        dueling=config.dueling)
  params = jax.device_get(state["policy_params"])
  dummy = np.zeros((1,) + tuple(environment_spec.observations.shape),
                   environment_spec.observations.dtype)
  expected = jax.eval_shape(lambda: networks.network.init(jax.random.PRNGKey(0), dummy))
  for layer, leaves in expected.items():
    for leaf, shape in leaves.items():
      got = np.shape(params.get(layer, {}).get(leaf, np.zeros(())))
      if layer not in params or got != shape.shape:
        raise ValueError(f"teacher {run}: layer {layer!r} ({leaf}) is {list(got)} and this "
                         f"environment needs {list(shape.shape)} (a teacher of another task?)")
  return Teacher(run=run, env_id=str(info["env"]), config=config, network=networks.network,
                 params=params, replay_state=state.get("replay_state"),
                 final_return=_final_return(run), checkpoint=path)
