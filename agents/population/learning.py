"""A population's learner: N members' training states on a leading member axis, stepped in
ONE jitted, vmapped update per round (the agent's population learner, a
`components.population.PopulationLearner` such as `agents.dqn.population.DQNPopulation`,
which vmaps `agents.dqn.learning.DQNUpdate`; Flajolet et al. 2022, section 3), each member
sampling its own seeded replay, and PBT's exploit/explore as a learner-side step
(Jaderberg et al. 2017, appendix A.1, truncation selection).

    learner = builder.make_local_learner(networks, spec, key, replay_clients, seed)
    learner.learn(owed)              # int [N]: learner steps each member owes
    learner.step()                   # a program's: one round on the dataset's N batches
    pairs = learner.exploit(fitness, frozen)   # [(loser, winner)] copied and explored

Members start from the config's values (member 0) or from values drawn from the ranges of
the `mutate` fields (members 1..N-1; Jaderberg et al. 2017 start from a random
population). Everything is a function of the seed: the keys given, the replay clients'
seeds and the numpy generator seeded [seed, 2].
"""
from __future__ import annotations

import math
import time
from typing import Any, Dict, List, Sequence, Tuple

import jax
import numpy as np

from actorq import core
from actorq.agents.population import config as config_lib
from actorq.agents.population import rounds as rounds_lib
from actorq.components import population as population_lib
from actorq.components.replay import priorities as priorities_lib
from actorq.quantization import bias_correction

# The mutable field that is the actors' precision and the one of the batched inference.
PRECISION_FIELD, FULL_PRECISION = config_lib.PRECISION_FIELD, config_lib.FULL_PRECISION


