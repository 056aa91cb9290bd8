"""Population-based training on one machine, in one process (issue 43).

N members of one agent learn side by side: their learner states sit on a leading member
axis and take ONE jitted, vmapped update per round (the agent's population learner,
`POPULATION_LEARNERS`; Flajolet et al. 2022), their actors step N x B environments of one
vector environment, and each member keeps its own seeded in-process replay
(`LocalReplayClient` of the builder's tables), adder and samples-per-insert schedule,
exactly as `local.run` keeps one run's. The fp32 members act through ONE batched
(vmapped) inference per vector step; a member whose `actor_precision` is another (int8)
acts through its own policy runtime at that precision (`quantization.runtimes`),
reloaded every `variable_update_period` of its actor steps.

Members start from the config's values (member 0) or from values drawn from the ranges
of the `mutate` fields (members 1..N-1; Jaderberg et al. 2017 start from a random
population). Every `ready_every` actor steps of a member (its own transitions), the
member is evaluated (greedy, `eval_episodes` episodes at its actor precision, the same
start states for every member and every evaluation): its k-th ready round. Once every
member has been evaluated in round k (synchronous ready rounds: members reach a ready
point at different vector steps, since an episode's reset is no actor step, and a member
ranked alone against the others' older returns was almost never the worst), PBT's
exploit/explore runs on those N returns (Jaderberg et al. 2017, appendix A.1, truncation
selection): each member in the bottom `quantile` copies a member drawn from the top
`quantile` (online and target parameters, optimizer state, learner step count and every
mutable value, exactly, as they are then), then each `mutate` field is explored: a number is
resampled from its range with probability `resample_probability`, else multiplied by 0.8
or 1.2 (clipped); a choice (actor_precision) switches to another with that probability.
A member's last evaluation (at `steps`) is never followed by a copy.

    result = pbt.run(pbt.PBTSettings("dqn", "gym:CartPole-v1", population=4, steps=5000,
                                     ready_every=1000, mutate=("learning_rate",),
                                     logdir="runs/pbt"))

Files in `logdir` (nothing is written before the settings are checked):
    pbt.json         the settings (`actorq pbt --resume DIR` reads them)
    pbt.csv          one row per member per evaluation, in the order they happened:
                     member, actor_steps, learner_steps, episode_return (the evaluation's
                     mean), the member's mutable values during that interval, precision,
                     copied_from (the member it copied right after, or empty); a function
                     of the settings alone (no timings)
    pbt_member<m>.csv and tensorboard/pbt_member<m>/   per member: the same scalars and
                     actor_us_per_step, the measured wall-clock microseconds of its acting
                     (inference) per actor step over the interval (its share of the batched
                     call for fp32 members)
    lineage.png      each member's return over its actor steps, copies marked
    population/      checkpoints of the whole population (`checkpoint_every` minutes, at the
                     end, and at Ctrl-C / SIGTERM)
    best/            a run directory of the member with the best final evaluation:
                     run.json (its config, actor_precision included) and
                     checkpoints/ckpt-<steps>.pkl (its policy parameters and learner state),
                     which `actorq eval`, `export` and `quantize` read as a train run's

A run is a function of its settings (seed included) on one machine; a resumed run
continues from its checkpoint with new episodes (as `local.run`).
"""
from __future__ import annotations

import csv
import dataclasses
import json
import math
import os
import signal
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import dm_env
import jax
import numpy as np

from actorq import core
from actorq.agents.dqn import builder as dqn_builder
from actorq.agents.dqn import population as dqn_population
from actorq.agents.sac import builder as sac_builder
from actorq.agents.sac import population as sac_population
from actorq.agents.td3 import builder as td3_builder
from actorq.agents.td3 import population as td3_population
from actorq.components import atomic, config_io, fault_points
from actorq.components import population as population_lib
from actorq.components.acting import loop as loop_lib
from actorq.components.acting import variable_client as vc
from actorq.components.envs import environments, vector_env
from actorq.components.replay import local_replay
from actorq.components.replay import priorities as priorities_lib
from actorq.launch import checkpointing
from actorq.launch import experiment as experiment_lib
from actorq.launch import logging as logging_lib
from actorq.launch import processes
from actorq.launch import registry
from actorq.launch import run_dir
from actorq.launch import spec as spec_lib
from actorq.quantization import bias_correction

# Builder class -> its population learner (a `components.population.PopulationLearner`
# subclass taking (config, networks, environment_spec): HYPERPARAMETERS, LEARNER_FIELDS,
# hyperparameters(n), init(keys), step(...), LOSS_METRICS, policy_params(state),
# policy_values(params, obs), select_actions(...), constrain(values), member_config(values),
# as_dicts, with_member). A new agent with population support is one class plus one entry
# here.
POPULATION_LEARNERS = {dqn_builder.DQNBuilder: dqn_population.DQNPopulation,
                       td3_builder.TD3Builder: td3_population.TD3Population,
                       sac_builder.SACBuilder: sac_population.SACPopulation}
PBT_CSV = "pbt.csv"
PBT_JSON = run_dir.POPULATION_INFO
BEST_DIR = "best"
POPULATION_DIR = "population"
LINEAGE_PNG = "lineage.png"
assert {PBT_JSON, BEST_DIR, POPULATION_DIR, LINEAGE_PNG} <= set(run_dir.POPULATION_ENTRIES)
DEFAULT_CHECKPOINT_EVERY = 10.0  # minutes, as `actorq train`
# The mutable field that is the actors' precision (applied by the launcher, not the
# learner), and the precision whose members act through the one batched inference.
PRECISION_FIELD = "actor_precision"
FULL_PRECISION = "fp32"
DEFAULT_QUANTILE = 0.25
DEFAULT_RESAMPLE_PROBABILITY = 0.25


