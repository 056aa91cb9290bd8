"""A population's actor: it acts for every member in N x B environments of one vector
environment. The fp32 members act through ONE batched (vmapped) inference per vector step
over the learner's stacked parameters; a member whose `actor_precision` is another (int8)
acts through its own policy runtime at that precision (`quantization.runtimes`),
reloaded every `variable_update_period` of its actor steps, its int8 payload's biases
corrected on its newest replay sample (`bias_correction`, issue 39). Each member writes
its own replay through its own adder (its discount, the member's).

    actor = builder.make_local_actor(networks, spec, learner, adders, seed)
    actions = actor.act(observations)          # [N * B] exploring actions
    returns = actor.evaluate(env, members, episodes)   # float [M] greedy mean returns
"""
from __future__ import annotations

import time
from typing import Any, Callable, Dict, NamedTuple, Optional, Sequence

import dm_env
import jax
import numpy as np

from actorq.components import population as population_lib
from actorq.components.acting import variable_client as vc
from actorq.agents.population import learning
from actorq.quantization import bias_correction


class PopulationActor:
  """Acts for the members (see the module docstring).

  Attributes:
    actor_steps: int [N], each member's actor steps (its own transitions; drives its
      exploration and its runtime's reloads).
    adders: one batched adder per member.
    runtimes: member -> (precision, runtime, actor step loaded) of the members acting at
      another precision than fp32.
    act_seconds, act_counted: measured acting cost per member (seconds, actor steps)
      since they were last reset (`take_cost`).

  Args:
    builder: the `PopulationBuilder`.
    networks: the member builder's networks.
    environment_spec: the task's spec.
    learner: the `PopulationLearner` (the variable source: parameters, values, hyper,
      calibration).
    adders: one per member (`builder.member.make_batched_adder`).
    seed: seeds the actors' draws (exploration), a generator seeded [seed, 1].
  """

  def __init__(self, builder, networks, environment_spec, learner, adders, seed: int):
    self.builder = builder
    self.n = builder.config.size
    self.networks = networks
    self.spec = environment_spec
    self.outputs = builder.member.policy_outputs(networks, environment_spec)
    self.learner = learner
    self.adders = list(adders)
    self.act_rng = np.random.default_rng([seed, 1])
    self.runtimes: Dict[int, Any] = {}
    self.actor_steps = np.zeros(self.n, np.int64)
    self.act_seconds = np.zeros(self.n)
    self.act_counted = np.zeros(self.n, np.int64)
    self.items_before = np.zeros(self.n, np.int64)  # items written before a resume
    for m in range(self.n):
      self.update_member(m)

  def update_member(self, m: int) -> None:
    """Takes member m's values from the learner (after an exploit replaced them): its
    adder's discount, and a fresh runtime at its precision."""
    if self.adders[m] is not None:  # (None: an evaluation actor)
      self.adders[m].discount = self.learner.values[m]["discount"]
    self.runtimes.pop(m, None)

  # -- in a program (its learner a `LearnerView`) ------------------------------------------
  def update(self, wait: bool = False) -> None:
    """Pulls the learner's newest members (`LearnerView.pull`) and takes the values an
    exploit changed (`update_member`)."""
    del wait
    for m in self.learner.pull():
      self.update_member(m)

  @property
  def policy_version(self) -> int:
    """The learner steps of the parameters acted with (a program's)."""
    return int(self.learner.version)

  @property
  def num_steps(self) -> int:
    """Actor steps summed over the members."""
    return int(self.actor_steps.sum())

  @num_steps.setter
  def num_steps(self, steps: int) -> None:
    """A resumed program's actor: each member continues its schedule from steps / N."""
    self.actor_steps[:] = int(steps) // self.n

  # -- runtimes ---------------------------------------------------------------------------
  def load_runtime(self, m: int, runtime=None):
    """A policy runtime of member m's precision (`runtime` if given) loaded with its
    current parameters (`runtimes.make_payload`: int8 quantizes them here, its biases
    corrected on the member's newest replay sample once it has one)."""
    learner = self.learner
    runtime = runtime or vc.make_runtime(learner.precision(m), self.networks.spec)
    params = jax.device_get(population_lib.member(learner.policy_params(), m))
    payload = vc.make_payload(params, self.networks.spec, runtime.payload_precision,
                              int(np.asarray(learner.state.steps)[m]))
    if m in learner.calibration:
      payload = bias_correction.correct_payload(payload, params, self.networks.spec,
                                                learner.calibration[m])
    runtime.load(payload)
    return runtime

  def runtime(self, m: int):
    """Member m's acting runtime, reloaded with its parameters every
    `variable_update_period` of its actor steps (as a train run's actor pulls) and after
    its precision or parameters were replaced (`update_member`)."""
    held = self.runtimes.get(m)
    period = self.builder.member.config.variable_update_period
    if held is None or self.actor_steps[m] - held[2] >= period:
      runtime = self.load_runtime(m, None if held is None else held[1])
      held = self.runtimes[m] = (self.learner.precision(m), runtime, int(self.actor_steps[m]))
    return held[1]

  def values_of(self, members: Sequence[int], observations: np.ndarray,
                runtime_for: Callable[[int], Any], costs: Optional[np.ndarray] = None,
                params=None) -> np.ndarray:
    """float [M, B, ...] policy values (DQN: Q-values [M, B, A]; TD3: tanh outputs u [M, B,
    A]; SAC: Gaussian heads [mean, log_std] [M, B, 2A]) of `members` (M of them) from
    `observations` [M, B, ...]: the fp32 members' from ONE batched (vmapped) inference
    over all M members' parameters (`params`, leaves [M, ...]; None: the learner's, when
    `members` is every member), each other member's through `runtime_for(member)`, its
    precision's runtime, made values by the builder's `policy_outputs(...).to_values`.
    The batched call keeps one shape (one compilation) whatever the precisions; it also
    computes the other members' rows, which are dropped. With `costs` [N], each fp32
    member is charged 1/M of the batched call's seconds and each other member its
    runtime's."""
    members = list(members)
    learner = self.learner
    full = [i for i, m in enumerate(members)
            if learner.precision(m) == learning.FULL_PRECISION]
    rows: Dict[int, np.ndarray] = {}
    if full:
      start = time.perf_counter()
      batched = learner.members.policy_values(
          learner.policy_params() if params is None else params, observations)
      rows.update((i, batched[i]) for i in full)
      if costs is not None:
        costs[np.asarray([members[i] for i in full])] += (
            (time.perf_counter() - start) / len(members))
    for i, m in enumerate(members):
      if i in rows:
        continue
      runtime = runtime_for(m)
      start = time.perf_counter()
      outputs = runtime(observations[i])
      rows[i] = outputs if self.outputs.to_values is None else self.outputs.to_values(outputs)
      if costs is not None:
        costs[m] += time.perf_counter() - start
    return np.stack([np.asarray(rows[i], np.float32) for i in range(len(members))])

  # -- acting -----------------------------------------------------------------------------
  def act(self, observations: np.ndarray) -> np.ndarray:
    """[N * B] exploring actions from observations [N * B, ...], every member's from its
    own policy values (`select_actions` of the agent's population learner)."""
    obs = observations.reshape((self.n, -1) + observations.shape[1:])
    values = self.values_of(range(self.n), obs, self.runtime, self.act_seconds)
    actions = self.learner.members.select_actions(values, self.actor_steps, self.learner.hyper,
                                                  self.act_rng)
    return actions.reshape((-1,) + actions.shape[2:]).astype(self.spec.actions.dtype)

  def items_written(self) -> np.ndarray:
    """int [N]: the items each member's adder has written to its replay, in the whole run
    (a resumed run's count goes on from its checkpoint's)."""
    return np.asarray([int(self.items_before[m] + self.adders[m].items_written)
                       for m in range(self.n)], np.int64)

  def take_cost(self, m: int) -> float:
    """Member m's measured acting seconds per actor step since the last call (reset)."""
    cost = self.act_seconds[m] / max(int(self.act_counted[m]), 1)
    self.act_seconds[m], self.act_counted[m] = 0.0, 0
    return float(cost)

  def evaluate(self, env, members: Sequence[int], episodes: int,
               step: Callable[..., Any]) -> np.ndarray:
    """float [len(members)]: mean greedy return over `episodes` episodes of each member,
    acting at its own precision with its current parameters (the policy it would
    deploy), in `env`, a vector environment of len(members) x episodes rows (row block
    m: member m's episodes). `step(env, call, *args)` calls the environment (the launcher
    names its failures)."""
    members = list(members)
    learner = self.learner
    runtimes = {m: self.load_runtime(m) for m in members
                if learner.precision(m) != learning.FULL_PRECISION}
    params = jax.tree_util.tree_map(lambda x: x[np.asarray(members)], learner.policy_params())
    batch = step(env, "reset")
    returns = np.zeros(len(members) * episodes)
    done = np.zeros(len(members) * episodes, bool)
    while not done.all():
      obs = batch.observation.reshape((len(members), episodes) + batch.observation.shape[1:])
      values = self.values_of(members, obs, runtimes.__getitem__, params=params)
      actions = learner.members.select_actions(values, None, None, None, explore=False)
      actions = actions.reshape((-1,) + actions.shape[2:])
      batch = step(env, "step", actions.astype(self.spec.actions.dtype))
      returns += np.where(done, 0.0, batch.reward)
      done |= batch.step_type == dm_env.StepType.LAST
    return returns.reshape(len(members), episodes).mean(axis=1)

  # -- checkpoints ------------------------------------------------------------------------
  def save(self) -> Dict[str, Any]:
    """The actor's part of a population checkpoint."""
    return {"actor_steps": self.actor_steps.tolist(),
            "items_written": self.items_written().tolist(),
            "act_rng": self.act_rng.bit_generator.state}

  def restore(self, saved: Dict[str, Any]) -> None:
    """Takes back a `save()` (the values are the learner's: restore it first)."""
    self.actor_steps[:] = np.asarray(saved["actor_steps"], np.int64)
    self.items_before = np.asarray(saved["items_written"], np.int64)
    for m in range(self.n):
      self.update_member(m)
    self.act_rng.bit_generator.state = saved["act_rng"]


