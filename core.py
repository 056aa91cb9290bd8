"""The vocabulary every layer of actorq shares; it imports nothing from actorq.

    launch -> agents -> components -> quantization -> core

* `Precision`: the one list of precisions. `ACTOR_PRECISIONS` are what actors and
  evaluators can act with (`--actor-precision`, configs' `actor_precision` and
  `evaluation_precision`); `PRECISIONS` adds ``"simulated-int8"`` (dequantize and run in
  fp32: accuracy studies only, labelled as such), which payloads and runtimes also know.
  `check_precision` validates one value against a list; agent configs declare
  `choices=ACTOR_PRECISIONS` (`actorq.components.config_checks`), whose message has the
  same form. The families of precisions (a feed-forward policy's per-layer policy,
  ``"mixed:<choice>,<choice>,..."``) are rows of the precision table
  (`actorq.quantization.runtimes.RUNTIMES`), which asks its rows, not this module.
* `LEARNER_DEVICES`: where the learner may compute (`--learner-device`; actors, evaluator and
  replay always use the CPU); `check_learner_device` validates a choice.
* `ActorPolicy`: what an actor needs (network spec, precision, action selector).
* The environment errors: `UnknownEnvironmentError` (an id nothing can build) and
  `UnsupportedEnvironmentError` (an agent that cannot act in an environment).
* The faults that stop a run part-way (`RunFailure`: `EnvironmentFailure`,
  `NonFiniteLossError`, `RunDirectoryError`), one line each.
* `typing.Protocol`s for the builder (Acme's contract plus the three methods the
  single-process loop asks for), the learner and the variable source, so that a new agent
  can be checked against them and launchers need no `getattr`/`hasattr` probes;
  `VectorBuilder`: a builder whose agent can act in B environments at once.
"""
from __future__ import annotations

import dataclasses
from typing import (Any, Callable, Iterator, List, Optional, Protocol, Sequence, Tuple,
                    runtime_checkable)

import numpy as np

# ---------------------------------------------------------------------------------------
# Precision.

FP32, FP16, BF16, INT8 = "fp32", "fp16", "bf16", "int8"
SIMULATED_INT8 = "simulated-int8"
# fp32 weights on LiteRT's float kernels, published, shipped and loaded exactly as int8
# (flatbuffer patch, new interpreter per version): the placebo of int8, a perturbation of
# the fp32 policy (float summation order) that is not quantization.
LITERT_FP32 = "litert-fp32"
# What an actor or evaluator can act with (each has a runtime that executes it for real).
ACTOR_PRECISIONS: Tuple[str, ...] = (FP32, FP16, BF16, INT8, LITERT_FP32)
# Every payload / runtime precision: the above plus the simulated (dequantized fp32) int8.
PRECISIONS: Tuple[str, ...] = ACTOR_PRECISIONS + (SIMULATED_INT8,)
# Precisions whose payload is int8 weights + float32 scales.
INT8_PRECISIONS: Tuple[str, ...] = (INT8, SIMULATED_INT8)

Precision = str  # one of PRECISIONS (a plain string, so configs stay JSON)

def check_precision(value: Any, name: str = "actor_precision",
                    allowed: Sequence[str] = ACTOR_PRECISIONS,
                    optional: bool = False, also: Sequence[str] = ()) -> Optional[str]:
  """Returns `value` if it is one of `allowed` (or None when `optional`).

  `also` names the other forms the caller accepts (a precision family's form, e.g.
  ``"mixed:<choice>,..."``), for the message only: the precision table
  (`actorq.quantization.runtimes.check_precision`) accepts a family's names before it asks
  this check, so this layer knows no family.

  Raises:
    ValueError: one line naming the field, the value and the allowed values, e.g.
      ``actor_precision must be one of fp32, fp16, bf16, int8; got 'int4'``.
  """
  if value is None and optional:
    return None
  if not isinstance(value, str) or value not in allowed:
    extra = (" (or null)" if optional else "") + "".join(f" or {form}" for form in also)
    raise ValueError(f"{name} must be one of {', '.join(allowed)}{extra}; got {value!r}")
  return value


# ---------------------------------------------------------------------------------------
# Learner placement (`actorq.components.placement` resolves a choice to a jax device).

# auto: a GPU if jax sees one, else the CPU; gpu: a GPU or a one-line error; cpu: the CPU.
LEARNER_DEVICES: Tuple[str, ...] = ("auto", "gpu", "cpu")


def check_learner_device(value: Any, name: str = "learner_device") -> str:
  """Returns `value` if it is one of `LEARNER_DEVICES`.

  Raises:
    ValueError: one line naming the field, the value and the allowed values.
  """
  if not isinstance(value, str) or value not in LEARNER_DEVICES:
    raise ValueError(f"{name} must be one of {', '.join(LEARNER_DEVICES)}; got {value!r}")
  return value