def supported_agents() -> List[str]:
  """Registered agent names whose builder has a population learner."""
  return [n for n in registry.names() if registry.get(n)[1] in POPULATION_LEARNERS]


def mutable_fields() -> Dict[str, List[str]]:
  """Agent name -> the config fields `--mutate` may name (its population learner's
  HYPERPARAMETERS), for every agent with population support."""
  return {name: list(POPULATION_LEARNERS[registry.get(name)[1]].HYPERPARAMETERS)
          for name in supported_agents()}


@dataclasses.dataclass(frozen=True)
class PBTSettings:
  """What `actorq pbt` runs.

  Attributes:
    agent: a registered agent name with population support (`supported_agents`).
    env_id: environment id with a vector backend (`vector_env.vector_backend`).
    population: members N >= 2.
    steps: actor steps of EACH member (its own transitions), >= 1.
    ready_every: actor steps of a member between its evaluations and exploit/explore, in
      [1, steps].
    mutate: config fields explore changes (the population learner's HYPERPARAMETERS);
      empty: exploit only.
    seed: seeds environments, networks, exploration, replay sampling and PBT's draws.
    num_envs: environments per member (B >= 1): the actors step N x B at once.
    eval_episodes: greedy episodes per evaluation (the fitness is their mean return).
    quantile: fraction of the population in the top and in the bottom, in (0, 0.5].
    resample_probability: chance that explore resamples a field instead of perturbing it.
    config: the agent's config fields (JSON values) shared by the members at the start.
    logdir: the run directory; None: no files.
    max_episode_steps: the episode step cap (training and evaluation).
  """
  agent: str
  env_id: str
  population: int
  steps: int
  ready_every: int
  mutate: Tuple[str, ...] = ()
  seed: int = 0
  num_envs: int = 1
  eval_episodes: int = 5
  quantile: float = DEFAULT_QUANTILE
  resample_probability: float = DEFAULT_RESAMPLE_PROBABILITY
  config: Dict[str, Any] = dataclasses.field(default_factory=dict)
  logdir: Optional[str] = None
  max_episode_steps: int = loop_lib.DEFAULT_MAX_EPISODE_STEPS


def population_class(agent: str):
  """The population learner class of `agent`.

  Raises:
    core.UsageError: an unknown agent, or one without population support (naming those
      with it).
  """
  allowed = ", ".join(supported_agents())
  try:
    builder_cls = registry.get(agent)[1]
  except ValueError as e:  # registry.UnknownAgentError
    raise core.UsageError(f"--agent: {e}") from None
  if builder_cls not in POPULATION_LEARNERS:
    raise core.UsageError(f"--agent {agent} has no population support (no jitted population "
                          f"learner); agents with it: {allowed}")
  return POPULATION_LEARNERS[builder_cls]


def check(settings: PBTSettings):
  """Validates `settings` without writing anything; returns the agent's builder.

  Raises:
    core.UsageError: one line naming what is wrong and what is allowed: population < 2,
      ready_every outside [1, steps], an unknown or non-mutable mutate field, an agent
      without population support, an environment without a vector backend or that the
      agent cannot act in, a bad config value, quantile or resample probability.
  """
  s = settings
  cls = population_class(s.agent)
  try:
    core.check_seed(s.seed, "--seed")
  except ValueError as e:
    raise core.UsageError(str(e)) from None
  if s.population < 2:
    raise core.UsageError(f"--population {s.population}: a population needs at least 2 "
                          "members (allowed: an integer >= 2)")
  if s.steps < 1 or not 1 <= s.ready_every <= s.steps:
    raise core.UsageError(f"--ready-every {s.ready_every} is above --steps {s.steps}: each "
                          f"member must be ready at least once (allowed: 1 to {s.steps})"
                          if s.ready_every > s.steps else
                          f"--ready-every {s.ready_every} and --steps {s.steps} must be >= 1")
  fields = {f.name for f in dataclasses.fields(registry.get(s.agent)[0])}
  mutable = list(cls.HYPERPARAMETERS)
  for name in s.mutate:
    if name in cls.HYPERPARAMETERS:
      continue
    what = ("a fixed field of " + s.agent + " (the members share it)" if name in fields
            else "not a field of " + s.agent + "'s config")
    raise core.UsageError(f"--mutate {name}: {what}; mutable fields: {', '.join(mutable)}")
  if len(set(s.mutate)) != len(s.mutate):
    raise core.UsageError(f"--mutate {','.join(s.mutate)} repeats a field")
  rows = {"--population x --num-envs": (s.population * s.num_envs,
                                        experiment_lib.EVAL_SEED_OFFSET -
                                        experiment_lib.EVAL_SEED_ROWS),
          "--population x --eval-episodes": (s.population * s.eval_episodes,
                                             experiment_lib.EVAL_SEED_ROWS)}
  for what, (value, most) in rows.items():  # (training and evaluation seeds apart, B14)
    if value > most:
      raise core.UsageError(f"{what} is {value}: at most {most} environments")
  if not 0.0 < s.quantile <= 0.5:
    raise core.UsageError(f"quantile {s.quantile}: allowed (0, 0.5]")
  if not 0.0 <= s.resample_probability <= 1.0:
    raise core.UsageError(f"resample probability {s.resample_probability}: allowed [0, 1]")
  try:
    backend = vector_env.vector_backend(s.env_id)
  except (core.UnknownEnvironmentError, ValueError) as e:
    raise core.UsageError(f"--env: {e}") from None
  if backend is None:
    raise core.UsageError(f"--env {s.env_id} has no vector backend: a population steps its "
                          "N x B environments as one vector environment (gym: and dmc: ids "
                          "have one)")
  try:
    builder = spec_lib.make_builder(s.agent, s.config)
  except ValueError as e:
    raise core.UsageError(str(e)) from None
  try:
    env = environments.make_environment(s.env_id, seed=s.seed)
  except (core.UnsupportedEnvironmentError, core.UnknownEnvironmentError) as e:
    raise core.UsageError(f"--env: {e}") from None
  try:
    builder.make_networks(environments.environment_spec(env))
  except (core.UnsupportedEnvironmentError, core.UnknownEnvironmentError) as e:
    raise core.UsageError(f"--agent {s.agent} --env {s.env_id}: {e}") from None
  finally:
    env.close()
  return builder