class PopulationLearner:
  """N members learning as one (see the module docstring).

  Attributes:
    members: the agent's population learner (its vmapped `step`, `policy_params`,
      `policy_values`, `select_actions`, HYPERPARAMETERS, LEARNER_FIELDS, LOSS_METRICS).
    state: the members' training states, leaves [N, ...].
    values: per member, field -> value of every mutable field (learner inputs and
      actor_precision).
    hyper: the members' learner inputs (the agent's MEMBER_HYPERPARAMETERS, [N] each).
    learner_steps: int [N], the rounds each member took part in.
    rounds: vmapped updates taken.
    calibration: member -> observations of its newest replay sample (its int8 payloads'
      bias correction, `bias_correction`, as a train run's learner tap keeps them).
    timings: seconds by part: replay (sampling, stacking, priorities), update (the step).

  Args:
    builder: the `PopulationBuilder`.
    networks: the member builder's networks.
    environment_spec: the task's spec.
    random_key: the members' initialisation key (split into N).
    replay_clients: one seeded in-process replay client per member.
    seed: seeds PBT's draws (initial values, selection and explore).
  """

  def __init__(self, builder, networks, environment_spec, random_key, replay_clients,
               seed: int, dataset=None, counter=None, replay_client=None):
    self.builder = builder
    self.member_builder = builder.member
    self.n = builder.config.size
    self.members = builder.learner_class()(builder.member.config, networks, environment_spec)
    self.networks = networks
    self.state = self.members.init(jax.random.split(random_key, self.n))
    # One process: a replay client per member (`learn`); a program: `dataset` yields the N
    # members' batches at once (`step`) and priorities go through `replay_client`.
    self.clients = None if replay_clients is None else list(replay_clients)
    self.dataset, self.counter = dataset, counter
    self.table = builder.member.replay_table_name()
    self.tables = ([self.table] * self.n if dataset is None else
                   [builder.member_builder(m).replay_table_name() for m in range(self.n)])
    self.priority_clients = self.clients or [replay_client] * self.n
    self.ready = None  # a program's ready rounds (`record_round`)
    self.calibration: Dict[int, np.ndarray] = {}
    self.timings = {"replay": 0.0, "update": 0.0}
    self.pbt_rng = np.random.default_rng([seed, 2])
    config_values = {name: getattr(builder.member.config, name)
                     for name in self.members.HYPERPARAMETERS}
    self.values: List[Dict[str, Any]] = []
    for m in range(self.n):
      values = dict(config_values)
      if m > 0:
        for name in builder.config.mutate:
          values[name] = self.members.HYPERPARAMETERS[name].sample(self.pbt_rng)
      self.values.append(self.canonical(self.members.constrain(values)))
    self.hyper = self.members.hyperparameters(self.n)
    for m in range(self.n):
      self.apply_values(m)
    self.learner_steps = np.zeros(self.n, np.int64)
    self.start_step = np.full(self.n, -1, np.int64)  # actor steps when learning started
    self.rounds = 0
    # The pytree structure of every stacked batch `learn` hands the vmapped step (fixed
    # at its first round, so the step compiles once).
    self.batch_structure = None

  def canonical(self, values: Dict[str, Any]) -> Dict[str, Any]:
    """Numeric values as the float32 the learner holds, written shortest (0.001)."""
    return {k: float(str(np.float32(v))) if k in self.members.LEARNER_FIELDS else v
            for k, v in values.items()}

  def apply_values(self, m: int) -> None:
    """Member m's values into the learner's arrays."""
    self.hyper = self.members.with_member(self.hyper, m, self.values[m])

  def precision(self, m: int) -> str:
    """Member m's acting precision."""
    return self.values[m].get(PRECISION_FIELD, FULL_PRECISION)

  def policy_params(self) -> Any:
    """Every member's policy parameters (leaves [N, ...]): the actors' variable source."""
    return self.members.policy_params(self.state)

  def member_config(self, m: int) -> Any:
    """Member m's config (the shared one with its values)."""
    return self.members.member_config(self.values[m])

  # -- learning ---------------------------------------------------------------------------
  def owed(self, actor_steps: np.ndarray, items_written: np.ndarray) -> np.ndarray:
    """int [N]: learner steps each member owes: the member builder's
    `learner_steps_owed` of its own replay progress (its actor steps since its learning
    started, once its table held `min_replay_size()` items, and the items written to it;
    `actor_steps`, `items_written`: int [N]) minus the steps it took (as `local.run` asks
    of one agent)."""
    member = self.member_builder
    owed = np.zeros(self.n, np.int64)
    for m in range(self.n):
      if self.start_step[m] < 0:
        size = int(self.clients[m].server_info()[self.table].current_size)
        if size < member.min_replay_size():
          continue
        self.start_step[m] = actor_steps[m]
      owed[m] = member.learner_steps_owed(core.ReplayProgress(
          int(actor_steps[m] - self.start_step[m]), int(items_written[m]))) - \
          self.learner_steps[m]
    return owed

  def learn(self, owed: np.ndarray) -> None:
    """Vmapped rounds until no member owes a step (`owed`: int [N], consumed); members not
    owing sit out (masked).

    Raises:
      core.NonFiniteLossError: a member's loss was not finite (the state is the one from
        before that round).
    """
    owed = np.array(owed, np.int64)
    batch_size = self.member_builder.config.batch_size
    while (owed > 0).any():
      t0 = time.perf_counter()
      active = owed > 0
      samples = {m: self.clients[m].sample_batch(self.table, batch_size)
                 for m in np.flatnonzero(active).tolist()}
      self._update(samples, active, t0)
      owed -= active

  # -- the learner contract in a program (`core.Learner`) ---------------------------------
  def step(self) -> None:
    """One vmapped round of every member on the next N batches of the dataset (a
    program's learner node steps it); counted as one learner step."""
    t0 = time.perf_counter()
    self._update(dict(enumerate(next(self.dataset))), np.ones(self.n, bool), t0)
    if self.counter is not None:
      self.counter.increment(steps=1)

  @property
  def step_count(self) -> int:
    """Vmapped rounds taken (a program's learner steps)."""
    return int(self.rounds)

  def get_variables(self, names: Sequence[str]) -> List[Any]:
    """``"policy"``: every member's policy parameters (leaves [N, ...], numpy);
    ``"version"``: `step_count`; ``"population"``: {"values": per member field ->
    value, "steps": int [N] learner steps of each member's state}."""
    out = []
    for name in names:
      if name == "policy":
        out.append(jax.device_get(self.policy_params()))
      elif name == "version":
        out.append(self.step_count)
      elif name == "population":
        out.append({"values": [dict(v) for v in self.values],
                    "steps": np.asarray(jax.device_get(self.state.steps)).tolist()})
      else:
        raise KeyError(f"a population learner serves policy, version and population, "
                       f"not {name!r}")
    return out

  # Methods a program's evaluator may call on the learner node (`LearnerNode.learner_call`).
  REMOTE_STEPS = ("record_round",)

  def record_round(self, fitness: Sequence[float], actor_steps: int,
                   total_steps: int) -> List[Dict[str, Any]]:
    """A program's ready round: every member's evaluation return (`fitness`, float [N])
    recorded as pbt.csv rows, then exploit/explore (`rounds.ReadyRounds`); each member's
    actor steps are taken as the run's summed `actor_steps` / N, and members are past
    their last steps once the sum reaches `total_steps` (no exploit then). Returns the
    rows of this round."""
    progress = _Progress(self.n, int(actor_steps) // self.n)
    steps = max(int(total_steps) // self.n, 1)
    if self.ready is None:
      self.ready = rounds_lib.ReadyRounds(self, progress, steps, steps)
    self.ready.actor, self.ready.steps = progress, steps
    before = len(self.ready.rows)
    self.ready.record(range(self.n), np.asarray(fitness, np.float64))
    return [dict(r) for r in self.ready.rows[before:]]

  def _update(self, samples: Dict[int, Any], active: np.ndarray, t0: float) -> None:
    """One vmapped round on `samples` (member -> its batch) of the `active` members."""
    batch_size = self.member_builder.config.batch_size
    # Each member's table decodes its signature into its own namedtuple classes: stack
    # the leaves into ONE structure, the first batch's of this session, every round.
    # (Rebuilding whichever member came first would hand `step` another pytree
    # structure, i.e. a retrace and an XLA compile, each time the first active member
    # changes: up to N compiles of the vmapped update.)
    leaves, treedef = jax.tree_util.tree_flatten(next(iter(samples.values())).data)
    if self.batch_structure is None:
      self.batch_structure = treedef
    treedef = self.batch_structure
    data = [jax.tree_util.tree_leaves(samples[m].data) if m in samples else
            [np.zeros_like(x) for x in leaves] for m in range(self.n)]
    probabilities = np.stack([
        np.asarray(samples[m].info.probability, np.float32) if m in samples
        else np.ones(batch_size, np.float32) for m in range(self.n)])
    sizes = np.stack([
        np.asarray(samples[m].info.table_size, np.float32) if m in samples
        else np.ones(batch_size, np.float32) for m in range(self.n)])
    stacked = jax.tree_util.tree_unflatten(treedef, [np.stack(x) for x in zip(*data)])
    t1 = time.perf_counter()
    state, td, metrics = self.members.step(self.state, stacked, probabilities, sizes,
                                           self.hyper, active)
    losses = {name: np.asarray(metrics[name])  # waits for the update
              for name in self.members.LOSS_METRICS}
    t2 = time.perf_counter()
    bad = [(m, name) for m in samples for name, loss in losses.items()
           if not math.isfinite(float(loss[m]))]
    if bad:
      m, name = bad[0]
      raise core.NonFiniteLossError(
          f"learner round {self.rounds + 1}: member {m}'s {name} is {losses[name][m]}; the "
          "population keeps its state from before that round")
    for m, sample in samples.items():
      observations = bias_correction.observations_of(sample, self.networks.spec.input_shape)
      if observations is not None:
        self.calibration[m] = np.array(
            observations[:bias_correction.DEFAULT_CALIBRATION_SIZE], np.float32)
    config = self.member_builder.config
    if getattr(config, "prioritized_replay", False):
      td = np.asarray(td, np.float64)
      for m, sample in samples.items():
        priorities_lib.update_priorities(self.priority_clients[m], self.tables[m],
                                         sample.info.key, np.abs(td[m]) + config.priority_epsilon)
    self.state = state
    self.rounds += 1
    self.learner_steps += active
    t3 = time.perf_counter()
    self.timings["replay"] += (t1 - t0) + (t3 - t2)
    self.timings["update"] += t2 - t1

  # -- exploit / explore --------------------------------------------------------------
  def exploit(self, fitness: Sequence[float], frozen: Sequence[bool]) -> List[Tuple[int, int]]:
    """PBT's exploit/explore on one round's fitness (float [N], every member's return in
    that round; `truncation_selection` at the config's quantile): each member of the
    bottom copies one of the top (online and target parameters, optimizer state, learner
    step count and every mutable value, exactly, as they are now), then each `mutate`
    field is explored. A `frozen` member (past its last steps) is never replaced.

    Returns:
      the (loser, winner) pairs copied, in order.
    """
    c = self.builder.config
    if self.n < 2:  # (one member, as `benchmarks/pbt_cost.py` runs it: no one to copy)
      return []
    losers, winners = population_lib.truncation_selection(list(fitness), c.quantile,
                                                          self.pbt_rng)
    copied = []
    for loser, winner in zip(losers, winners):
      if loser == winner or frozen[loser]:
        continue  # never after a member's last steps
      self.state = population_lib.copy_member(self.state, winner, loser)
      values = dict(self.values[winner])
      for name in c.mutate:
        values[name] = population_lib.explore(self.members.HYPERPARAMETERS[name],
                                              values[name], self.pbt_rng,
                                              c.resample_probability)
      self.values[loser] = self.canonical(self.members.constrain(values))
      self.apply_values(loser)
      copied.append((int(loser), int(winner)))
    return copied

  # -- checkpoints ------------------------------------------------------------------------
  def member_checkpoint(self, m: int) -> Dict[str, Any]:
    """Member m as a train run's checkpoint holds a learner (numpy): its fp32
    `policy_params`, its training state (`population_member_state`, the agent's
    population learner's state without the member axis) and its `learner_steps`; what
    `actorq eval`, `export` and `quantize` read of the population's best member."""
    state = jax.device_get(population_lib.member(self.state, m))
    return {"policy_params": self.members.policy_params(state),
            "population_member_state": tuple(state), "learner_steps": int(state.steps)}

  def save(self) -> Dict[str, Any]:
    """The learner's part of a population checkpoint (numpy and plain Python)."""
    saved = {"state": jax.device_get(self.state), "values": [dict(v) for v in self.values],
             "learner_steps": self.learner_steps.tolist(), "rounds": self.rounds,
             "start_step": self.start_step.tolist(),
             "calibration": {int(m): np.asarray(o) for m, o in self.calibration.items()},
             "pbt_rng": self.pbt_rng.bit_generator.state}
    if self.clients is not None:  # (a program's tables are in Reverb's checkpoint)
      saved["replay"] = [c.state() for c in self.clients]
    if self.ready is not None:  # a program's ready rounds (pbt.csv's rows)
      saved.update(self.ready.save())
    return saved

  def restore(self, saved: Dict[str, Any]) -> None:
    """Takes back a `save()` of a learner with the same settings."""
    self.state = jax.device_put(type(self.state)(*saved["state"]))
    self.values = [dict(v) for v in saved["values"]]
    for m in range(self.n):
      self.apply_values(m)
      if self.clients is not None:
        self.clients[m].restore(saved["replay"][m])
    self.learner_steps = np.asarray(saved["learner_steps"], np.int64)
    self.start_step = np.asarray(saved["start_step"], np.int64)
    self.rounds = int(saved["rounds"])
    self.calibration = {int(m): np.asarray(o, np.float32)
                        for m, o in saved.get("calibration", {}).items()}
    self.pbt_rng.bit_generator.state = saved["pbt_rng"]
    if self.dataset is not None and "rows" in saved:  # a program's ready rounds
      progress = _Progress(self.n, 0)
      self.ready = rounds_lib.ReadyRounds(self, progress, 1, 1)
      self.ready.restore(saved)


class _Progress:
  """What `rounds.ReadyRounds` reads of the actors in a program's learner: each member's
  actor steps (the counter's sum / N), no acting cost measured, no actor to update (the
  actors pull the new values)."""

  def __init__(self, n: int, steps: int):
    self.actor_steps = np.full(n, steps, np.int64)

  def take_cost(self, m: int) -> float:
    del m
    return 0.0

  def update_member(self, m: int) -> None:
    del m
