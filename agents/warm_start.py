"""Warm start: a new run that begins from another run's learner state.

    actorq train --init-from runs/dqn-s1 --seed 2                       # params + target
    actorq train --init-from runs/dqn-s1/checkpoints/ckpt-000000020000.pkl \\
                 --init-keep params,opt_state,target,replay --set learning_rate=3e-4

A warm start is not a resume (`--resume` continues a run as itself, counters, schedules and
all): the new run has its own directory, seed, config and counters (actor steps, learner
steps, episodes and the exploration schedule start at 0) and takes from the origin only the
parts of the learner's state named in `keep` (`PARTS`; default `DEFAULT_KEEP`). Peers:
SB3's `model.set_parameters` / `load_replay_buffer`, RLlib's
`Algorithm.from_checkpoint(...)` restoring one module, Reincarnating RL's "reload the
teacher's network" baseline (Agarwal et al. 2022, sec. 4).

What each part is, for every actorq learner (its training state is a NamedTuple, see
`components/learners.py`; `state_part` classifies a field by its name):

    params      the online parameters: `params`, `policy_params`, `critic_params`, SAC's
                `log_alpha`
    target      the target networks: `target_params`, `target_policy_params`, ...
    opt_state   the optimizer states (`opt_state`, `policy_opt_state`, ...): Adam's moments
                and optax's step count, so a learning-rate schedule continues from the
                origin's step
    replay      the in-process replay's items and priorities (single-process runs whose
                origin is a single-process run); the new run keeps its own sampling RNG

Never carried: the learner's step count and its random key (the new run counts from 0
and draws its keys from its own seed). A field left out of `keep` is the new run's own
initialisation.

Checked before anything is written (`resolve`, called by `RunSpec.from_args`): the origin
is a readable run of the same agent, and every kept part has the same layers with the same
shapes and dtypes as this run's learner (a different environment variant or learning rate
is fine; a different `hidden_sizes` is refused in one line naming the layer). The origin
(run directory, checkpoint, its actor and learner steps, the checkpoint's SHA-256) is
recorded in the new run's run.json under "init_from" (`WarmStart.to_json`).

Where it is applied: `WarmStart.apply(learner, replay_client)` right after the learner is
built and before any actor pulls a policy, in `local.run` and in the distributed learner
node; never when a run resumes from its own checkpoint.
"""
from __future__ import annotations

import dataclasses
import os
from typing import Any, Dict, Optional, Sequence, Tuple

import jax
import numpy as np
from acme.utils import loggers

from actorq import core
from actorq.components.envs import environments
from actorq.components.replay import local_replay
from actorq.components import run_dir
from actorq.agents import registry
from actorq.components import checkpointing

PARTS = ("params", "target", "opt_state", "replay")
DEFAULT_KEEP = ("params", "target")
LEARNER_PARTS = ("params", "target", "opt_state")


def state_part(field: str) -> Optional[str]:
  """The part of `PARTS` a learner's training-state field belongs to, from its name;
  None for what a warm start never carries (the step count, random keys)."""
  if field.startswith("target_"):
    return "target"
  if field.endswith("opt_state"):
    return "opt_state"
  if field == "params" or field.endswith("_params") or field == "log_alpha":
    return "params"
  return None


def parse_keep(text: Optional[str], flag: str = "--init-keep") -> Tuple[str, ...]:
  """`"params,target"` -> ("params", "target") in `PARTS` order; None: `DEFAULT_KEEP`.

  Raises:
    core.UsageError: an empty list or a name not in `PARTS` (naming it and the allowed).
  """
  if text is None:
    return DEFAULT_KEEP
  names = [n.strip() for n in str(text).split(",") if n.strip()]
  unknown = [n for n in names if n not in PARTS]
  if unknown or not names:
    raise core.UsageError(f"{flag} {text}: {'unknown part ' + repr(unknown[0]) if unknown else 'empty'}"
                          f"; allowed: a comma-separated list of {', '.join(PARTS)}")
  return tuple(p for p in PARTS if p in names)


def _describe(leaf: Any) -> str:
  leaf = np.asarray(leaf)
  return f"{leaf.dtype}[{','.join(str(d) for d in leaf.shape)}]"


def _layer_and_leaf(path: Sequence[Any]) -> Tuple[str, str]:
  """(layer, leaf) names of a tree path: the first dict key is the layer (Haiku's
  ``{layer: {"w", "b"}}``), the rest the leaf (e.g. "w", or an optimizer's "mu/w")."""
  keys = [str(getattr(k, "key", getattr(k, "name", getattr(k, "idx", k)))) for k in path]
  dict_at = next((i for i, k in enumerate(path) if hasattr(k, "key")), None)
  if dict_at is None:
    return "/".join(keys) or "(root)", ""
  return keys[dict_at], "/".join(keys[dict_at + 1:])


