"""The experiment layer: one `ExperimentConfig` that both launchers consume.

    config = ExperimentConfig(builder=DQNBuilder(DQNConfig()), env_id="gym:CartPole-v1",
                              num_steps=100_000, seed=0, logdir="runs/x")
    result = local.run(config)                                   # one process
    program = distributed.make_program(config, num_actors=2)     # a Launchpad program
    outcome = distributed.launch(program, "local_mp")

What the two launchers would otherwise each write lives here once: the environment
seeds, the evaluation row, and the run checkpoint's contents. Units: steps are actor
(environment) steps, summed over actors in a distributed run; `checkpoint_every` is in
minutes.
"""
from __future__ import annotations

import dataclasses
import os
from typing import Any, Callable, Dict, Optional, Tuple

import jax
from acme import specs

from actorq import core
from actorq.agents.multiagent_common import decentralized
from actorq.agents.population import program
from actorq.components.acting import loop as loop_lib
from actorq.components.acting import variable_client as vc
from actorq.components.envs import single_agent, vector_env
from actorq.components.envs import seeding
from actorq.components import checkpointing
from actorq.quantization import bias_correction, runtimes


class RunError(core.RunFailure):
  """A run stopped by a fault in what it was given (a non-finite reward, observation or
  network output, ...). The message names the cause, the environment and the actor step;
  the last good state was checkpointed first (with a logdir), so `resume` continues.
  One of the `core.RunFailure`s (`actorq` prints it in one line, exit status 1)."""