@dataclasses.dataclass
class PBTResult:
  """What a population run ends with.

  rows: pbt.csv's rows (dicts); final_returns: float [N] each member's last evaluation;
  best_member: argmax of final_returns (lowest index on ties); best_dir: its run
  directory (None without a logdir); wall_seconds; learner_rounds: vmapped updates taken
  (this session); timings: this session's wall-clock seconds by part (act, environment,
  learn, evaluate; see `_Run.timings`).
  """
  rows: List[Dict[str, Any]]
  final_returns: List[float]
  best_member: int
  best_dir: Optional[str]
  wall_seconds: float
  learner_rounds: int
  timings: Dict[str, float] = dataclasses.field(default_factory=dict)


def _write_csv(path: str, rows: List[Dict[str, Any]]) -> None:
  if not rows:
    return
  with open(path, "w", newline="", encoding="utf-8") as f:
    writer = csv.DictWriter(f, fieldnames=list(rows[0]))
    writer.writeheader()
    for row in rows:
      writer.writerow({k: (repr(v) if isinstance(v, float) else v) for k, v in row.items()})


class _Run:
  """One population run's state and loop (see the module docstring)."""

  def __init__(self, settings: PBTSettings, builder):
    s = self.settings = settings
    self.builder = builder
    self.n, self.b = s.population, s.num_envs
    single = environments.make_environment(s.env_id, seed=s.seed)
    try:
      self.spec = environments.environment_spec(single)
    finally:
      single.close()
    self.networks = builder.make_networks(self.spec)
    self.outputs = builder.policy_outputs(self.networks, self.spec)
    self.learner = POPULATION_LEARNERS[type(builder)](builder.config, self.networks, self.spec)
    key_init, key_replay = jax.random.split(jax.random.PRNGKey(s.seed))
    self.state = self.learner.init(jax.random.split(key_init, self.n))
    replay_seeds = np.asarray(jax.random.randint(key_replay, (self.n,), 0, 2**31 - 1))
    self.clients = [local_replay.LocalReplayClient(builder.make_replay_tables(self.spec),
                                                   seed=int(seed)) for seed in replay_seeds]
    self.adders = [builder.make_batched_adder(c, self.spec, num_envs=self.b)
                   for c in self.clients]
    self.act_rng = np.random.default_rng([s.seed, 1])
    self.runtimes: Dict[int, Any] = {}  # member -> (precision, runtime, actor step loaded)
    # member -> observations of its newest replay sample: its int8 payloads' bias
    # correction (`bias_correction`, issue 39), as a train run's learner tap keeps them.
    self.calibration: Dict[int, np.ndarray] = {}
    # Wall-clock seconds of this session by part: acting (inference and action selection),
    # environment (vector env steps and adders), learning (all of `_learn`), of which
    # replay (sampling, stacking, priorities) and update (the vmapped step), evaluation
    # (and exploit/explore).
    self.timings = {"act": 0.0, "environment": 0.0, "learn": 0.0, "replay": 0.0,
                    "update": 0.0, "evaluate": 0.0}
    self.pbt_rng = np.random.default_rng([s.seed, 2])
    # Every member's values of the mutable fields (learner inputs and actor_precision),
    # the config's for member 0 and drawn from the ranges of the --mutate fields for the
    # others (PBT starts from a random population, Jaderberg et al. 2017, section 3).
    config_values = {name: getattr(builder.config, name) for name in
                     self.learner.HYPERPARAMETERS}
    self.values: List[Dict[str, Any]] = []
    for m in range(self.n):
      values = dict(config_values)
      if m > 0:
        for name in s.mutate:
          values[name] = self.learner.HYPERPARAMETERS[name].sample(self.pbt_rng)
      self.values.append(self._canonical(self.learner.constrain(values)))
    self.hyper = self.learner.hyperparameters(self.n)
    for m in range(self.n):
      self._apply_values(m)
    self.actor_steps = np.zeros(self.n, np.int64)
    self.learner_steps = np.zeros(self.n, np.int64)  # rounds each member took part in
    self.start_step = np.full(self.n, -1, np.int64)  # actor steps when learning started
    self.items_before = np.zeros(self.n, np.int64)  # items written before a resume
    self.next_ready = np.full(self.n, s.ready_every, np.int64)
    self.last_eval = np.full(self.n, -1, np.int64)  # actor steps at the latest evaluation
    self.fitness = np.full(self.n, np.nan)
    self.rows: List[Dict[str, Any]] = []
    # Ready round k -> {member: (its return there, its row's index)} until every member has
    # been evaluated in round k (`_exploit`).
    self.rounds_pending: Dict[int, Dict[int, Tuple[float, int]]] = {}
    self.rounds = 0
    self.table = builder.replay_table_name()
    # The pytree structure of every stacked batch `_learn` hands the vmapped step (fixed
    # at its first round, so the step compiles once).
    self.batch_structure = None
    # Measured acting cost per member since its last evaluation: seconds, actor steps.
    self.act_seconds = np.zeros(self.n)
    self.act_counted = np.zeros(self.n, np.int64)

  def _canonical(self, values: Dict[str, Any]) -> Dict[str, Any]:
    """Numeric values as the float32 the learner holds, written shortest (0.001)."""
    return {k: float(str(np.float32(v))) if k in self.learner.LEARNER_FIELDS else v
            for k, v in values.items()}

  def _apply_values(self, m: int) -> None:
    """Member m's values into the learner's arrays, its adder (discount) and its actor."""
    self.hyper = self.learner.with_member(self.hyper, m, self.values[m])
    self.adders[m].discount = self.values[m]["discount"]
    self.runtimes.pop(m, None)

  def _precision(self, m: int) -> str:
    return self.values[m].get(PRECISION_FIELD, FULL_PRECISION)

  # -- acting -----------------------------------------------------------------------------
  def _load_runtime(self, m: int, runtime=None):
    """A policy runtime of member m's precision (`runtime` if given) loaded with its
    current parameters (`runtimes.make_payload`: int8 quantizes them here, its biases
    corrected on the member's newest replay sample once it has one)."""
    runtime = runtime or vc.make_runtime(self._precision(m), self.networks.spec)
    params = jax.device_get(population_lib.member(self.learner.policy_params(self.state), m))
    payload = vc.make_payload(params, self.networks.spec, runtime.payload_precision,
                              int(np.asarray(self.state.steps)[m]))
    if m in self.calibration:
      payload = bias_correction.correct_payload(payload, params, self.networks.spec,
                                                self.calibration[m])
    runtime.load(payload)
    return runtime

  def _runtime(self, m: int):
    """Member m's acting runtime, reloaded with its parameters every
    `variable_update_period` of its actor steps (as a train run's actor pulls) and after
    its precision or parameters were replaced (`_apply_values`)."""
    held = self.runtimes.get(m)
    if held is None or self.actor_steps[m] - held[2] >= self.builder.config.variable_update_period:
      runtime = self._load_runtime(m, None if held is None else held[1])
      held = self.runtimes[m] = (self._precision(m), runtime, int(self.actor_steps[m]))
    return held[1]

  def _values(self, members: Sequence[int], observations: np.ndarray, runtime_for,
              costs: Optional[np.ndarray] = None, params=None) -> np.ndarray:
    """float [M, B, ...] policy values (DQN: Q-values [M, B, A]; TD3: tanh outputs u [M, B,
    A]; SAC: Gaussian heads [mean, log_std] [M, B, 2A]) of `members` (M of them) from
    `observations` [M, B, ...]: the fp32 members' from ONE batched (vmapped) inference
    over all M members' parameters (`params`, leaves [M, ...]; None: the learner's, when
    `members` is every member), each other member's through
    `runtime_for(member)`, its precision's runtime, made values by the builder's
    `policy_outputs(...).to_values`. The batched call keeps one shape (one compilation)
    whatever the precisions; it also computes the other members' rows, which are
    dropped. With `costs` [N], each fp32 member is charged 1/M of the batched call's
    seconds and each other member its runtime's."""
    members = list(members)
    full = [i for i, m in enumerate(members) if self._precision(m) == FULL_PRECISION]
    rows: Dict[int, np.ndarray] = {}
    if full:
      start = time.perf_counter()
      batched = self.learner.policy_values(
          self.learner.policy_params(self.state) if params is None else params,
                                           observations)
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

  def _act(self, observations: np.ndarray) -> np.ndarray:
    """[N * B] exploring actions, every member's from its own policy values
    (`learner.select_actions`)."""
    obs = observations.reshape((self.n, -1) + observations.shape[1:])
    values = self._values(range(self.n), obs, self._runtime, self.act_seconds)
    actions = self.learner.select_actions(values, self.actor_steps, self.hyper, self.act_rng)
    return actions.reshape((-1,) + actions.shape[2:]).astype(self.spec.actions.dtype)

  def _env(self, env, call: str, *args, during: str = "training"):
    """`env.<call>(*args)`; an exception the environment raises becomes one line
    (`core.EnvironmentFailure`) naming the environment, the call, the error and when (case
    B18); the population's state is that of the last whole vector step."""
    try:
      return getattr(env, call)(*args)
    except Exception as e:  # pylint: disable=broad-except (an environment's own error)
      text = str(e).strip().splitlines()
      what = f"{type(e).__name__}: {text[0]}" if text else type(e).__name__
      raise core.EnvironmentFailure(
          f"{self.settings.env_id}: the environment's {call}() raised {what} during "
          f"{during}, at {int(self.actor_steps.sum())} actor steps of the population "
          f"(members: {', '.join(str(int(n)) for n in self.actor_steps)})") from e

  # -- evaluation -------------------------------------------------------------------------
  def _evaluate(self, members: Sequence[int]) -> np.ndarray:
    """float [len(members)]: mean greedy return over `eval_episodes` episodes, each member
    acting at its own precision with its current parameters (the policy it would
    deploy), every member on the same start states (rows seeded seed +
    EVAL_SEED_OFFSET + i), all in one vector environment."""
    s, e = self.settings, self.settings.eval_episodes
    members = list(members)
    env = vector_env.make_vector_environment(
        s.env_id, len(members) * e, seed=s.seed + experiment_lib.EVAL_SEED_OFFSET,
        max_episode_steps=s.max_episode_steps)
    runtimes = {m: self._load_runtime(m) for m in members
                if self._precision(m) != FULL_PRECISION}
    params = jax.tree_util.tree_map(lambda x: x[np.asarray(members)],
                                    self.learner.policy_params(self.state))
    try:
      batch = self._env(env, "reset", during="an evaluation")
      returns = np.zeros(len(members) * e)
      done = np.zeros(len(members) * e, bool)
      while not done.all():
        obs = batch.observation.reshape((len(members), e) + batch.observation.shape[1:])
        values = self._values(members, obs, runtimes.__getitem__, params=params)
        actions = self.learner.select_actions(values, None, None, None, explore=False)
        actions = actions.reshape((-1,) + actions.shape[2:])
        batch = self._env(env, "step", actions.astype(self.spec.actions.dtype),
                          during="an evaluation")
        returns += np.where(done, 0.0, batch.reward)
        done |= batch.step_type == dm_env.StepType.LAST
    finally:
      env.close()
    return returns.reshape(len(members), e).mean(axis=1)

  # -- learning ---------------------------------------------------------------------------
  def _owed(self) -> np.ndarray:
    """int [N]: learner steps each member owes (`builder.learner_steps_owed` of its own
    replay progress since its learning started) minus those it took."""
    owed = np.zeros(self.n, np.int64)
    for m in range(self.n):
      if self.start_step[m] < 0:
        size = int(self.clients[m].server_info()[self.table].current_size)
        if size < self.builder.min_replay_size():
          continue
        self.start_step[m] = self.actor_steps[m]
      owed[m] = self.builder.learner_steps_owed(core.ReplayProgress(
          int(self.actor_steps[m] - self.start_step[m]),
          int(self.items_before[m] + self.adders[m].items_written))) - self.learner_steps[m]
    return owed

  def _learn(self) -> None:
    """Vmapped rounds until no member owes a step; members not owing sit out (masked)."""
    owed = self._owed()
    batch_size = self.builder.config.batch_size
    while (owed > 0).any():
      t0 = time.perf_counter()
      active = owed > 0
      samples = {m: self.clients[m].sample_batch(self.table, batch_size)
                 for m in np.flatnonzero(active).tolist()}
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
      state, td, metrics = self.learner.step(self.state, stacked, probabilities, sizes,
                                             self.hyper, active)
      losses = {name: np.asarray(metrics[name])  # waits for the update
                for name in self.learner.LOSS_METRICS}
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
      if getattr(self.builder.config, "prioritized_replay", False):
        td = np.asarray(td, np.float64)
        for m, sample in samples.items():
          priorities_lib.update_priorities(
              self.clients[m], self.table, sample.info.key,
              np.abs(td[m]) + self.builder.config.priority_epsilon)
      self.state = state
      self.rounds += 1
      self.learner_steps += active
      owed -= active
      t3 = time.perf_counter()
      self.timings["replay"] += (t1 - t0) + (t3 - t2)
      self.timings["update"] += t2 - t1

  # -- exploit / explore --------------------------------------------------------------
  def _ready(self, members: List[int], returns: np.ndarray) -> List[Dict[str, Any]]:
    """Records the members' evaluations (pbt.csv rows: the values they had during the
    interval) in their ready rounds, then runs exploit/explore for every round that all
    members have now reached (`_exploit`). Returns the per-member scalars (the rows plus
    the measured actor cost per step)."""
    s = self.settings
    new_rows, scalars = {}, {}
    for m, value in zip(members, returns):
      self.fitness[m] = float(value)
      row = {"member": m, "actor_steps": int(self.actor_steps[m]),
             "learner_steps": int(np.asarray(self.state.steps)[m]),
             "episode_return": float(value)}
      row.update({k: v for k, v in self.values[m].items() if k != PRECISION_FIELD})
      row.update(precision=self._precision(m), copied_from="")
      new_rows[m] = row
      cost = self.act_seconds[m] / max(int(self.act_counted[m]), 1)
      scalars[m] = {"actor_steps": row["actor_steps"], "learner_steps": row["learner_steps"],
                    "episode_return": row["episode_return"],
                    "actor_us_per_step": 1e6 * cost,
                    **{k: v for k, v in self.values[m].items()
                       if k in self.learner.LEARNER_FIELDS}}
      self.act_seconds[m], self.act_counted[m] = 0.0, 0
      self.last_eval[m] = self.actor_steps[m]
      self.next_ready[m] = (self.actor_steps[m] // s.ready_every + 1) * s.ready_every
    for m in members:
      ready_round = sum(1 for r in self.rows if r["member"] == m)  # 0 for the first
      self.rounds_pending.setdefault(ready_round, {})[m] = (float(self.fitness[m]),
                                                            len(self.rows))
      self.rows.append(new_rows[m])
    self._exploit()
    return [dict(scalars[m], member=m, copied_from=new_rows[m]["copied_from"])
            for m in members]

  def _exploit(self) -> None:
    """Synchronous ready rounds (case B20): members reach their k-th ready point at
    different vector steps (an episode's reset is no actor step), so the k-th round's
    exploit/explore waits until every member has been evaluated there, then ranks the
    population on those N returns (`truncation_selection`): each member of the bottom
    quantile copies one of the top, with the top member's parameters and values as they
    are at that moment, and explores. A member past its last steps is never replaced. The
    copy is written into the loser's row of that round (pbt.csv's copied_from)."""
    s = self.settings
    while self.rounds_pending and len(self.rounds_pending[min(self.rounds_pending)]) == self.n:
      evaluated = self.rounds_pending.pop(min(self.rounds_pending))
      if self.n < 2:  # (one member, as `benchmarks/pbt_cost.py` runs it: no one to copy)
        continue
      losers, winners = population_lib.truncation_selection(
          [evaluated[m][0] for m in range(self.n)], s.quantile, self.pbt_rng)
      for loser, winner in zip(losers, winners):
        if loser == winner or self.actor_steps[loser] >= s.steps:
          continue  # never after a member's last steps
        self.state = population_lib.copy_member(self.state, winner, loser)
        values = dict(self.values[winner])
        for name in s.mutate:
          values[name] = population_lib.explore(self.learner.HYPERPARAMETERS[name],
                                                values[name], self.pbt_rng,
                                                s.resample_probability)
        self.values[loser] = self._canonical(self.learner.constrain(values))
        self._apply_values(loser)
        self.rows[evaluated[loser][1]]["copied_from"] = int(winner)

  # -- checkpoints ------------------------------------------------------------------------
  def checkpoint(self) -> Dict[str, Any]:
    """Everything a resumed run continues from (numpy and plain Python): the members'
    learner states and values, replays, counters, rows and both generators. Not kept
    (as in `local.run`): the episodes in progress and the environments' state."""
    return {"settings": _settings_json(self.settings),
            "state": jax.device_get(self.state), "values": [dict(v) for v in self.values],
            "replay": [c.state() for c in self.clients],
            "items_written": [int(self.items_before[m] + self.adders[m].items_written)
                              for m in range(self.n)],
            "actor_steps": self.actor_steps.tolist(), "learner_steps": self.learner_steps.tolist(),
            "start_step": self.start_step.tolist(), "next_ready": self.next_ready.tolist(),
            "last_eval": self.last_eval.tolist(), "fitness": self.fitness.tolist(),
            "rows": [dict(r) for r in self.rows], "rounds": self.rounds,
            "rounds_pending": {k: dict(v) for k, v in self.rounds_pending.items()},
            "calibration": {int(m): np.asarray(o) for m, o in self.calibration.items()},
            "act_rng": self.act_rng.bit_generator.state,
            "pbt_rng": self.pbt_rng.bit_generator.state}

  def restore(self, saved: Dict[str, Any]) -> None:
    """Takes back a `checkpoint()` of a run with the same settings."""
    self.state = jax.device_put(type(self.state)(*saved["state"]))
    self.values = [dict(v) for v in saved["values"]]
    for m in range(self.n):
      self._apply_values(m)
      self.clients[m].restore(saved["replay"][m])
    self.items_before = np.asarray(saved["items_written"], np.int64)
    for name in ("actor_steps", "learner_steps", "start_step", "next_ready", "last_eval"):
      setattr(self, name, np.asarray(saved[name], np.int64))
    self.fitness = np.asarray(saved["fitness"], np.float64)
    self.rows = [dict(r) for r in saved["rows"]]
    self.rounds_pending = {int(k): {int(m): tuple(e) for m, e in v.items()}
                           for k, v in saved.get("rounds_pending", {}).items()}
    self.rounds = int(saved["rounds"])
    self.calibration = {int(m): np.asarray(o, np.float32)
                        for m, o in saved.get("calibration", {}).items()}
    self.act_rng.bit_generator.state = saved["act_rng"]
    self.pbt_rng.bit_generator.state = saved["pbt_rng"]

  # -- the loop ---------------------------------------------------------------------------
  def run(self, logger_fn=None, on_ready=None, should_stop=None) -> bool:
    """Steps until every member has `steps` actor steps; `on_ready()` after each round of
    evaluations; returns False when `should_stop()` ended it first (checked once per
    vector step, where the population's state is whole)."""
    s = self.settings
    # A resumed run's environments start anew with another seed (their state is not
    # checkpointed), as `local.run` does.
    env = vector_env.make_vector_environment(
        s.env_id, self.n * self.b,
        seed=experiment_lib.training_seed(s.seed, int(self.actor_steps.sum()), self.n * self.b),
        max_episode_steps=s.max_episode_steps)
    try:
      batch = self._env(env, "reset")
      rows = np.arange(self.n * self.b).reshape(self.n, self.b)
      for m in range(self.n):
        self.adders[m].add_first(np.arange(self.b), batch.observation[rows[m]])
      resetting = np.zeros(self.n * self.b, bool)
      while (self.actor_steps < s.steps).any() or (self.last_eval < s.steps).any():
        fault_points.point("acting")  # a test's signal lands between two vector steps
        if should_stop is not None and should_stop():
          return False
        if (self.actor_steps < s.steps).any():
          t0 = time.perf_counter()
          actions = self._act(batch.observation)
          t1 = time.perf_counter()
          self.timings["act"] += t1 - t0
          batch = self._env(env, "step", actions)
          last = batch.step_type == dm_env.StepType.LAST
          for m in range(self.n):
            local = np.flatnonzero(~resetting[rows[m]])
            local = local[:max(int(s.steps - self.actor_steps[m]), 0)]
            fresh = np.flatnonzero(resetting[rows[m]])
            if len(local):
              g = rows[m][local]
              self.adders[m].add(local, actions[g], batch.reward[g], batch.discount[g],
                                 batch.observation[g], last[g], [()] * len(local))
            self.adders[m].flush()
            if len(fresh):
              self.adders[m].add_first(fresh, batch.observation[rows[m][fresh]])
            self.actor_steps[m] += len(local)
            self.act_counted[m] += len(local)
          resetting = last
          t2 = time.perf_counter()
          self.timings["environment"] += t2 - t1
          self._learn()
          self.timings["learn"] += time.perf_counter() - t2
        ready = [m for m in range(self.n) if self.actor_steps[m] >= self.next_ready[m]
                 or (self.actor_steps[m] >= s.steps and self.last_eval[m] < s.steps)]
        if ready:
          t0 = time.perf_counter()
          scalars = self._ready(ready, self._evaluate(ready))
          self.timings["evaluate"] += time.perf_counter() - t0
          if logger_fn is not None:
            for row in scalars:
              logger_fn(f"pbt_member{row.pop('member')}").write(
                  {k: v for k, v in row.items() if k != "copied_from"})
          if on_ready is not None:
            on_ready()
    finally:
      env.close()
    return True


def _settings_json(settings: PBTSettings) -> Dict[str, Any]:
  """The settings as pbt.json holds them (the logdir is where the file is, not in it)."""
  out = dataclasses.asdict(settings)
  out.pop("logdir")
  out["mutate"] = list(out["mutate"])
  return json.loads(json.dumps(out))


def load_settings(logdir: str) -> PBTSettings:
  """The settings of the population run in `logdir` (its pbt.json), for `--resume`.

  Raises:
    core.UsageError: no readable pbt.json there (naming the path).
  """
  path = os.path.join(logdir, PBT_JSON)
  if run_dir.kind_of(logdir) is run_dir.TRAIN:
    raise core.UsageError(f"--resume {logdir} is a run of 'actorq train', not a population "
                          f"run; continue it with 'actorq train --resume {logdir}'")
  try:
    with open(path, encoding="utf-8") as f:
      info = json.load(f)
    info["mutate"] = tuple(info["mutate"])
    return PBTSettings(logdir=logdir, **info)
  except (OSError, ValueError, TypeError, KeyError) as e:
    raise core.UsageError(f"--resume {logdir}: not a population run of 'actorq pbt' (cannot "
                          f"read {path}: {e})") from None


def plot_lineage(rows: Sequence[Dict[str, Any]], path: str) -> None:
  """The lineage plot of a population run: each member's evaluation return against its
  actor steps (one line per member), every copy marked: a dotted arrow from the copied
  member's point at that time to the copying member's, and the copying member's point
  drawn as a cross. Written as a PNG to `path` (matplotlib, Agg).

  Args:
    rows: pbt.csv's rows (member, actor_steps, episode_return, copied_from).
  """
  import matplotlib  # pylint: disable=import-outside-toplevel (only when plotting)
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel
  fig, ax = plt.subplots(figsize=(8, 4.5))
  members = sorted({int(r["member"]) for r in rows})
  colors = {m: plt.cm.tab10(i % 10) for i, m in enumerate(members)}
  latest: Dict[int, Tuple[int, float]] = {}
  for m in members:
    mine = [r for r in rows if int(r["member"]) == m]
    ax.plot([r["actor_steps"] for r in mine], [r["episode_return"] for r in mine],
            "-o", ms=3, color=colors[m], label=f"member {m}")
  for r in rows:  # in the order they were written: a copy reads its source's latest point
    m = int(r["member"])
    latest[m] = (r["actor_steps"], r["episode_return"])
    if r["copied_from"] != "":
      src = int(r["copied_from"])
      if src in latest:
        ax.annotate("", xy=latest[m], xytext=latest[src],
                    arrowprops={"arrowstyle": "->", "linestyle": ":", "color": colors[src]})
      ax.plot(*latest[m], "x", ms=9, color=colors[m])
  ax.set_xlabel("actor steps of the member")
  ax.set_ylabel("evaluation return")
  ax.set_title("PBT lineage (x: the member copied the arrow's source, then explored)")
  ax.legend(fontsize=8)
  fig.tight_layout()
  fig.savefig(path, dpi=100)
  plt.close(fig)


def _save_best(run: _Run, member: int, best_dir: str) -> None:
  """`best_dir` as a train run's directory of `member` (see the module docstring)."""
  s = run.settings
  config = run.learner.member_config(run.values[member])
  spec_lib.RunSpec(agent=s.agent, env=s.env_id, seed=s.seed,
                   config=config_io.to_dict(config), steps=s.steps, eval_every=s.ready_every,
                   eval_episodes=s.eval_episodes).save(best_dir)
  state = jax.device_get(population_lib.member(run.state, member))
  checkpointing.save(os.path.join(best_dir, run_dir.CHECKPOINTS), {
      "policy_params": run.learner.policy_params(state), "population_member_state": tuple(state),
      "learner_steps": int(state.steps), "actor_steps": int(run.actor_steps[member]),
      "env_id": s.env_id, "seed": s.seed, "num_steps": s.steps,
      "population_member": member}, step=int(run.actor_steps[member]), keep=1)


def run(settings: PBTSettings, resume: bool = False,
        checkpoint_every: Optional[float] = DEFAULT_CHECKPOINT_EVERY,
        on_start: Optional[Callable[[PBTSettings, bool], None]] = None,
        overwrite: bool = False) -> PBTResult:
  """Trains the population (see the module docstring).

  Args:
    settings: the run (a resumed one: `load_settings(logdir)`).
    resume: continue from the newest readable checkpoint in `<logdir>/population`.
    checkpoint_every: minutes between population checkpoints (None/0: only at the end and
      at a stop); needs a logdir.
    on_start: called with (settings, resume) once the settings, the logdir and the
      checkpoint passed their checks, before any member acts (the CLI's start line).
    overwrite: the logdir may hold an earlier population run; its files
      (`run_dir.POPULATION_ENTRIES`, `*.csv`) are removed first (`run_dir.claim_logdir`).

  Raises:
    core.UsageError: `check` refuses the settings, the logdir holds a run (of `actorq
      train`, or a population run without `overwrite`), or `resume` and no checkpoint
      (nothing written).
    core.EnvironmentFailure: an environment raised; core.NonFiniteLossError: a member's
      loss was not finite. Both after a checkpoint of the population's last whole state
      (with a logdir; `checkpoint_path` on the exception, else None).
    KeyboardInterrupt / experiment.Preempted: Ctrl-C / SIGTERM, after a checkpoint (with
      a logdir) at the vector step where the signal arrived (`checkpoint_path` on the
      exception; None when it came before the loop).
  """
  start = time.time()
  builder = check(settings)
  s = settings
  ckpt_dir = os.path.join(s.logdir, POPULATION_DIR) if s.logdir is not None else None
  saved = None
  if resume:
    if ckpt_dir is None:
      raise core.UsageError("--resume needs the run's directory")
    _, saved = checkpointing.restore_latest(ckpt_dir)
    if saved is None:
      raise core.UsageError(f"--resume {s.logdir}: no readable population checkpoint in "
                            f"{ckpt_dir}, nothing to resume; start it again with its flags "
                            f"and --overwrite (--logdir {s.logdir})")
  elif s.logdir is not None:
    run_dir.claim_logdir(s.logdir, overwrite=overwrite, kind=run_dir.POPULATION)
    atomic.ensure_writable_dir(s.logdir, "--logdir")
    try:
      with atomic.atomic_write(os.path.join(s.logdir, PBT_JSON)) as f:
        json.dump(_settings_json(s), f, indent=1)
    except OSError as e:
      raise core.RunDirectoryError.writing(os.path.join(s.logdir, PBT_JSON), e) from e
  if on_start is not None:
    on_start(s, resume)
  fault_points.point("startup")  # a test's signal lands after the first write (case B18)
  pbt_run = _Run(s, builder)
  if saved is not None:
    pbt_run.restore(saved)
  loggers: Dict[str, Any] = {}
  logger_fn = None
  last_checkpoint = [time.time()]

  def save_checkpoint() -> str:
    path = checkpointing.save(ckpt_dir, pbt_run.checkpoint(),
                              step=int(pbt_run.actor_steps.sum()), keep=2)
    last_checkpoint[0] = time.time()
    return path

  def on_ready():
    if s.logdir is None:
      return
    _write_csv(os.path.join(s.logdir, PBT_CSV), pbt_run.rows)
    if checkpoint_every and time.time() - last_checkpoint[0] >= 60.0 * checkpoint_every:
      save_checkpoint()

  if s.logdir is not None:
    factory = logging_lib.make_logger_factory(s.logdir)

    def logger_fn(label):
      if label not in loggers:
        loggers[label] = factory(label)
      return loggers[label]
  try:
    with processes.Signals() as stop:
      try:
        finished = pbt_run.run(logger_fn, on_ready, lambda: stop.received is not None)
      except core.RunFailure as e:  # the population's state is whole: keep it (as train)
        e.checkpoint_path = save_checkpoint() if ckpt_dir is not None else None
        raise
      if not finished:
        saved_path = save_checkpoint() if ckpt_dir is not None else None
        stopped = (KeyboardInterrupt() if stop.received == signal.SIGINT else
                   experiment_lib.Preempted(stop.received))
        stopped.checkpoint_path = saved_path
        raise stopped
  finally:
    for logger in loggers.values():
      logger.close()
  final = [float("nan")] * s.population
  for row in pbt_run.rows:
    final[row["member"]] = row["episode_return"]
  best = population_lib.ranking(final)[0]
  best_dir = None
  if s.logdir is not None:
    save_checkpoint()
    _write_csv(os.path.join(s.logdir, PBT_CSV), pbt_run.rows)
    plot_lineage(pbt_run.rows, os.path.join(s.logdir, LINEAGE_PNG))
    best_dir = os.path.join(s.logdir, BEST_DIR)
    _save_best(pbt_run, best, best_dir)
  return PBTResult(rows=pbt_run.rows, final_returns=final, best_member=best,
                   best_dir=best_dir, wall_seconds=time.time() - start,
                   learner_rounds=pbt_run.rounds, timings=dict(pbt_run.timings))
