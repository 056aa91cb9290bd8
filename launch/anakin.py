"""`--launch anakin`: an agent trained on a JAX environment as ONE jitted program per
evaluation period, acting, replay and learning in-graph, vmapped over seeds
(`actorq.components.anakin`; Hessel et al. 2021's Anakin architecture).

    results = anakin.run([spec_seed0, spec_seed1, ...])      # RunSpecs differing in seed

Each seed is a run: its own run directory (run.json, eval.csv, train.csv, learner.csv,
TensorBoard events, checkpoints) with the files `actorq train --launch local` writes, so
`actorq eval / quantize / export`, `--resume`, `actorq plot` and the sweep's report read
it unchanged; the run's seed decides its numbers (a seed run twice ends with the same
learner checksum, and so does a seed among vmapped seeds whichever seeds run beside it,
tested; a seed alone is compiled without the seed axis, whose kernels add in another
order, so its checksum differs from the same seed's in a sweep). Between evaluations
the program runs uninterrupted; evaluations, logging, progress and checkpoints happen
at the period's end, in Python.

What differs from `--launch local` (by design, see docs/guides/anakin.md): the actors act
with the learner's newest parameters (no `variable_update_period` lag); int8 actors are
the LiteRT arithmetic emulated in float32 (`quantization.emulation`); the environments are
gymnax's, stepped by XLA; random streams are jax's, so a seed's numbers differ from the
local launch's seed.

Checkpoints hold the whole program state of the seed (learner, replay, environments,
keys, counters) under ``"anakin"`` beside the keys every run checkpoint has
(`experiment.checkpoint_state`'s), so a resumed run continues exactly where it stopped.
"""
from __future__ import annotations

import dataclasses
import time
from typing import Any, Callable, Dict, List, Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from actorq import core
from actorq.agents.anakin_common import systems
from actorq.components.anakin import acting
from actorq.components.envs import environments, seeding
from actorq.components import checkpointing, stops
from actorq.launch import experiment as experiment_lib
from actorq.launch import local
from actorq.components import loggers as logging_lib
from actorq.components import run_dir
from actorq.quantization import payload as payload_lib

NAME = "anakin"
CHECKPOINTS = run_dir.CHECKPOINTS


def functional_environment(env_id: str):
  """The JAX form of `env_id` (`EnvironmentPrefix.functional`).

  Raises:
    core.UsageError: an id without one (one line naming the prefixes that have one).
  """
  parsed = environments.parse_id(env_id)
  if parsed.repeat > 1:
    raise core.UsageError(f"--launch anakin: {env_id}: action repeat is not compiled; "
                          "leave the @repeat suffix out")
  env = parsed.entry.functional_environment(parsed.name, parsed.arguments)
  if env is None:
    have = [f"{p}:" for p, e in environments.PREFIXES.items() if e.functional is not None]
    raise core.UsageError(f"--launch anakin needs an environment with a JAX form; {env_id} "
                          f"has none; allowed prefixes: {', '.join(have)} (e.g. "
                          "gymnax:CartPole-v1)")
  return env


def check(spec) -> None:
  """Refuses what `--launch anakin` cannot run, in one line (`core.UsageError`): an
  environment without a JAX form, an agent without a compiled system, a precision the
  compiled actors do not run."""
  make(spec)


def make(spec):
  """`(builder, env, system)` of a RunSpec."""
  builder = spec.make_builder()
  env = functional_environment(spec.env)
  return builder, env, systems.make_system(builder, env, spec.num_envs)


@dataclasses.dataclass
class _Seed:
  spec: Any
  loggers: Dict[str, Any]
  evaluations: List[Dict[str, Any]]
  resumed_from: Optional[str] = None
  resumed_steps: int = 0


def _stack(trees):
  return jax.tree_util.tree_map(lambda *xs: jnp.stack([jnp.asarray(x) for x in xs]), *trees)


def _index(tree, i):
  return jax.tree_util.tree_map(lambda x: np.asarray(x[i]), tree)


def _restore(seeds: List[_Seed]) -> Optional[List[Any]]:
  """Each resumed seed's program state from its newest readable checkpoint."""
  carries = []
  for s in seeds:
    path, state = checkpointing.restore_latest(f"{s.spec.logdir}/{CHECKPOINTS}",
                                               checkpointing.validate_run)
    if path is None or "anakin" not in state:
      raise checkpointing.CheckpointError(
          f"{s.spec.logdir} holds no readable --launch anakin checkpoint")
    s.resumed_from, s.resumed_steps = path, int(state["actor_steps"])
    s.evaluations = [e for e in run_dir.read_evaluations(s.spec.logdir)
                     if e.get("actor_steps", 0) <= s.resumed_steps]
    carries.append(state["anakin"])
  steps = {s.resumed_steps for s in seeds}
  if len(steps) > 1:
    raise checkpointing.CheckpointError(
        f"the seeds' newest checkpoints are at different actor steps {sorted(steps)}; "
        "resume them one by one")
  return carries