def check_same_layers(part: str, origin: Any, here: Any) -> None:
  """The trees `origin` and `here` (one training-state field) have the same layers and
  leaves with the same shapes and dtypes.

  Raises:
    ValueError: one line naming the part, the layer (and leaf) and both shapes.
  """
  theirs = {tuple(p): v for p, v in jax.tree_util.tree_flatten_with_path(origin)[0]}
  ours = {tuple(p): v for p, v in jax.tree_util.tree_flatten_with_path(here)[0]}
  for path in list(ours) + [p for p in theirs if p not in ours]:
    layer, leaf = _layer_and_leaf(path)
    name = f"layer {layer!r}" + (f" ({leaf})" if leaf else "")
    if path not in theirs:
      raise ValueError(f"{part}: {name} is in this run's network and not in the origin's")
    if path not in ours:
      raise ValueError(f"{part}: {name} is in the origin's network and not in this run's")
    if _describe(theirs[path]) != _describe(ours[path]):
      raise ValueError(f"{part}: {name} is {_describe(theirs[path])} in the origin and "
                       f"{_describe(ours[path])} in this run")


def merge(fresh: Any, origin: Any, keep: Sequence[str]) -> Any:
  """The training state `fresh` (a learner's `save()`, a NamedTuple) with each field whose
  `state_part` is in `keep` taken from `origin` (the origin learner's `save()`).

  Raises:
    ValueError: the two states are of different learners (fields), or a kept field's
      layers differ (`check_same_layers`); one line.
  """
  fields = getattr(type(fresh), "_fields", None)
  theirs = getattr(type(origin), "_fields", None)
  if fields is None or theirs != fields:
    raise ValueError(f"the origin's learner state has the fields {', '.join(theirs or ())}, "
                     f"this run's {', '.join(fields or ())}")
  values = []
  for name in fields:
    part = state_part(name)
    if part in keep:
      check_same_layers(part if part == name else f"{part} ({name})",
                        getattr(origin, name), getattr(fresh, name))
      values.append(getattr(origin, name))
    else:
      values.append(getattr(fresh, name))
  return type(fresh)(*values)


@dataclasses.dataclass(frozen=True)
class WarmStart:
  """Where a warm-started run begins (`resolve` makes it; run.json's "init_from").

  Attributes:
    run: the origin's run directory (absolute).
    checkpoint: the origin checkpoint's file (absolute).
    keep: the parts carried over, a subset of `PARTS` in that order.
    actor_steps: the origin's actor steps at that checkpoint.
    learner_steps: the origin's learner steps at that checkpoint.
    checksum: the SHA-256 of the checkpoint's payload (what `checkpointing.load`
      verifies); `apply` refuses a checkpoint that changed since.
  """
  run: str
  checkpoint: str
  keep: Tuple[str, ...] = DEFAULT_KEEP
  actor_steps: int = 0
  learner_steps: int = 0
  checksum: str = ""

  def to_json(self) -> Dict[str, Any]:
    return {"run": self.run, "checkpoint": self.checkpoint, "keep": list(self.keep),
            "actor_steps": self.actor_steps, "learner_steps": self.learner_steps,
            "checksum": self.checksum}

  @classmethod
  def from_json(cls, info: Dict[str, Any]) -> "WarmStart":
    """Raises KeyError/TypeError/ValueError on a malformed entry (`RunSpec.from_json`
    reports it)."""
    return cls(run=str(info["run"]), checkpoint=str(info["checkpoint"]),
               keep=tuple(str(k) for k in info["keep"]), actor_steps=int(info["actor_steps"]),
               learner_steps=int(info["learner_steps"]), checksum=str(info["checksum"]))

  def load(self) -> Dict[str, Any]:
    """The origin checkpoint's state.

    Raises:
      checkpointing.CheckpointError: unreadable, or not the checkpoint `resolve` checked
        (its checksum changed).
    """
    if checkpointing.checksum(self.checkpoint) != self.checksum:
      raise checkpointing.CheckpointError(
          f"--init-from: {self.checkpoint} changed since this run was started from it "
          f"(its SHA-256 was {self.checksum[:16]}...)")
    return checkpointing.load(self.checkpoint)

  def apply(self, learner, replay_client=None) -> None:
    """Gives `learner` (just built, before any actor pulled a policy) the kept parts of the
    origin's learner state and, with "replay" kept, `replay_client` (an in-process
    `LocalReplayClient`) the origin's items and priorities (its own sampling RNG stays).

    Raises:
      checkpointing.CheckpointError: the checkpoint changed since `resolve`.
      ValueError: the learner's state does not fit (checked already by `resolve`).
    """
    state = self.load()
    kept = [p for p in self.keep if p in LEARNER_PARTS]
    if kept:
      learner.restore(merge(learner.save(), state["learner"], kept))
    if "replay" in self.keep:
      own_rng = replay_client.state()["rng"]
      replay_client.restore({**state["replay_state"], "rng": own_rng})