# Seeds. A run's seed reaches consumers of 32-bit seeds: `jax.random.PRNGKey` (without
# jax_enable_x64 it keeps the low 32 bits: seeds 0 and 2**32 gave bit-identical networks,
# case B15), numpy's `RandomState` (dm_control, MinAtar; below 2**32) and EnvPool (a C++
# int). Every seed in [0, MAX_SEED] reaches each of them unchanged, so two accepted seeds
# are two different runs; anything else is refused. The seeds derived from it (seed +
# offset, `launch.experiment`) are reduced to each backend's range where they are used.
MAX_SEED = 2**31 - 1


def check_seed(value: Any, name: str = "seed") -> int:
  """Returns `value` if it is an integer in [0, `MAX_SEED`].

  Raises:
    ValueError: one line naming the field, the value and the allowed range.
  """
  if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or \
      not 0 <= int(value) <= MAX_SEED:
    raise ValueError(f"{name} must be an integer from 0 to {MAX_SEED} (2**31 - 1: seeds "
                     f"are 32-bit where jax, numpy and EnvPool use them), got {value!r}")
  return int(value)


# An actorq process that starts `actorq train` as its child (`actorq sweep`) puts its pid
# in this environment variable; the child stops (SIGTERM: a checkpoint, exit 143) when that
# parent is gone (`components.stops.stop_with_parent`): a parent killed with SIGKILL cannot
# forward a stop, and its child would train on as an orphan.
STOP_WITH_PARENT_ENV = "ACTORQ_STOP_WITH_PARENT"


# ---------------------------------------------------------------------------------------
# Environment errors.


class UsageError(Exception):
  """Bad input (a command-line flag, a config value, a run directory that cannot be used):
  the message names what is wrong and what is allowed. Every layer raises it; the CLI
  prints it on one line and exits with status 2, before anything is written."""


class UnknownEnvironmentError(ValueError):
  """An environment id that cannot be built; the message lists what is allowed."""


class UnsupportedEnvironmentError(ValueError):
  """An agent that cannot act in an environment (e.g. continuous actions for DQN, an
  image too small for the network); the message names what is wrong and what is allowed."""


# ---------------------------------------------------------------------------------------
# Faults that stop a run.


class RunFailure(RuntimeError):
  """A fault that stops a run part-way; the message is one line naming the cause.

  Raised where the fault enters (the actor loop, a learner step, a write to the run
  directory) and passed through the launchers unchanged: the newest checkpoint written
  before it stays as it was (`actorq train --resume` continues from it), and `actorq`
  prints the message as one line and exits with status 1.
  """


class EnvironmentFailure(RunFailure):
  """The environment raised in `reset()` or `step()` (`actorq.components.acting.loop`)."""


class NonFiniteLossError(RunFailure, ValueError):
  """A learner step produced a non-finite loss or gradient norm; the learner keeps its
  state from before that step (`actorq.components.learners`). Also a `ValueError`: the
  value the step computed is the fault."""


class RunDirectoryError(RunFailure):
  """The run directory cannot be written (a full disk, a quota, a read-only mount)."""

  @classmethod
  def writing(cls, what: str, error: BaseException, note: str = "") -> "RunDirectoryError":
    """`cannot write <what>: <why>[; note]`, the why in one line (an OSError's strerror,
    e.g. 'No space left on device', else the first line of the error's message)."""
    if isinstance(error, OSError) and error.strerror:
      why = error.strerror + (f" ({error.filename})" if error.filename else "")
    else:
      text = str(error).strip().splitlines()
      why = text[0] if text else type(error).__name__
    return cls(f"cannot write {what}: {why}{'; ' + note if note else ''}")


# ---------------------------------------------------------------------------------------
# The actor's policy.

# selector(outputs: float32[output_size], rng: np.random.Generator, actor_step: int)
#     -> (action, extras)
Selector = Callable[[np.ndarray, np.random.Generator, int], Tuple[Any, Any]]
# A selector may also carry a `batch` attribute, its form over K rows at once (the
# vectorized actors' one array operation per step; `actorq.components.acting.actors`):
# batch(outputs: float32[K, output_size], rng, actor_steps: int64[K])
#     -> (actions [K, ...], extras: () or a nest of [K, ...] arrays)
BatchSelector = Callable[[np.ndarray, np.random.Generator, np.ndarray], Tuple[np.ndarray, Any]]


