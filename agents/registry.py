"""Agents: what `--agent` names -> (config class, builder class). An open table.

An agent is reached in one of three ways, tried in this order:

  1. a built-in name (`BUILT_IN`: dqn, d4pg, ddpg, td3, sac, ppo, a2c, impala, r2d2,
     and the multi-agent ippo, mappo, idqn);
  2. a name an installed distribution registers under the entry point group
     `actorq.agents` (`ENTRY_POINT_GROUP`, read with `importlib.metadata`), e.g. in its
     pyproject.toml:

         [project.entry-points."actorq.agents"]
         qr_dqn = "my_agents.qr_dqn:QRDQNBuilder"

     (a built-in name cannot be taken over);
  3. ``package.module:BuilderClass`` given as is (`actorq train --agent
     qr_dqn_agent:QRDQNBuilder`), imported with the current working directory on
     `sys.path`, as uvicorn and gunicorn import ``module:app``.

Each target is a builder class (`actorq.core.Builder`) that names its config dataclass
with the class attribute `config_class`. The string the user gave (a name or
``package.module:BuilderClass``) is what run.json records as ``"agent"``, and whatever
rebuilds a run (eval, quantize, export, --resume, sweep children) resolves it here again.
A launch's node processes unpickle the builder instead: `node_env` gives them the
``PYTHONPATH`` entries that make the same modules importable there.
"""
from __future__ import annotations

import dataclasses
import importlib
import importlib.metadata
import os
import sys
from typing import Any, Dict, List, Mapping, Tuple

from actorq import core
from actorq.components import checkpointing, run_dir

ENTRY_POINT_GROUP = "actorq.agents"

# name -> "module:BuilderClass"; the builder's `config_class` is the config.
BUILT_IN: Dict[str, str] = {
    "dqn": "actorq.agents.dqn.builder:DQNBuilder",
    "d4pg": "actorq.agents.d4pg.builder:D4PGBuilder",
    "ddpg": "actorq.agents.ddpg.builder:DDPGBuilder",
    "td3": "actorq.agents.td3.builder:TD3Builder",
    "sac": "actorq.agents.sac.builder:SACBuilder",
    "ppo": "actorq.agents.ppo.builder:PPOBuilder",
    "a2c": "actorq.agents.a2c.builder:A2CBuilder",
    "impala": "actorq.agents.impala.builder:IMPALABuilder",
    "r2d2": "actorq.agents.r2d2.builder:R2D2Builder",
    "ippo": "actorq.agents.ippo.builder:IPPOBuilder",
    "mappo": "actorq.agents.mappo.builder:MAPPOBuilder",
    "idqn": "actorq.agents.idqn.builder:IDQNBuilder",
    "qdagger": "actorq.agents.qdagger.builder:QDaggerBuilder",
}

# What a builder class must have (`actorq.core.Builder`'s methods, and `config_class`).
BUILDER_METHODS = ("make_networks", "make_policy", "make_replay_tables",
                   "make_dataset_iterator", "make_adder", "make_actor", "make_learner",
                   "min_replay_size", "replay_table_name", "learner_steps_owed")

# Directories this process put on sys.path to import a "module:Builder" agent (node
# processes get them through `node_env`).
_IMPORT_PATHS: List[str] = []


class UnknownAgentError(ValueError):
  """An agent that cannot be resolved: an unknown name, a module that cannot be imported,
  a missing attribute, or an object that is not a builder class. The message is one line
  naming what was looked up and what is allowed."""


def _entry_points() -> Dict[str, str]:
  """Installed agents: entry point name -> "module:attr" (the first of duplicates)."""
  found: Dict[str, str] = {}
  for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
    found.setdefault(ep.name, ep.value)
  return found


def names() -> List[str]:
  """Every agent reachable by name: built-in ones and installed ones, sorted."""
  return sorted(set(BUILT_IN) | set(_entry_points()))


def _allowed() -> str:
  return f"{', '.join(names())}, or a builder class as package.module:BuilderClass"


def get(agent: str) -> Tuple[type, type]:
  """`(ConfigClass, BuilderClass)` of an agent: a built-in name, an installed agent's
  entry point name, or ``"package.module:BuilderClass"`` (importing it puts the current
  working directory on `sys.path`).

  Raises:
    UnknownAgentError: one line naming what was looked up and what is allowed: an unknown
      name, a module that cannot be imported (or fails while importing), a missing
      attribute, an object that is not a builder class, a `config_class` that is not a
      dataclass.
  """
  if agent in BUILT_IN:  # the package's own: an import failure is a fault, not input
    module_name, _, attr = BUILT_IN[agent].partition(":")
    builder_cls = getattr(importlib.import_module(module_name), attr)
    return builder_cls.config_class, builder_cls
  installed = _entry_points()
  if agent in installed:
    return _load(agent, installed[agent],
                 f"agent {agent!r} (entry point {installed[agent]!r} in group "
                 f"{ENTRY_POINT_GROUP})")
  if ":" not in agent:
    raise UnknownAgentError(f"unknown agent {agent!r}; allowed: {_allowed()}")
  _add_working_directory()
  return _load(agent, agent, f"agent {agent!r}")


def _add_working_directory() -> None:
  cwd = os.getcwd()
  if cwd not in sys.path:
    sys.path.insert(0, cwd)
  if cwd not in _IMPORT_PATHS:
    _IMPORT_PATHS.append(cwd)


def import_paths() -> Tuple[str, ...]:
  """The directories `get` put on `sys.path` in this process (to import
  ``module:Builder`` agents), oldest first."""
  return tuple(_IMPORT_PATHS)


