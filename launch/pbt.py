"""Population-based training on one machine, in one process (issue 43).

N members of one agent learn side by side: their learner states sit on a leading member
axis and take ONE jitted, vmapped update per round (the agent's population learner,
`POPULATION_LEARNERS`; Flajolet et al. 2022), their actors step N x B environments of one
vector environment with ONE batched inference per step, and each member keeps its own
seeded in-process replay (`LocalReplayClient` of the builder's tables), adder and
samples-per-insert schedule, exactly as `local.run` keeps one run's.

Every `ready_every` actor steps of a member (its own transitions), the member is
evaluated (greedy, `eval_episodes` episodes, the same start states for every member and
every evaluation) and then PBT's exploit/explore runs (Jaderberg et al. 2017, appendix
A.1, truncation selection): if its latest return ranks it in the bottom `quantile` of the
population's latest returns, it copies a member drawn from the top `quantile` (online and
target parameters, optimizer state, learner step count and hyperparameters, exactly),
then each `mutate` field is resampled from its range with probability
`resample_probability`, else multiplied by 0.8 or 1.2 (clipped to its range).

    result = pbt.run(pbt.PBTSettings("dqn", "gym:CartPole-v1", population=4, steps=5000,
                                     ready_every=1000, mutate=("learning_rate",),
                                     logdir="runs/pbt"))

Files in `logdir` (nothing is written before the settings are checked):
    pbt.csv          one row per member per ready interval: member, actor_steps,
                     learner_steps, episode_return (the evaluation's mean), the member's
                     hyperparameters during that interval, precision, copied_from (the
                     member it copied right after this evaluation, or empty)
    pbt_member<m>.csv and tensorboard/pbt_member<m>/   the same scalars per member
    best/            a run directory of the member with the best final evaluation:
                     run.json (its config) and checkpoints/ckpt-<steps>.pkl (its policy
                     parameters and learner state), which `actorq eval`, `export` and
                     `quantize` read as a train run's

A run is a function of its settings (seed included) on one machine.
"""
from __future__ import annotations

import csv
import dataclasses
import math
import os
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

import dm_env
import jax
import numpy as np

from actorq import core
from actorq.agents.dqn import builder as dqn_builder
from actorq.agents.dqn import population as dqn_population
from actorq.components import atomic, config_io
from actorq.components import population as population_lib
from actorq.components.acting import loop as loop_lib
from actorq.components.envs import environments, vector_env
from actorq.components.replay import local_replay
from actorq.components.replay import priorities as priorities_lib
from actorq.launch import checkpointing
from actorq.launch import experiment as experiment_lib
from actorq.launch import logging as logging_lib
from actorq.launch import registry
from actorq.launch import run_dir
from actorq.launch import spec as spec_lib

# Builder class -> its population learner (a class taking (config, networks,
# environment_spec), with HYPERPARAMETERS, hyperparameters(n), init(keys), step(...),
# q_values(params, obs), member_config(values), as_dicts, with_member). A new agent with
# population support is one class plus one entry here.
POPULATION_LEARNERS = {dqn_builder.DQNBuilder: dqn_population.DQNPopulation}
PBT_CSV = "pbt.csv"
BEST_DIR = "best"
DEFAULT_QUANTILE = 0.25
DEFAULT_RESAMPLE_PROBABILITY = 0.25


