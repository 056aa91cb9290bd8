"""A lifetime policy library over a sequence of task variants (issue 55, item 3), compiled.

Lifetime Policy Reuse (Bossens and Sobey 2023, "Lifetime policy reuse and the importance
of task capacity", AI Communications; arXiv 2106.01741): a library of at most K policies
for a lifetime of tasks, each new task handled by one policy of the library, which is
chosen by an adaptive selection on the returns observed and then optimised on the task.
Three methods see the same sequence of tasks with the same training budget per task:

  * ``library``: K policies; for task t every policy is first *observed* on t (its mean
    greedy return over `probe_episodes` episodes, normalised by the task's maximum return,
    ``r_i`` in [0, 1]); the selection is UCB1 (Auer et al. 2002, the bandit rule the paper
    uses for its adaptive selection) over the library's policies as arms:
    ``score_i = r_i + c * sqrt(2 ln(t + 1) / n_i)``, n_i the tasks policy i was trained on
    so far (an untrained policy scores +inf, so each policy is tried once first, as UCB1
    starts), c = `exploration`; the policy with the highest score (the lowest index on a
    tie) is trained on t. Adaptation made here: the paper's lifetime revisits tasks and
    scores a policy by its returns on the task over the lifetime; a sequence shows each task
    once, so the observed return is a probe before training (`select`).
  * ``single``: one policy trained through the whole sequence (K = 1, no selection).
  * ``scratch``: a fresh policy per task.

Per task and method: the greedy return at the end of the task's budget, and the steps to
the target return (the first evaluation, every `eval_every` actor steps from step 0, whose
mean greedy return reaches `target`; step 0 counts: a policy that already solves the
task needs no steps). After the sequence, each method's kept policies are evaluated on
every task again (``retained``: the library with its best-observed policy per task, the
single policy as it ends, each scratch policy on its own task).

The agent runs as `--launch anakin` does (`agents.anakin_common.systems`: acting and
learning in one jitted program, the seeds vmapped): one task's budget for all seeds of a
method is one compiled call, the learner state (parameters and optimizer state) carried
from task to task. A task variant is an environment id with arguments
(``gymnax:CartPole-v1?length=1.0``, `components.envs.arguments`); its physics enter the
program as traced values (`gymnax_env.bind`), so one compilation serves every task.
A task's program state is a fresh `system.init` with the carried learner put in: its
environments start new episodes, and (PPO) the one step per environment that `init` acts
was acted by init's own fresh parameters, so the first update of a task sees those few
steps (4 of its 512 transitions) as off-policy, bounded by PPO's clipped ratio.

    python -m actorq.studies.lifetime_library --out DIR [--steps-per-task 50000] ...

writes DIR/results.json (settings, per-seed and aggregated figures), DIR/table.md and
DIR/returns.png.
"""
from __future__ import annotations

import dataclasses
import math
import sys
import time
from typing import Any, Callable, Dict, Optional, Sequence, Tuple

import jax
import jax.numpy as jnp
import numpy as np

from actorq import core
from actorq.agents.anakin_common import systems
from actorq.components.envs import environments
from actorq.components.envs import gymnax_env
from actorq.launch import spec as spec_lib
from actorq.components import aggregate

METHODS = ("library", "single", "scratch")

# Nine CartPole variants: pole length (half-length, default 0.5), pole and cart masses
# (0.1, 1.0) and gravity (9.8) varied one or two at a time.
DEFAULT_TASKS = (
    "gymnax:CartPole-v1",
    "gymnax:CartPole-v1?length=1.0",
    "gymnax:CartPole-v1?gravity=15.0",
    "gymnax:CartPole-v1?length=0.25",
    "gymnax:CartPole-v1?masspole=0.5",
    "gymnax:CartPole-v1?gravity=4.0",
    "gymnax:CartPole-v1?masscart=3.0",
    "gymnax:CartPole-v1?length=1.0&masspole=0.5",
    "gymnax:CartPole-v1?length=0.25&gravity=15.0",
)