def resolve(path: str, keep_text: Optional[str], *, agent: str, env_id: str, seed: int,
            config: Any, launch: str) -> WarmStart:
  """`--init-from PATH --init-keep KEEP`, checked against the new run before it writes
  anything: PATH is a run directory (its newest readable checkpoint), its checkpoints/
  folder, or one checkpoint file; the origin's agent is `agent`; a learner of `agent` with
  `config` on `env_id` is built and every kept part of the origin's state must fit it
  (`merge`); "replay" needs a single-process run and origin with the same replay tables.

  Raises:
    core.UsageError: one line, prefixed ``--init-from PATH:``.
  """
  keep = parse_keep(keep_text)
  where = f"--init-from {path}"
  if isinstance(registry.get(agent)[1](config), core.MultiAgentBuilder):
    raise core.UsageError(f"{where}: agent {agent!r} is multi-agent; warm starts take "
                          "single-agent runs for now")
  if "replay" in keep and launch != "local":
    raise core.UsageError(f"--init-keep replay needs --launch local (the in-process replay); "
                          f"a {launch} run's replay is a Reverb server: keep "
                          f"{','.join(p for p in keep if p != 'replay') or 'params'} instead")
  ckpt_path = os.path.abspath(path)
  try:
    if os.path.isfile(ckpt_path):  # one checkpoint file: <run>/checkpoints/ckpt-N.pkl
      run_path, _ = run_dir.resolve(os.path.dirname(ckpt_path))
      info = run_dir.read_info(run_path)
      registry.of_run(info)  # its module first: the state may pickle its classes
      state = checkpointing.load(ckpt_path)
    else:
      run_path, _ = run_dir.resolve(ckpt_path)
      info, state, ckpt_path = registry.restore_run(ckpt_path)
  except core.UsageError as e:
    raise core.UsageError(f"{where}: {str(e).replace('--checkpoint ', '', 1)}") from None
  except (checkpointing.CheckpointError, OSError, EOFError, ValueError) as e:
    raise core.UsageError(f"{where}: {e}") from None
  if not isinstance(info, dict) or info.get("agent") != agent:
    raise core.UsageError(f"{where}: its agent is {info.get('agent')!r}, this run's {agent!r}; "
                          "a warm start needs the same agent (--agent)")
  if not isinstance(state, dict) or "learner" not in state:
    raise core.UsageError(f"{where}: {ckpt_path} holds no single learner's state (a "
                          "multi-agent run's checkpoint?); warm starts take single-agent runs")
  try:
    fresh_learner, client = _new_learner(agent, env_id, seed, config)
    merge(fresh_learner.save(), state["learner"], [p for p in keep if p in LEARNER_PARTS])
  except ValueError as e:
    raise core.UsageError(f"{where}: {e}; a warm start needs the same layer shapes "
                          "(nothing was written)") from None
  if "replay" in keep:
    if state.get("replay_state") is None:
      raise core.UsageError(f"{where}: its checkpoint holds no in-process replay (a "
                            "distributed run's): leave replay out of --init-keep")
    try:
      client.restore(state["replay_state"])
    except ValueError as e:
      raise core.UsageError(f"{where}: its replay does not fit this run's: {e}") from None
  return WarmStart(run=run_path, checkpoint=ckpt_path, keep=keep,
                   actor_steps=int(state.get("actor_steps", checkpointing.step_of(ckpt_path))),
                   learner_steps=int(state.get("learner_steps", 0)),
                   checksum=checkpointing.checksum(ckpt_path))


def _new_learner(agent: str, env_id: str, seed: int, config: Any):
  """`(learner, replay_client)`: a learner of `agent` with `config` for `env_id`, over an
  empty in-process replay of the builder's tables (nothing is stepped)."""
  _, builder_cls = registry.get(agent)
  builder = builder_cls(config)
  env = environments.make_environment(env_id, seed=seed)
  try:
    env_spec = environments.environment_spec(env)
  finally:
    env.close()
  networks = builder.make_networks(env_spec)
  policy = builder.make_policy(networks, env_spec, evaluation=False)
  client = local_replay.LocalReplayClient(builder.make_replay_tables(env_spec, policy), seed=0)
  learner = builder.make_learner(jax.random.PRNGKey(seed), networks,
                                 builder.make_dataset_iterator(client),
                                 lambda label: loggers.NoOpLogger(), env_spec, client, None)
  return learner, client