def run(specs: Sequence[Any], *, progress: Optional[Callable[[Dict[str, Any]], None]] = None,
        log: Callable[[str], None] = lambda m: None) -> List[local.RunResult]:
  """Trains the seeds of `specs` (RunSpecs equal but for seed and logdir) in one program.

  Writes each spec's run directory (its run.json is the caller's, written first by
  `launch.engine.open_run_dir`, the one writer), evaluates every
  `eval_every` actor steps and at the end, checkpoints every `checkpoint_every` minutes,
  at the end and on Ctrl-C / SIGTERM (then re-raises with `checkpoint_path` of the first
  seed's checkpoint).

  Args:
    specs: one RunSpec per seed; all resume or none.
    progress: called after each period with {actor_steps, learner_steps, episodes,
      eval_return (mean over seeds), seconds}.

  Returns:
    one `local.RunResult` per spec, in order.

  Raises:
    core.UsageError: specs that differ in more than seed and logdir, or what `check` refuses.
    checkpointing.CheckpointError: resuming without readable anakin checkpoints.
  """
  first = specs[0]
  for s in specs[1:]:
    if dataclasses.replace(s, seed=first.seed, logdir=first.logdir) != first:
      raise core.UsageError("--launch anakin runs seeds of one configuration together; the "
                            "runs differ in more than their seed")
  builder, env, system = make(first)
  seeds = [_Seed(s, {}, []) for s in specs]
  start = time.time()
  carries = _restore(seeds) if first.resume else None
  for s in seeds:
    logger_fn = logging_lib.make_logger_factory(s.spec.logdir)
    s.loggers = {k: logger_fn(k) for k in ("train", "eval", "learner")}

  wall_offset = 0.0
  train = jax.jit(jax.vmap(system.train, in_axes=(0, None, None)))
  evaluate = jax.jit(jax.vmap(lambda c, k: system.evaluate(c, k, first.eval_episodes)))
  if carries is None:
    carry = jax.jit(jax.vmap(system.init))(
        jnp.stack([jax.random.PRNGKey(s.spec.seed) for s in seeds]))
  else:
    carry = _stack(carries)
    wall_offset = float(checkpointing.load(seeds[0].resumed_from).get("wall_seconds", 0.0))
  eval_keys = jnp.stack([jax.random.PRNGKey(s.spec.seed + seeding.EVAL_SEED_OFFSET)
                         for s in seeds])
  policy_precision = system.eval_policy.precision
  payload_bytes = payload_lib.make_payload(
      _index(system.policy_params(carry), 0), system.networks.spec,
      policy_precision, 0).nbytes
  state = {"carry": carry, "last_checkpoint": time.time(), "compile_s": None}

  def wall() -> float:
    return wall_offset + time.time() - start

  def checkpoint() -> str:
    c = jax.device_get(state["carry"])
    paths = []
    for i, s in enumerate(seeds):
      if s.spec.logdir is None:
        continue
      one = _index(c, i)
      steps = int(one.actor_steps)
      evals = s.evaluations
      paths.append(checkpointing.save_run(
          f"{s.spec.logdir}/{CHECKPOINTS}",
          {"learner": one.learner, "policy_params": system.policy_params(one),
           "learner_steps": int(system.learner_steps(one)), "actor_steps": steps,
           "episodes": int(one.episodes.total), "actor_num_steps": steps,
           "counter": {"counts": {"actor_steps": steps, "learner_steps": int(
               system.learner_steps(one))}, "cache": {}},
           "learning_started": bool(int(system.learner_steps(one)) > 0),
           "wall_seconds": wall(), "env_id": s.spec.env, "seed": s.spec.seed,
           "num_steps": s.spec.steps, "launch": NAME,
           "last_eval": evals[-1]["episode_return"] if evals else float("nan"),
           "anakin": one},
          step=steps, keep=s.spec.keep_checkpoints))
    state["last_checkpoint"] = time.time()
    return paths[0] if paths else None

  def evaluate_seeds(c) -> np.ndarray:
    """Greedy episodes of every seed's state `c`, one eval.csv row each (appended to
    the seed's evaluations); returns float32 [seeds, eval_episodes] returns."""
    returns, lengths = jax.device_get(evaluate(c, eval_keys))
    actor_steps, learner_steps, episodes = jax.device_get(
        (c.actor_steps, system.learner_steps(c), c.episodes.total))
    for i, s in enumerate(seeds):
      row = experiment_lib.evaluation_row(
          {"episode_return": float(np.mean(returns[i])),
           "episode_return_std": float(np.std(returns[i])),
           "episode_length": float(np.mean(lengths[i]))},
          actor_steps=int(actor_steps[i]), learner_steps=int(learner_steps[i]),
          episodes=int(episodes[i]), wall_seconds=wall(), precision=policy_precision,
          payload_bytes=payload_bytes, policy_version=int(learner_steps[i]))
      s.evaluations.append(row)
      s.loggers["eval"].write(row)
    return returns

  def period() -> None:
    c = state["carry"]
    steps_now = int(np.min(np.asarray(c.actor_steps)))
    target = min(first.steps, (steps_now // first.eval_every + 1) * first.eval_every)
    t0 = time.time()
    c = train(c, jnp.int32(target), jnp.int32(steps_now))
    c = jax.block_until_ready(c)
    if state["compile_s"] is None:
      state["compile_s"] = time.time() - t0
    returns = evaluate_seeds(c)
    host = jax.device_get((c.actor_steps, system.learner_steps(c), c.episodes, c.metrics))
    actor_steps, learner_steps, episodes, metrics = host
    c = c._replace(episodes=jax.vmap(_clear)(c.episodes))
    state["carry"] = c
    seconds = time.time() - t0
    for i, s in enumerate(seeds):
      ended = float(episodes.ended[i])
      if ended:
        s.loggers["train"].write({
            "actor_steps": int(actor_steps[i]), "episodes": int(episodes.total[i]),
            "episode_return": float(episodes.return_sum[i]) / ended,
            "episode_length": float(episodes.length_sum[i]) / ended,
            "episodes_in_period": int(ended),
            "steps_per_second": float(target - steps_now) / max(seconds, 1e-9)})
      s.loggers["learner"].write({"learner_steps": int(learner_steps[i]),
                                  **{k: float(v[i]) for k, v in metrics.items()}})
    mean_return = float(np.mean(returns))
    log(f"actorq anakin: {int(actor_steps.min())} actor steps x {len(seeds)} seeds, "
        f"greedy return {mean_return:.1f} (seeds {float(np.min(np.mean(returns, 1))):.0f}.."
        f"{float(np.max(np.mean(returns, 1))):.0f}), {seconds:.1f} s")
    if progress is not None:
      progress({"actor_steps": int(actor_steps.min()), "learner_steps": int(learner_steps.min()),
                "episodes": int(episodes.total.min()), "eval_return": mean_return,
                "seconds": seconds})
    if (first.checkpoint_every and first.logdir is not None
        and time.time() - state["last_checkpoint"] > 60.0 * first.checkpoint_every):
      checkpoint()

  try:
    with stops.preemptible():
      while int(np.min(np.asarray(state["carry"].actor_steps))) < first.steps:
        period()
      if not seeds[0].evaluations:  # resumed at or past the end: evaluate once
        evaluate_seeds(state["carry"])
      if any(s.spec.logdir for s in seeds):
        checkpoint()
  except KeyboardInterrupt as stop:
    stops.checkpoint_at_stop(stop, checkpoint if any(s.spec.logdir for s in seeds) else None)
    raise
  finally:
    for s in seeds:
      for logger in s.loggers.values():
        logger.close()

  c = jax.device_get(state["carry"])
  results = []
  for i, s in enumerate(seeds):
    one = _index(c, i)
    best = max(s.evaluations, key=lambda r: r["episode_return"])
    results.append(local.RunResult(
        final_eval_return=s.evaluations[-1]["episode_return"],
        best_eval_return=best["episode_return"], best_eval_step=best["actor_steps"],
        actor_steps=int(one.actor_steps), learner_steps=int(system.learner_steps(one)),
        episodes=int(one.episodes.total), wall_seconds=time.time() - start,
        evaluations=s.evaluations, resumed_from=s.resumed_from,
        resumed_actor_steps=s.resumed_steps,
        params_checksum=checkpointing.params_checksum(system.policy_params(one)),
        learner_device=str(jax.devices()[0].platform)))
  results[0].compile_seconds = state["compile_s"]  # first period's wall (compile included)
  return results


def _clear(episodes):
  return acting.clear_report(episodes)


def describe(spec) -> str:
  """What `actorq train --launch anakin --dry-run` prints (after `check`)."""
  _, env, system = make(spec)
  return (f"launch anakin: one jitted program ({type(system).__name__}: "
          f"{system.num_envs} {env.name} environments, actors "
          f"{system.policy.precision}, evaluation every {spec.eval_every} actor steps)")


def train_lines(spec, result) -> List[str]:
  """What `actorq train --launch anakin` prints at the end of `result` (one seed)."""
  precision = spec.config.get("actor_precision", "fp32")
  lines = []
  if result.resumed_from:
    lines.append(f"actorq: resumed from {result.resumed_from} (actor step "
                 f"{result.resumed_actor_steps})")
  return lines + [
      f"actorq: done in {result.wall_seconds:.0f} s ({result.compile_seconds:.1f} s in the "
      f"first period, compilation included): {result.actor_steps} actor steps, "
      f"{result.learner_steps} learner steps, {result.episodes} episodes; best evaluation "
      f"return {result.best_eval_return:.1f} at step {result.best_eval_step}",
      f"final evaluation return: {result.final_eval_return:.1f} (mean over "
      f"{spec.eval_episodes} greedy episodes, actors {precision}); learner parameters "
      f"{result.params_checksum}"]