@dataclasses.dataclass(frozen=True)
class LibrarySettings:
  """The study's settings.

  Attributes:
    tasks: the sequence, environment ids of one gymnax task with arguments (>= 2).
    seeds: the seeds (vmapped in one program per method).
    steps_per_task: the training budget of each task, actor steps (every method).
    eval_every: actor steps between greedy evaluations within a task.
    eval_episodes: greedy episodes per evaluation.
    capacity: K, the library's policies (>= 1).
    exploration: c of the UCB1 selection (`select`), >= 0.
    probe_episodes: greedy episodes of each library policy on a new task before selection.
    target: the return whose first reach is "steps to target".
    agent: the agent (one with a compiled system: ppo, dqn).
    assignments: the agent's config overrides, ``KEY=VALUE`` as ``--set`` takes them.
  """
  tasks: Tuple[str, ...] = DEFAULT_TASKS
  seeds: Tuple[int, ...] = (0, 1, 2, 3, 4)
  steps_per_task: int = 50_000
  eval_every: int = 5_000
  eval_episodes: int = 8
  capacity: int = 3
  exploration: float = 0.1
  probe_episodes: int = 8
  target: float = 475.0
  agent: str = "ppo"
  assignments: Tuple[str, ...] = ()

  def check(self) -> None:
    """Raises core.UsageError naming a bad setting and what is allowed."""
    if len(self.tasks) < 2:
      raise core.UsageError("--tasks: a sequence needs at least 2 tasks")
    if not self.seeds:
      raise core.UsageError("--seeds: at least one seed")
    for name, value, low in (("steps_per_task", self.steps_per_task, 1),
                             ("eval_every", self.eval_every, 1),
                             ("eval_episodes", self.eval_episodes, 1),
                             ("capacity", self.capacity, 1),
                             ("probe_episodes", self.probe_episodes, 1)):
      if value < low:
        raise core.UsageError(f"--{name.replace('_', '-')} must be >= {low}, got {value}")
    if self.steps_per_task % self.eval_every:
      raise core.UsageError(f"--steps-per-task ({self.steps_per_task}) must be a multiple "
                            f"of --eval-every ({self.eval_every})")
    if self.exploration < 0:
      raise core.UsageError(f"--exploration must be >= 0, got {self.exploration}")
    base = {task_base(t) for t in self.tasks}
    if len(base) != 1:
      raise core.UsageError(f"--tasks must be variants of one gymnax task, got {sorted(base)}")


def task_base(env_id: str) -> str:
  """The gymnax task of a variant id: ``gymnax:CartPole-v1?length=1.0`` -> ``CartPole-v1``.

  Raises:
    core.UsageError: an id of another prefix, or with action repeat.
  """
  parsed = environments.parse_id(env_id)
  if parsed.prefix != "gymnax" or parsed.repeat > 1:
    raise core.UsageError(f"--tasks: {env_id}: the library study compiles gymnax tasks "
                          "without action repeat (e.g. gymnax:CartPole-v1?length=1.0)")
  return parsed.name


def task_physics(env_id: str) -> Dict[str, float]:
  """A variant's full parameter values (the task's defaults <- the id's arguments), the
  numbers every variant of the sequence gives the compiled program.

  Raises:
    core.UnknownEnvironmentError: an argument the task does not take (naming the allowed).
  """
  parsed = environments.parse_id(env_id)
  gymnax_env.functional(parsed.name, parsed.arguments)  # checks the arguments
  defaults = gymnax_env.parameters(parsed.name)
  defaults.pop("max_steps_in_episode", None)  # sizes the program: not a task input
  given = dict(parsed.arguments)
  if "max_steps_in_episode" in given:
    raise core.UsageError(f"--tasks: {env_id}: max_steps_in_episode must be the same for "
                          "every task of the sequence (leave it out)")
  return {k: float(given.get(k, v)) for k, v in defaults.items()}


# ---------------------------------------------------------------------------------------
# The selection rule (pure, tested on its own).