def node_env(environ: Mapping[str, str] = os.environ) -> Dict[str, str]:
  """The environment override that lets a node process (a `local_mp` or `hosts` node,
  which unpickles the builder) import what this process imported through `get`:
  ``{"PYTHONPATH": <import_paths()>:<environ's PYTHONPATH>}``, or ``{}`` when `get` added
  nothing. `environ={}`: the directories alone (a remote host appends its own)."""
  if not _IMPORT_PATHS:
    return {}
  own = [p for p in environ.get("PYTHONPATH", "").split(os.pathsep) if p]
  return {"PYTHONPATH": os.pathsep.join(_IMPORT_PATHS + [p for p in own
                                                         if p not in _IMPORT_PATHS])}


def _load(agent: str, target: str, what: str) -> Tuple[type, type]:
  module_name, _, attr = target.partition(":")
  if not module_name or not attr or ":" in attr or not all(
      part.isidentifier() for part in module_name.split(".") + attr.split(".")):
    raise UnknownAgentError(f"{what} is not package.module:BuilderClass; allowed: {_allowed()}")
  try:
    module = importlib.import_module(module_name)
  except ModuleNotFoundError as e:
    if e.name is not None and (module_name == e.name or module_name.startswith(e.name + ".")):
      where = f" (looked up from {os.getcwd()} and sys.path)" if agent == target else ""
      raise UnknownAgentError(f"{what}: no module named {e.name!r}{where}; allowed: "
                              f"{_allowed()}") from None
    raise UnknownAgentError(f"{what}: importing {module_name!r} failed: {e}") from None
  except Exception as e:  # pylint: disable=broad-except  # the user's module: one line
    raise UnknownAgentError(f"{what}: importing {module_name!r} failed: "
                            f"{type(e).__name__}: {e}") from None
  obj = module
  for part in attr.split("."):
    if not hasattr(obj, part):
      candidates = sorted(n for n, v in vars(module).items()
                          if isinstance(v, type) and hasattr(v, "config_class"))
      listed = (f"builder classes there: {', '.join(candidates)}" if candidates else
                "a builder class defined there")
      where = getattr(module, "__file__", None) or "?"
      raise UnknownAgentError(f"{what}: module {module_name!r} ({where}) has no attribute "
                              f"{attr!r}; allowed: {listed}")
    obj = getattr(obj, part)
  missing = [m for m in ("config_class",) + BUILDER_METHODS if not hasattr(obj, m)]
  if not isinstance(obj, type) or missing:
    why = (f"a {type(obj).__name__}" if not isinstance(obj, type) else
           f"a class without {', '.join(missing)}")
    raise UnknownAgentError(
        f"{what}: {module_name}.{attr} is {why}, not a builder class; allowed: a class with "
        "the builder methods of actorq.core.Builder and a config_class attribute naming its "
        "config dataclass")
  config_cls = obj.config_class
  if not (isinstance(config_cls, type) and dataclasses.is_dataclass(config_cls)):
    raise UnknownAgentError(f"{what}: {module_name}.{attr}.config_class is {config_cls!r}, "
                            "not a dataclass; allowed: the agent's config dataclass")
  return config_cls, obj


def policy_outputs(builder: Any, networks: Any, environment_spec: Any) -> core.PolicyOutputs:
  """What the builder declares its policy's outputs mean
  (`builder.policy_outputs(networks, environment_spec)`, `actorq.core.PolicyOutputs`):
  export's action rule and the quantization study's agreement and KL read it.

  Raises:
    ValueError: the builder declares nothing, or not a `core.PolicyOutputs` (one line
      naming the builder class and what is allowed).
  """
  name = f"{type(builder).__module__}.{type(builder).__qualname__}"
  declare = getattr(builder, "policy_outputs", None)
  if declare is None:
    raise ValueError(f"{name} does not declare what its policy's outputs mean; allowed: a "
                     "builder method policy_outputs(networks, environment_spec) -> "
                     "actorq.core.PolicyOutputs")
  outputs = declare(networks, environment_spec)
  if not isinstance(outputs, core.PolicyOutputs):
    raise ValueError(f"{name}.policy_outputs returned {type(outputs).__name__}; allowed: "
                     "actorq.core.PolicyOutputs")
  return outputs


def of_run(info: Dict[str, Any]) -> Tuple[type, type]:
  """`(ConfigClass, BuilderClass)` of a run's agent: `get(info["agent"])`, `info` being
  the run's run.json (`components.run_dir.read_info`).

  Raises:
    core.UsageError: the agent does not resolve (one line, prefixed "run.json: ").
  """
  try:
    return get(info["agent"])
  except UnknownAgentError as e:
    raise core.UsageError(f"run.json: {e}") from None


def restore_run(path: str) -> Tuple[Any, Dict[str, Any], str]:
  """`(run.json contents, checkpoint_state, checkpoint_path)` of the newest readable
  checkpoint of the run directory `path` (or its `checkpoints/` folder); `spec.load_run`
  gives the first as a `RunSpec`. The run's agent is resolved first (`of_run`): a
  checkpoint may hold its classes (e.g. a ``module:Builder`` agent's training-state
  tuple), which unpickle only once its module is imported.

  Raises:
    core.UsageError: not a run directory, an unreadable run.json, an agent that does not
      resolve, no readable checkpoint.
  """
  run_path, ckpt_dir = run_dir.resolve(path)
  info = run_dir.read_info(run_path)
  of_run(info)
  ckpt_path, state = checkpointing.restore_latest(ckpt_dir)
  if state is None:
    raise core.UsageError(f"no readable checkpoint in {ckpt_dir}")
  return info, state, ckpt_path