def supported_agents() -> List[str]:
  """Registered agent names whose builder has a population learner."""
  return [n for n in registry.names() if registry.get(n)[1] in POPULATION_LEARNERS]


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
  env = environments.make_environment(s.env_id, seed=s.seed)
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
  directory (None without a logdir); wall_seconds; learner_rounds: vmapped updates taken.
  """
  rows: List[Dict[str, Any]]
  final_returns: List[float]
  best_member: int
  best_dir: Optional[str]
  wall_seconds: float
  learner_rounds: int


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
    self.env = vector_env.make_vector_environment(
        s.env_id, self.n * self.b, seed=s.seed, max_episode_steps=s.max_episode_steps)
    self.spec = self.env.environment_spec()
    networks = builder.make_networks(self.spec)
    self.learner = POPULATION_LEARNERS[type(builder)](builder.config, networks, self.spec)
    key_init, key_replay = jax.random.split(jax.random.PRNGKey(s.seed))
    self.state = self.learner.init(jax.random.split(key_init, self.n))
    self.hyper = self.learner.hyperparameters(self.n)
    replay_seeds = np.asarray(jax.random.randint(key_replay, (self.n,), 0, 2**31 - 1))
    self.clients = [local_replay.LocalReplayClient(builder.make_replay_tables(self.spec),
                                                   seed=int(seed)) for seed in replay_seeds]
    self.adders = [builder.make_batched_adder(c, self.spec, num_envs=self.b)
                   for c in self.clients]
    self.act_rng = np.random.default_rng([s.seed, 1])
    self.pbt_rng = np.random.default_rng([s.seed, 2])
    self.actor_steps = np.zeros(self.n, np.int64)
    self.learner_steps = np.zeros(self.n, np.int64)  # vmapped rounds each member took part in
    self.start_step = np.full(self.n, -1, np.int64)  # actor steps when learning started
    self.next_ready = np.full(self.n, s.ready_every, np.int64)
    self.last_eval = np.full(self.n, -1, np.int64)  # actor steps at the latest evaluation
    self.fitness = np.full(self.n, np.nan)
    self.rows: List[Dict[str, Any]] = []
    self.rounds = 0
    self.table = builder.replay_table_name()
    self.num_actions = int(self.spec.actions.num_values)

  # -- acting -----------------------------------------------------------------------------
  def _epsilon(self) -> np.ndarray:
    """float [N]: each member's epsilon at its actor step (linear from epsilon_start to
    epsilon_end over the config's epsilon_decay_steps, as `actors.linear_schedule`)."""
    c = self.builder.config
    start = np.asarray(self.hyper.epsilon_start, np.float64)
    end = np.asarray(self.hyper.epsilon_end, np.float64)
    frac = (np.minimum(self.actor_steps / c.epsilon_decay_steps, 1.0)
            if c.epsilon_decay_steps > 0 else np.ones(self.n))
    return start + frac * (end - start)

  def _act(self, observations: np.ndarray, explore: bool, rng) -> np.ndarray:
    """int [N * B] epsilon-greedy actions from ONE batched inference of every member."""
    obs = observations.reshape((self.n, -1) + observations.shape[1:])
    q = self.learner.q_values(self.state.params, obs)  # [N, B, A]
    actions = q.argmax(-1)
    if explore:
      eps = self._epsilon()[:, None]
      draws = rng.random(actions.shape)
      random_actions = rng.integers(self.num_actions, size=actions.shape)
      actions = np.where(draws < eps, random_actions, actions)
    return actions.reshape(-1).astype(self.spec.actions.dtype)

  # -- evaluation -------------------------------------------------------------------------
  def _evaluate(self, members: Sequence[int]) -> np.ndarray:
    """float [len(members)]: mean greedy return over `eval_episodes` episodes, every
    member on the same start states (rows seeded seed + EVAL_SEED_OFFSET + i), all in one
    vector environment with one batched inference per step."""
    s, e = self.settings, self.settings.eval_episodes
    members = list(members)
    env = vector_env.make_vector_environment(
        s.env_id, len(members) * e, seed=s.seed + experiment_lib.EVAL_SEED_OFFSET,
        max_episode_steps=s.max_episode_steps)
    params = jax.tree_util.tree_map(lambda x: x[np.asarray(members)], self.state.params)
    try:
      batch = env.reset()
      returns = np.zeros(len(members) * e)
      done = np.zeros(len(members) * e, bool)
      while not done.all():
        obs = batch.observation.reshape((len(members), e) + batch.observation.shape[1:])
        actions = self.learner.q_values(params, obs).argmax(-1).reshape(-1)
        batch = env.step(actions.astype(self.spec.actions.dtype))
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
          int(self.adders[m].items_written))) - self.learner_steps[m]
    return owed

  def _learn(self) -> None:
    """Vmapped rounds until no member owes a step; members not owing sit out (masked)."""
    owed = self._owed()
    batch_size = self.builder.config.batch_size
    while (owed > 0).any():
      active = owed > 0
      samples = {m: self.clients[m].sample_batch(self.table, batch_size)
                 for m in np.flatnonzero(active).tolist()}
      # Each member's table decodes its signature into its own namedtuple classes: stack
      # the leaves and rebuild the first sample's structure.
      leaves, treedef = jax.tree_util.tree_flatten(next(iter(samples.values())).data)
      data = [jax.tree_util.tree_leaves(samples[m].data) if m in samples else
              [np.zeros_like(x) for x in leaves] for m in range(self.n)]
      probabilities = np.stack([
          np.asarray(samples[m].info.probability, np.float32) if m in samples
          else np.ones(batch_size, np.float32) for m in range(self.n)])
      sizes = np.stack([
          np.asarray(samples[m].info.table_size, np.float32) if m in samples
          else np.ones(batch_size, np.float32) for m in range(self.n)])
      stacked = jax.tree_util.tree_unflatten(treedef, [np.stack(x) for x in zip(*data)])
      state, td, metrics = self.learner.step(self.state, stacked, probabilities, sizes,
                                             self.hyper, active)
      loss = np.asarray(metrics["loss"])
      bad = [m for m in samples if not math.isfinite(float(loss[m]))]
      if bad:
        raise core.NonFiniteLossError(
            f"learner round {self.rounds + 1}: member {bad[0]}'s loss is {loss[bad[0]]}; the "
            "population keeps its state from before that round")
      if self.builder.config.prioritized_replay:
        td = np.asarray(td, np.float64)
        for m, sample in samples.items():
          priorities_lib.update_priorities(
              self.clients[m], self.table, sample.info.key,
              np.abs(td[m]) + self.builder.config.priority_epsilon)
      self.state = state
      self.rounds += 1
      self.learner_steps += active
      owed -= active

  # -- exploit / explore --------------------------------------------------------------
  def _ready(self, members: List[int], returns: np.ndarray) -> None:
    """Records the members' evaluations (pbt.csv rows: the hyperparameters they had during
    the interval), then runs exploit/explore for those of them in the bottom quantile."""
    s = self.settings
    before = self.learner.as_dicts(self.hyper)
    new_rows = {}
    for m, value in zip(members, returns):
      self.fitness[m] = float(value)
      row = {"member": m, "actor_steps": int(self.actor_steps[m]),
             "learner_steps": int(np.asarray(self.state.steps)[m]),
             "episode_return": float(value)}
      row.update(before[m])
      row.update(precision="fp32", copied_from="")
      new_rows[m] = row
      self.last_eval[m] = self.actor_steps[m]
      self.next_ready[m] = (self.actor_steps[m] // s.ready_every + 1) * s.ready_every
    losers, winners = population_lib.truncation_selection(self.fitness, s.quantile,
                                                           self.pbt_rng)
    for loser, winner in zip(losers, winners):
      if loser not in new_rows or loser == winner:
        continue  # only a member at its ready point is replaced
      self.state = population_lib.copy_member(self.state, winner, loser)
      values = dict(before[winner])
      for name in s.mutate:
        values[name] = population_lib.explore(self.learner.HYPERPARAMETERS[name],
                                              values[name], self.pbt_rng,
                                              s.resample_probability)
      self.hyper = self.learner.with_member(self.hyper, loser, values)
      self.adders[loser].discount = values["discount"]
      new_rows[loser]["copied_from"] = int(winner)
    self.rows.extend(new_rows[m] for m in members)

  # -- the loop ---------------------------------------------------------------------------
  def run(self, logger_fn=None) -> None:
    s = self.settings
    batch = self.env.reset()
    rows = np.arange(self.n * self.b).reshape(self.n, self.b)
    for m in range(self.n):
      self.adders[m].add_first(np.arange(self.b), batch.observation[rows[m]])
    resetting = np.zeros(self.n * self.b, bool)
    while (self.actor_steps < s.steps).any():
      actions = self._act(batch.observation, True, self.act_rng)
      batch = self.env.step(actions)
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
      resetting = last
      self._learn()
      ready = [m for m in range(self.n) if self.actor_steps[m] >= self.next_ready[m]
               or (self.actor_steps[m] >= s.steps and self.last_eval[m] < s.steps)]
      if ready:
        returns = self._evaluate(ready)
        self._ready(ready, returns)
        if logger_fn is not None:
          for row in self.rows[-len(ready):]:
            logger_fn(f"pbt_member{row['member']}").write(
                {k: v for k, v in row.items() if k not in ("member", "precision", "copied_from")})


def _save_best(run: _Run, member: int, best_dir: str) -> None:
  """`best_dir` as a train run's directory of `member` (see the module docstring)."""
  s = run.settings
  values = run.learner.as_dicts(run.hyper)[member]
  config = run.learner.member_config(values)
  spec_lib.RunSpec(agent=s.agent, env=s.env_id, seed=s.seed,
                   config=config_io.to_dict(config), steps=s.steps, eval_every=s.ready_every,
                   eval_episodes=s.eval_episodes).save(best_dir)
  state = jax.device_get(population_lib.member(run.state, member))
  checkpointing.save(os.path.join(best_dir, run_dir.CHECKPOINTS), {
      "policy_params": state.params, "population_member_state": tuple(state),
      "learner_steps": int(state.steps), "actor_steps": int(run.actor_steps[member]),
      "env_id": s.env_id, "seed": s.seed, "num_steps": s.steps,
      "population_member": member}, step=int(run.actor_steps[member]), keep=1)


def run(settings: PBTSettings) -> PBTResult:
  """Trains the population (see the module docstring).

  Raises:
    core.UsageError: `check` refuses the settings (nothing written).
    core.NonFiniteLossError: a member's loss was not finite.
  """
  start = time.time()
  builder = check(settings)
  s = settings
  if s.logdir is not None:
    run_dir.claim_logdir(s.logdir)
    atomic.ensure_writable_dir(s.logdir, "--logdir")
  pbt_run = _Run(s, builder)
  loggers: Dict[str, Any] = {}
  logger_fn = None
  if s.logdir is not None:
    factory = logging_lib.make_logger_factory(s.logdir)

    def logger_fn(label):
      if label not in loggers:
        loggers[label] = factory(label)
      return loggers[label]
  try:
    pbt_run.run(logger_fn)
  finally:
    for logger in loggers.values():
      logger.close()
    pbt_run.env.close()
  final = [float("nan")] * s.population
  for row in pbt_run.rows:
    final[row["member"]] = row["episode_return"]
  best = population_lib.ranking(final)[0]
  best_dir = None
  if s.logdir is not None:
    _write_csv(os.path.join(s.logdir, PBT_CSV), pbt_run.rows)
    best_dir = os.path.join(s.logdir, BEST_DIR)
    _save_best(pbt_run, best, best_dir)
  return PBTResult(rows=pbt_run.rows, final_returns=final, best_member=best,
                   best_dir=best_dir, wall_seconds=time.time() - start,
                   learner_rounds=pbt_run.rounds)