@dataclasses.dataclass
class ExperimentConfig:
  """Everything a run needs besides how it is launched.

  Attributes:
    builder: the agent's builder (`actorq.core.Builder`; stateless, so one builder
      serves every node of a distributed run), or a `core.MultiAgentBuilder` for a
      multi-agent environment id (the `MultiAgent` environment family binds it to the
      environment's parameter groups: `decentralized.DecentralizedBuilder`).
    env_id: environment id (`actorq.components.envs.environments`).
    num_steps: actor steps after which training ends (summed over actors).
    seed: seeds environments, networks, exploration and replay sampling.
    eval_every: actor steps between greedy evaluations (one more at the end of a
      single-process run).
    eval_episodes: episodes per evaluation.
    logdir: run directory (CSVs, TensorBoard, checkpoints, node logs); None: no files.
    checkpoint_every: minutes between checkpoints (None or 0: only at the end, on
      Ctrl-C and on SIGTERM); needs `logdir`.
    keep_checkpoints: how many checkpoints to keep.
    resume: continue from the newest readable checkpoint in `<logdir>/checkpoints`
      (`num_steps` stays the run's total).
    max_episode_steps: the step cap of every episode, training and evaluation
      (`actorq.components.acting.loop`): an episode reaching it ends as a truncation.
    actor_precision: if set, replaces `builder.config.actor_precision` (the builder is
      rebuilt as `type(builder)(dataclasses.replace(builder.config, ...))`): one of
      `runtimes.ACTING_PRECISIONS` (`core.ACTOR_PRECISIONS` and the acting precisions
      registered since) or a per-layer policy's ``"mixed:<choice>,..."`` name
      (`actorq.quantization.mixed.precision_name`; feed-forward agents only, whose
      configs take it).
    num_envs: environments each training actor steps at once (B). 1 (the default): one
      environment and `loop.ActorLoop`, exactly as before. B > 1: a vector environment
      (`components.vector_env`: EnvPool where it has the task, else Gymnasium's vector
      envs), one batched inference per step and one adder state per environment
      (`loop.VectorActorLoop`); needs a builder that is a `core.VectorBuilder` and an
      environment with a vector backend. Evaluation stays one environment.
    learner_device: where the learner computes, one of `core.LEARNER_DEVICES`: "auto" (a GPU
      if jax sees one, else the CPU), "gpu" (a GPU, else `placement.NoAcceleratorError` when
      the learner starts), "cpu". Actors, evaluator and replay always use the CPU
      (`actorq.components.placement`).
    training_hooks: factories `f(actor) -> loop.Hook` of measurement hooks, called with
      the training actor when its loop is made (`single_agent.make_training_loop`); their
      hooks run first at every step, before the learner steps of that step (e.g.
      `actorq.studies.actor_mechanism`'s recorder). Python-level only: not in run.json,
      not on the command line; a hook must not change the run (no randomness drawn, no
      actor state touched), so a seeded run stays the run of its seed.
    init_from: a warm start (`agents.warm_start.WarmStart`, checked by its `resolve`):
      the learner (and, if kept, the in-process replay) starts from another run's state,
      applied by both launchers right after the learner is built; ignored when `resume`
      restores the run's own checkpoint. None: the learner's own initialisation.

  Raises:
    ValueError: naming the field, the value and what is allowed.
  """
  builder: Any
  env_id: str
  num_steps: int = 100_000
  seed: int = 0
  eval_every: int = 5_000
  eval_episodes: int = 10
  logdir: Optional[str] = None
  checkpoint_every: Optional[float] = 10.0
  keep_checkpoints: int = 3
  resume: bool = False
  max_episode_steps: int = loop_lib.DEFAULT_MAX_EPISODE_STEPS
  actor_precision: Optional[str] = None
  num_envs: int = 1
  learner_device: str = "auto"
  training_hooks: Tuple[Callable[[Any], loop_lib.Hook], ...] = ()
  init_from: Optional[Any] = None

  def __post_init__(self):
    for name in ("num_steps", "eval_every", "eval_episodes", "keep_checkpoints",
                 "max_episode_steps"):
      value = getattr(self, name)
      if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    core.check_seed(self.seed)  # (no 32-bit truncation: every accepted seed is its own run)
    if self.checkpoint_every is not None and not self.checkpoint_every >= 0:
      raise ValueError(f"checkpoint_every must be >= 0 minutes (or None), got "
                       f"{self.checkpoint_every!r}")
    if self.resume and self.logdir is None:
      raise ValueError("resume=True needs the run's logdir")
    if not isinstance(self.builder, (core.Builder, core.MultiAgentBuilder)):
      raise ValueError(f"builder must implement actorq.core.Builder or "
                       f"actorq.core.MultiAgentBuilder, got {type(self.builder).__name__}")
    if not self.multi_agent:  # `MultiAgent.make` makes num_envs environments itself
      vector_env.check_num_envs(self.env_id, self.num_envs)
    elif isinstance(self.num_envs, bool) or not isinstance(self.num_envs, int) \
        or self.num_envs < 1:
      raise ValueError(f"num_envs must be an integer >= 1, got {self.num_envs!r}")
    most = seeding.EVAL_SEED_OFFSET - seeding.EVAL_SEED_ROWS  # (`training_seed`'s rows)
    if self.num_envs > most:
      raise ValueError(f"num_envs must be at most {most}, got "
                       f"{self.num_envs}")
    if self.num_envs > 1 and not isinstance(self.builder, (core.VectorBuilder,
                                                            core.MultiAgentBuilder)):
      raise ValueError(f"num_envs={self.num_envs}: the builder "
                       f"{type(self.builder).__name__} has no make_batched_adder (it acts in "
                       "one environment at a time); use num_envs 1")
    core.check_learner_device(self.learner_device)
    if self.actor_precision is not None:
      runtimes.check_precision(self.actor_precision, "actor_precision")
      self.builder = type(self.builder)(dataclasses.replace(
          self.builder.config, actor_precision=self.actor_precision))

  @property
  def multi_agent(self) -> bool:
    """Whether the builder is a `core.MultiAgentBuilder` (the `MultiAgent` family)."""
    return isinstance(self.builder, core.MultiAgentBuilder)

  @property
  def precision(self) -> str:
    """The precision the actors act with."""
    return self.builder.config.actor_precision

  def steps_before_learning(self) -> int:
    """The actor steps (summed over actors and environments, as `num_steps`) a run takes
    at least before its learner's first step: `builder.min_replay_size()`. Learning
    starts once the replay table holds that many items (Acme's `MinSize` rate limiter,
    `local._Learning`; SB3 calls it `learning_starts`), and an actor step writes at most
    one (transition agents; R2D2 writes a sequence per `sequence_period` steps, so it
    needs more); 0 for an agent that learns from its first items (on-policy) and for a
    multi-agent builder (its groups count their own agents' steps). A `num_steps` below it
    trains no learner step at all; `actorq train` says so (a warning: a smoke or
    acting-only run is legitimate)."""
    if self.multi_agent:
      return 0
    return int(self.builder.min_replay_size())

  @property
  def checkpoint_dir(self) -> Optional[str]:
    return None if self.logdir is None else os.path.join(os.path.abspath(self.logdir),
                                                         "checkpoints")