@dataclasses.dataclass(frozen=True)
class ActorPolicy:
  """What an actor needs to act: a builder's `make_policy` returns one.

  Attributes:
    spec: the `actorq.quantization.network_spec.NetworkSpec` the policy runtime executes
      (observation `[B, *input_shape]` -> float32 `[B, output_size]`).
    precision: one of `PRECISIONS`; decides the runtime and so the payload pulled.
    selector: the numpy action selection on one row of outputs (epsilon-greedy,
      Gaussian noise, sampling, argmax), see `Selector`.
    evaluation: True for the greedy/deterministic evaluation policy.
  """
  spec: Any
  precision: str
  selector: Selector
  evaluation: bool = False


# What a policy network's outputs mean (a builder's `policy_outputs`): export, the
# quantization study (agreement, KL) and the sensitivity reports read it instead of
# branching on agent names.
POLICY_OUTPUT_KINDS = ("q_values", "logits", "tanh_deterministic", "tanh_gaussian")


@dataclasses.dataclass(frozen=True)
class PolicyOutputs:
  """What the rows a policy network outputs mean, declared by its builder.

  Attributes:
    kind: one of `POLICY_OUTPUT_KINDS`:
      "q_values": one action value per discrete action (greedy action = argmax; a
        distribution over actions is `softmax(Q / T)`);
      "logits": unnormalised log-probabilities of a categorical policy;
      "tanh_deterministic": a deterministic action in [-1, 1] per action dimension,
        rescaled to the action spec's bounds (DDPG, D4PG, TD3);
      "tanh_gaussian": a Gaussian mean (and scale) squashed by tanh (SAC, continuous
        on-policy heads); the greedy action is tanh(mean) rescaled.
    to_values: float32 `[N, output_size]` -> float `[N, A]`, the per-action values or
      logits the kind speaks of, when the raw outputs are not those already: the dueling
      combination `[V, A_1..A_n] -> Q`, the mean over quantiles of QR-DQN's
      `[N, A * num_quantiles]`. None: the outputs are the values.
    description: one line for reports and the exported file's JSON (e.g.
      "argmax(y[1:]) (y = [V, A_1..A_n])").

  Raises:
    ValueError: `kind` is not one of `POLICY_OUTPUT_KINDS`.
  """
  kind: str
  to_values: Optional[Callable[[np.ndarray], np.ndarray]] = None
  description: str = ""

  def __post_init__(self):
    if self.kind not in POLICY_OUTPUT_KINDS:
      raise ValueError(f"policy output kind {self.kind!r}; allowed: "
                       f"{', '.join(POLICY_OUTPUT_KINDS)}")

  def values(self, outputs: np.ndarray) -> np.ndarray:
    """`to_values(outputs)` or the outputs themselves."""
    return outputs if self.to_values is None else self.to_values(outputs)


# ---------------------------------------------------------------------------------------
# Contracts.


@dataclasses.dataclass(frozen=True)
class ReplayProgress:
  """What the single-process loop tells a builder when it asks how many learner steps
  are owed, counted since learning started (a resumed run counts on from its checkpoint).

  Attributes:
    actor_steps: environment steps taken by the actor.
    items_written: items the actor's adder has written to the replay table (transitions,
      sequences or rollouts), as reported by the adder's `items_written`.
  """
  actor_steps: int
  items_written: int


@runtime_checkable
class VariableSource(Protocol):
  """`acme.core.VariableSource`: `get_variables(names) -> [value per name]`.

  actorq learners serve ``"policy"`` (fp32 params of the actors' network spec) and
  ``"version"`` (int, learner steps). A policy server (learner side) also serves
  ``"policy/<precision>"``: the `Payload` of the newest version at that precision.
  A source living in the actor's own process says so with a class attribute
  `in_process = True`; actors then pull it synchronously at fixed steps (deterministic
  single-process runs) instead of in a background thread.
  """

  def get_variables(self, names: Sequence[str]) -> List[Any]:
    ...


@runtime_checkable
class Learner(Protocol):
  """`acme.core.Learner` as actorq's launchers use it.

  `step()` takes one learner (gradient) step; `step_count` is the learner steps taken
  (restored ones included); `save()` returns the training state as host arrays and
  `restore(state)` takes it back (checkpoints and resume).
  """

  def step(self) -> None:
    ...

  def get_variables(self, names: Sequence[str]) -> List[Any]:
    ...

  @property
  def step_count(self) -> int:
    ...

  def save(self) -> Any:
    ...

  def restore(self, state: Any) -> None:
    ...