def ucb_scores(observed: np.ndarray, trained: np.ndarray, task_index: int,
               exploration: float) -> np.ndarray:
  """UCB1 scores of the library's policies on task number `task_index` (0-based):
  ``observed + exploration * sqrt(2 ln(task_index + 1) / trained)``, +inf where a policy
  was never trained (Auer et al. 2002, UCB1; the arms are the library's policies, as in
  Bossens and Sobey 2023's adaptive policy selection).

  Args:
    observed: float [K], each policy's normalised observed return on the task, in [0, 1].
    trained: int [K], the tasks each policy was trained on so far.
  Returns:
    float64 [K].
  """
  observed = np.asarray(observed, np.float64)
  trained = np.asarray(trained, np.float64)
  with np.errstate(divide="ignore", invalid="ignore"):
    bonus = exploration * np.sqrt(2.0 * math.log(task_index + 1) / trained)
  return np.where(trained > 0, observed + bonus, np.inf)


def select(observed: np.ndarray, trained: np.ndarray, task_index: int,
           exploration: float) -> int:
  """The policy the library trains on the task: the highest `ucb_scores` (lowest index on
  a tie)."""
  return int(np.argmax(ucb_scores(observed, trained, task_index, exploration)))


# ---------------------------------------------------------------------------------------
# The compiled pieces.


class _Programs:
  """The jitted functions of the study, vmapped over seeds (and policies): one
  compilation each serves every task (the task's physics are an input)."""

  def __init__(self, settings: LibrarySettings):
    spec = spec_lib.RunSpec.resolve(agent=settings.agent, env=settings.tasks[0], seed=0,
                                    set=list(settings.assignments), launch="anakin")
    self.builder = spec.make_builder()
    self.base = task_base(settings.tasks[0])
    self.settings = settings
    self.max_return = float(gymnax_env.functional(self.base).max_episode_steps)
    systems.make_system(self.builder, gymnax_env.functional(self.base))  # refuses early
    chunks = settings.steps_per_task // settings.eval_every

    def system_of(physics):
      return systems.make_system(self.builder, gymnax_env.bind(self.base, physics))

    def fresh(key):
      return system_of({}).init(key).learner

    def evaluate(learner, key, physics, episodes):
      system = system_of(physics)
      k_init, k_eval = jax.random.split(key)
      carry = system.init(k_init)._replace(learner=learner)
      returns, _ = system.evaluate(carry, k_eval, episodes)
      return jnp.mean(returns)

    def segment(learner, key, physics):
      """One task's budget: evaluations at 0, eval_every, ... and the trained learner."""
      system = system_of(physics)
      k_init, k_eval = jax.random.split(key)
      carry = system.init(k_init)._replace(learner=learner)

      def score(c, i):
        returns, _ = system.evaluate(c, jax.random.fold_in(k_eval, i),
                                     settings.eval_episodes)
        return jnp.mean(returns)

      def chunk(c, i):
        c = system.train(c, (i + 1) * settings.eval_every)
        return c, score(c, i + 1)

      first = score(carry, 0)
      carry, later = jax.lax.scan(chunk, carry, jnp.arange(chunks))
      return carry.learner, jnp.concatenate([first[None], later])

    self.fresh = jax.jit(jax.vmap(fresh))
    self.segment = jax.jit(jax.vmap(segment, in_axes=(0, 0, None)))
    # [S, K] policies of S seeds on one task; K may differ from call to call.
    self.probe = jax.jit(jax.vmap(jax.vmap(
        lambda l, k, p: evaluate(l, k, p, settings.probe_episodes), in_axes=(0, 0, None)),
        in_axes=(0, 0, None)))
    self.final = jax.jit(jax.vmap(jax.vmap(
        lambda l, k, p: evaluate(l, k, p, settings.eval_episodes), in_axes=(0, 0, None)),
        in_axes=(0, 0, None)))


def _take(tree, index):
  """[S, K, ...] -> [S, ...]: policy index[s] of seed s."""
  rows = jnp.arange(len(index))
  return jax.tree_util.tree_map(lambda x: x[rows, jnp.asarray(index)], tree)