@dataclasses.dataclass
class AgentParts:
  """What every node builds from the config before its own pieces: the environment
  spec, the networks and the training and evaluation policies, and the builder that made
  them (`config.builder`, or a multi-agent builder bound to the environment's parameter
  groups: `MultiAgent.bind`)."""
  environment_spec: specs.EnvironmentSpec
  networks: Any
  policy: core.ActorPolicy
  eval_policy: core.ActorPolicy
  builder: Any = None


def restored_checkpoint(config: ExperimentConfig) -> Tuple[Optional[str], Optional[dict]]:
  """`(path, state)` of the newest readable run checkpoint when `config.resume`, else
  `(None, None)`.

  Raises:
    checkpointing.CheckpointError: `config.resume` and no readable checkpoint.
  """
  if not config.resume:
    return None, None
  path, state = checkpointing.restore_latest(config.checkpoint_dir, checkpointing.validate_run)
  if state is None:
    raise checkpointing.CheckpointError(
        f"no readable checkpoint in {config.checkpoint_dir} to resume from")
  return path, state


def agent_parts(config: ExperimentConfig, environment_spec: specs.EnvironmentSpec,
                builder: Any = None) -> AgentParts:
  """`builder`'s (default: `config.builder`'s) networks and policies on `environment_spec`."""
  builder = config.builder if builder is None else builder
  networks = builder.make_networks(environment_spec)
  return AgentParts(environment_spec, networks,
                    builder.make_policy(networks, environment_spec, evaluation=False),
                    builder.make_policy(networks, environment_spec, evaluation=True), builder)


def parts_for(config: ExperimentConfig, env) -> AgentParts:
  """The agent's parts acting in `env` (what the environment family's `make` made):
  `bind` gives the builder and its environment spec."""
  builder, spec = environments_of(config).bind(config.builder, env)
  return agent_parts(config, spec, builder)


def parts_of(config: ExperimentConfig) -> AgentParts:
  """`parts_for` an environment of `config.env_id` made and closed here (seeded
  `config.seed`, one environment)."""
  family = environments_of(config)
  env = family.make(dataclasses.replace(config, num_envs=1), config.seed)
  try:
    return parts_for(config, env)
  finally:
    family.close(env)


def evaluation_row(stats: Dict[str, float], *, actor_steps: int, learner_steps: int,
                   episodes: int, wall_seconds: float, precision: str, policy_version: int,
                   payload_bytes: Optional[int] = None) -> Dict[str, Any]:
  """One row of `eval.csv` (the same columns in both launch modes)."""
  row = {"actor_steps": int(actor_steps), "learner_steps": int(learner_steps),
         "episodes": int(episodes), "wall_seconds": float(wall_seconds),
         "actor_precision": precision}
  if payload_bytes is not None:
    row["payload_bytes"] = int(payload_bytes)
  row["policy_version"] = int(policy_version)
  row.update(stats)
  return row