class LearnerView:
  """What a program's population actor reads of the learner in another process
  (`PopulationLearner.get_variables`): every member's policy parameters (leaves [N, ...]),
  values and learner steps, as of the last `pull`. No calibration is served, so an int8
  member's payload is quantized without bias correction in a program.

  Args:
    builder: the `PopulationBuilder`.
    networks, environment_spec: the member's.
    source: the learner node (its `get_variables`).
  """

  def __init__(self, builder, networks, environment_spec, source):
    self.n = builder.config.size
    self.members = builder.learner_class()(builder.member.config, networks, environment_spec)
    self.source = source
    self.calibration: Dict[int, np.ndarray] = {}
    self.hyper = self.members.hyperparameters(self.n)
    self.values = None
    self.pull()

  def pull(self) -> list:
    """Takes the learner's newest members; returns the members whose values changed."""
    self.params, population, version = self.source.get_variables(
        ["policy", "population", "version"])
    changed = [m for m in range(self.n)
               if self.values is None or population["values"][m] != self.values[m]]
    self.values = [dict(v) for v in population["values"]]
    for m in changed:
      self.hyper = self.members.with_member(self.hyper, m, self.values[m])
    self.state = _Steps(np.asarray(population["steps"], np.int64))
    self.version = int(version)
    return changed

  def precision(self, m: int) -> str:
    return self.values[m].get(learning.PRECISION_FIELD, learning.FULL_PRECISION)

  def policy_params(self) -> Any:
    return self.params


class _Steps(NamedTuple):
  steps: np.ndarray  # int [N], each member's learner steps