def _put(tree, index, value):
  rows = jnp.arange(len(index))
  return jax.tree_util.tree_map(lambda x, v: x.at[rows, jnp.asarray(index)].set(v), tree,
                                value)


def _stack(trees):
  return jax.tree_util.tree_map(lambda *xs: jnp.stack(xs, axis=1), *trees)


def _keys(seeds: Sequence[int], *path: int) -> jnp.ndarray:
  """One key per seed for (`path`: purpose, task, policy...): the same stream for every
  method, so the methods differ by what they carry, not by their randomness (the first
  task starts from the same initial policy in all three: library policy 0, the single
  policy and scratch's first are one initialisation, and UCB1 picks policy 0 first)."""
  keys = []
  for s in seeds:
    k = jax.random.PRNGKey(s)
    for p in path:
      k = jax.random.fold_in(k, p)
    keys.append(k)
  return jnp.stack(keys)


# Key purposes.
_INIT, _TRAIN, _PROBE, _FINAL = 0, 1, 2, 3


def run_method(method: str, settings: LibrarySettings, programs: _Programs,
               physics: Sequence[Dict[str, jnp.ndarray]],
               log: Callable[[str], None] = lambda m: None) -> Dict[str, Any]:
  """Trains `method` ("library", "single" or "scratch") through the sequence, every seed at
  once. Returns per-seed arrays: ``curves`` [S, T, E + 1] (greedy returns at 0,
  eval_every, ... of each task), ``selected`` [S, T] (the policy trained on each task),
  ``observed`` [S, T, K] (the library's probes; NaN otherwise), ``retained`` [S, T].
  """
  s = settings
  seeds, n = list(s.seeds), len(s.seeds)
  k = s.capacity if method == "library" else 1
  library = _stack([programs.fresh(_keys(seeds, _INIT, i)) for i in range(k)])
  trained = np.zeros((n, k), np.int64)
  curves, selected, observed, kept = [], [], [], []
  for t, phys in enumerate(physics):
    start = time.time()
    probe = np.full((n, s.capacity), np.nan)
    if method == "library":
      keys = jnp.stack([_keys(seeds, _PROBE, t, i) for i in range(k)], axis=1)
      probe = np.asarray(programs.probe(library, keys, phys)) / programs.max_return
      choice = np.array([select(probe[j], trained[j], t, s.exploration) for j in range(n)])
    else:
      choice = np.zeros(n, np.int64)
    if method == "scratch":
      learner = programs.fresh(_keys(seeds, _INIT, t))
    else:
      learner = _take(library, choice)
    learner, curve = programs.segment(learner, _keys(seeds, _TRAIN, t), phys)
    curve = np.asarray(jax.device_get(curve))
    if method == "scratch":
      kept.append(learner)
    else:
      library = _put(library, choice, learner)
      trained[np.arange(n), choice] += 1
    curves.append(curve)
    selected.append(choice)
    observed.append(probe)
    log(f"lifetime_library: {method} task {t + 1}/{len(physics)} ({s.tasks[t]}): greedy "
        f"return {curve[:, -1].mean():.1f} (seeds {curve[:, -1].min():.0f}.."
        f"{curve[:, -1].max():.0f}), policies {choice.tolist()}, {time.time() - start:.1f} s")
  # Retained: each kept policy on every task again, after the whole sequence.
  retained = np.zeros((n, len(physics)))
  for t, phys in enumerate(physics):
    if method == "scratch":
      one = jax.tree_util.tree_map(lambda x: x[:, None], kept[t])
      retained[:, t] = np.asarray(programs.final(one, _keys(seeds, _FINAL, t)[:, None],
                                                 phys))[:, 0]
    else:
      keys = jnp.stack([_keys(seeds, _FINAL, t, i) for i in range(k)], axis=1)
      returns = np.asarray(programs.final(library, keys, phys))
      retained[:, t] = returns.max(axis=1)  # the library acts with its best observed
  return {"curves": np.stack(curves, 1), "selected": np.stack(selected, 1),
          "observed": np.stack(observed, 1), "retained": retained}