def checkpoint_state(config: ExperimentConfig, learner, *, actor_steps: int, episodes: int,
                     counts: Dict[str, float], learning_started: bool, wall_seconds: float,
                     groups: Optional[Dict[str, Dict[str, Any]]] = None,
                     counter_cache: Optional[Dict[str, Any]] = None,
                     **extra: Any) -> Dict[str, Any]:
  """What a run checkpoint holds (numpy and plain Python; the same keys in every launch
  mode): the learner's state and its fp32 policy (`actorq eval`/`quantize` read it), its
  learner steps, the counts, and the run's identity; `extra` as is. A multi-agent learner
  (a `decentralized.Composite`) is saved per parameter group: ``groups[<name>]`` holds the
  group's learner state, fp32 policy, learner steps and `groups[<name>]` (the group's
  schedule, as the launcher keeps it), ``policy_params`` maps group name -> fp32 policy,
  ``learner_steps`` is the groups' sum and ``multi_agent`` is True (`part_states` reads
  it back)."""
  saved = {name: {"learner": l.save(), "learner_steps": int(l.step_count),
                  "policy_params": jax.device_get(l.get_variables(["policy"])[0]),
                  **(groups or {}).get(name, {})} for name, l in split(learner).items()}
  state = saved.pop("", None) or {
      "multi_agent": True, "groups": saved,
      "policy_params": {name: g["policy_params"] for name, g in saved.items()},
      "learner_steps": int(sum(g["learner_steps"] for g in saved.values()))}
  return {**state, "actor_steps": int(actor_steps), "episodes": int(episodes),
          "counter": {"counts": dict(counts), "cache": dict(counter_cache or {})},
          "learning_started": bool(learning_started), "wall_seconds": float(wall_seconds),
          "env_id": config.env_id, "seed": config.seed, "num_steps": config.num_steps,
          **extra}


def part_states(state: Dict[str, Any], parts: Dict[str, Any], path: str) -> Dict[str, Any]:
  """Part name (`split`) -> that part's state in the run checkpoint `state` read from
  `path`: the checkpoint itself for an agent's one learner (""), ``groups[<name>]`` for a
  parameter group's (`checkpoint_state`).

  Raises:
    checkpointing.CheckpointError: the checkpoint's parameter groups are not `parts`.
  """
  if "" in parts:
    return {"": state}
  saved = state.get("groups") or {}
  if sorted(saved) != sorted(parts):
    raise checkpointing.CheckpointError(
        f"{path} holds the parameter groups {', '.join(sorted(saved)) or 'none'}, this run "
        f"has {', '.join(parts)}")
  return saved


# ---------------------------------------------------------------------------------------
# Environment families: how a run makes, steps and evaluates its environments. One class
# per family (`components.envs.single_agent.SingleAgent`, `decentralized.MultiAgentEnvironments`)
# and one entry in `ENVIRONMENTS`, tried in order (the first that `matches` the builder).
ENVIRONMENTS = [decentralized.MultiAgentEnvironments(), program.PopulationEnvironments(),
                single_agent.SingleAgent()]


def environments_of(config: ExperimentConfig):
  """The environment family (`ENVIRONMENTS`) of `config.builder`."""
  return next(family for family in ENVIRONMENTS if family.matches(config.builder))


# ---------------------------------------------------------------------------------------
# Composed agents: a multi-agent builder's objects are one part per parameter group
# (`decentralized.Composite`); what the launchers do per learner (schedule, serve, tap,
# checkpoint) they do per part.


def split(x) -> Dict[str, Any]:
  """`x`'s parts (group name -> part) for a `decentralized.Composite`, else ``{"": x}``."""
  return dict(x.parts) if isinstance(x, decentralized.Composite) else {"": x}


def tapped_dataset(builder, networks, replay_client):
  """`(dataset, calibrations)`: the builder's dataset behind one `bias_correction.tap` per
  policy (the int8 payloads' biases are recalibrated on the learner's newest sample, issue
  39), and part name -> that tap's calibration."""
  datasets, nets = builder.make_dataset_iterator(replay_client), split(networks)
  taps = {n: bias_correction.tap(d, nets[n].spec) for n, d in split(datasets).items()}
  if isinstance(datasets, decentralized.Composite):
    return decentralized.Groups((n, t[0]) for n, t in taps.items()), {
        n: t[1] for n, t in taps.items()}
  return taps[""][0], {"": taps[""][1]}


def policy_server(learner, networks, calibrations):
  """The actors' variable source: a `vc.PolicyServer` per learner part (its payloads made
  once per version and precision), grouped in a `decentralized.GroupServers` for parts."""
  nets = split(networks)
  servers = {n: vc.PolicyServer(l, nets[n].spec, calibration=calibrations[n])
             for n, l in split(learner).items()}
  return servers[""] if "" in servers else decentralized.GroupServers(servers)


def payload_bytes(server, precision: str) -> int:
  """The bytes of one policy payload at `precision`, summed over the server's parts."""
  return int(sum(s.publisher(precision).stats["payload_bytes"]
                 for s in split(server).values()))