@runtime_checkable
class Actor(Protocol):
  """`acme.core.Actor` plus what actorq's launchers read and checkpoint.

  `update(wait)` counts one actor step for the variable client (a pull when due; with
  `wait`, a synchronous pull now). `policy_version` is -1 before the first load.
  `num_steps` (actions selected; drives exploration schedules) and `rng_state` (the
  action selector's generator state) are read into checkpoints and assigned on resume.
  """
  num_steps: int
  rng_state: Any

  def select_action(self, observation: Any) -> Any:
    ...

  def observe_first(self, timestep: Any) -> None:
    ...

  def observe(self, action: Any, next_timestep: Any) -> None:
    ...

  def update(self, wait: bool = False) -> None:
    ...

  @property
  def policy_version(self) -> int:
    ...


@runtime_checkable
class Builder(Protocol):
  """Acme's builder contract, which one builder serves for every launch mode.

  `networks` returned by `make_networks` has `spec`, the `NetworkSpec` actors execute.
  `replay_client` is a `reverb.Client` (or the in-process replay's client of a
  single-process run: same methods). The single-process loop also asks for:

    * `min_replay_size()`: items the table `replay_table_name()` must hold before the
      first learner step (0: no wait);
    * `learner_steps_owed(progress: ReplayProgress) -> int`: the *total* learner steps
      that should have run by then (e.g. `floor(actor_steps * samples_per_insert /
      batch_size)` off-policy, `items_written // batch_size` for a rollout queue);

  and every builder has `config`, the agent's config dataclass, and says what its policy's
  outputs mean with `policy_outputs(networks, environment_spec) -> PolicyOutputs` (read by
  `actorq export` for the action rule and `actorq quantize` for agreement and KL).

  A builder *class* names its config dataclass with the class attribute `config_class`
  (`DQNBuilder.config_class is DQNConfig`): `actorq.agents.registry.get(agent)` returns
  `(builder_cls.config_class, builder_cls)` for a built-in name, an installed agent (entry
  point group ``actorq.agents``) or ``"package.module:BuilderClass"``, and the launch
  layer builds `builder_cls(config_class(...))` from `--config`/`--set` or a run.json.
  A builder without `config_class` still runs through `launch.experiment` directly, but
  the `actorq` commands cannot reach it (see docs/guides/compose-an-agent.md).
  """
  config: Any

  def make_networks(self, environment_spec: Any) -> Any:
    ...

  def make_policy(self, networks: Any, environment_spec: Any,
                  evaluation: bool = False) -> ActorPolicy:
    ...

  def make_replay_tables(self, environment_spec: Any, policy: ActorPolicy,
                         rate_limited: bool = False) -> List[Any]:
    ...

  def make_dataset_iterator(self, replay_client: Any) -> Iterator[Any]:
    ...

  def make_adder(self, replay_client: Any, environment_spec: Any,
                 policy: ActorPolicy) -> Any:
    ...

  def make_actor(self, random_key: Any, policy: ActorPolicy, environment_spec: Any,
                 variable_source: VariableSource, adder: Any = None) -> Actor:
    ...

  def make_learner(self, random_key: Any, networks: Any, dataset: Iterator[Any],
                   logger_fn: Callable[..., Any], environment_spec: Any,
                   replay_client: Any = None, counter: Any = None) -> Learner:
    ...

  def min_replay_size(self) -> int:
    ...

  def replay_table_name(self) -> str:
    ...

  def learner_steps_owed(self, progress: ReplayProgress) -> int:
    ...


@runtime_checkable
class MultiAgentBuilder(Protocol):
  """A builder of agents for a multi-agent environment
  (`actorq.components.envs.multi_agent`), composed from single-agent builders:
  `make_groups(environment)` splits the environment's agents into parameter groups
  (`actorq.components.acting.multi_agent.ParameterGroup`), and `group_builder(group)` is
  the `Builder` (also a `VectorBuilder`) of one group, on the group's per-agent spec.
  The launchers run it as a `core.Builder`: bound to an environment's groups
  (`actorq.agents.multiagent_common.decentralized.bind`, the `MultiAgent` environment
  family of `actorq.launch.experiment`)."""
  config: Any

  def make_groups(self, environment: Any) -> Any:
    ...

  def group_builder(self, group: Any) -> Builder:
    ...


@runtime_checkable
class VectorBuilder(Protocol):
  """A builder whose agent can act in B environments at once (`num_envs` > 1):
  `make_batched_adder(replay_client, environment_spec, policy, num_envs)` returns an
  adder that keeps one adder state per environment (see
  `actorq.components.replay.adders.BatchedNStepTransitionAdder` and `PerEnvAdders`),
  optionally with `in_blocks()`: the adder a vector actor writes through
  (`BlockNStepTransitionAdder`, or the adder itself; without it, the adder itself)."""

  def make_batched_adder(self, replay_client: Any, environment_spec: Any,
                         policy: ActorPolicy, num_envs: int) -> Any:
    ...