def steps_to_target(curve: Sequence[float], eval_every: int,
                    target: float) -> Optional[int]:
  """The first evaluation step (0, eval_every, ...) of one task's curve at >= `target`;
  None: not within the budget."""
  return aggregate.first_step_at([i * eval_every for i in range(len(curve))], curve, target)


def _interval(values) -> Dict[str, float]:
  estimate, low, high = aggregate.interval(np.asarray(values, np.float64), "mean")
  return {"mean": float(estimate), "ci_low": float(low), "ci_high": float(high)}


def summarise(settings: LibrarySettings, raw: Dict[str, Dict[str, Any]]) -> Dict[str, Any]:
  """Aggregates over seeds (mean with a 95% percentile-bootstrap interval,
  `aggregate.interval`) of each method: the mean over the sequence of the end-of-task
  greedy return and of the retained return, and per task the end return, the steps to
  the target (a seed that did not reach it counts as the budget; `reached` says how many
  did) and the library's choices."""
  s = settings
  out = {}
  for method, r in raw.items():
    curves = r["curves"]  # [S, T, E + 1]
    end = curves[:, :, -1]
    steps = [[steps_to_target(curves[j, t], s.eval_every, s.target)
              for t in range(curves.shape[1])] for j in range(curves.shape[0])]
    censored = np.array([[s.steps_per_task if v is None else v for v in row]
                         for row in steps], np.float64)
    tasks = []
    for t, env_id in enumerate(s.tasks):
      column = [row[t] for row in steps]
      tasks.append({
          "task": env_id, "end_return": _interval(end[:, t]),
          "steps_to_target": _interval(censored[:, t]),
          "reached": int(sum(v is not None for v in column)),
          "retained_return": _interval(r["retained"][:, t]),
          "selected": r["selected"][:, t].tolist()})
    out[method] = {
        "mean_return": _interval(end.mean(axis=1)),
        "mean_retained_return": _interval(r["retained"].mean(axis=1)),
        "mean_steps_to_target": _interval(censored.mean(axis=1)),
        "tasks_reached": int(sum(v is not None for row in steps for v in row)),
        "tasks": tasks,
        "per_seed": {"end_return": end.tolist(), "steps_to_target": steps,
                     "retained_return": r["retained"].tolist(),
                     "selected": r["selected"].tolist(),
                     "observed": np.where(np.isnan(r["observed"]), None,
                                          r["observed"]).tolist(),
                     "curves": curves.tolist()}}
  return out


def run(settings: LibrarySettings, methods: Sequence[str] = METHODS,
        log: Callable[[str], None] = lambda m: None) -> Dict[str, Any]:
  """Runs the study (module docstring); returns {"settings", "methods", "wall_seconds"}.

  Raises:
    core.UsageError: a bad setting or task id (one line naming it and what is allowed).
  """
  settings.check()
  unknown = [m for m in methods if m not in METHODS]
  if unknown:
    raise core.UsageError(f"unknown method {unknown[0]!r}; allowed: {', '.join(METHODS)}")
  start = time.time()
  physics = []
  for env_id in settings.tasks:
    try:
      physics.append({k: jnp.float32(v) for k, v in task_physics(env_id).items()})
    except core.UnknownEnvironmentError as e:
      raise core.UsageError(f"--tasks: {e}") from None
  programs = _Programs(settings)
  raw = {}
  for method in methods:
    t0 = time.time()
    raw[method] = run_method(method, settings, programs, physics, log)
    raw[method]["wall_seconds"] = time.time() - t0
  summary = summarise(settings, raw)
  for method in methods:
    summary[method]["wall_seconds"] = round(raw[method]["wall_seconds"], 1)
  return {"settings": dataclasses.asdict(settings), "methods": summary,
          "wall_seconds": round(time.time() - start, 1)}


if __name__ == "__main__":  # its flags live in cli/
  from actorq.cli.studies import lifetime_library as command_line
  sys.exit(command_line.main())
