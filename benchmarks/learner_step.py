"""The single-process learner step, measured beside a distributed benchmark (issue 40).

    python -m actorq.benchmarks.learner_step --job JOB.json --out OUT.json

`actorq bench --launch local_mp` runs this before and after its programs (`combine`), each
time in a fresh child process with nothing else of the benchmark running, so that the learner node's step can be read
against the step of the same learner in one process, measured on the same machine at the
same time (`distributed_bench.format_table` prints the ratio).

What is measured (`measure`): the agent's learner built as a single-process run builds it
(`launch.local`: the builder's networks, the in-process `LocalReplayClient` and its dataset
iterator), replay filled to the builder's `min_replay_size` by the builder's own training
actor on the environment (`warmup` actor steps at least), then `warmup` learner steps (jit
compilation) and `steps` timed learner steps: `time.perf_counter()` and
`time.process_time()` (CPU of the whole process, every thread) around each `step()`.

Output: {"step_ms_mean", "step_ms_median", "cpu_ms_mean", "steps", "pid", "loadavg"} or,
when the agent's learner cannot be stepped this way (an on-policy queue that the acting
here does not refill, say), {"error": one line}.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any, Callable, Dict, List, Tuple

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# pylint: disable=wrong-import-position
import jax

from actorq.components import atomic
from actorq.components.acting import variable_client as vc
from actorq.components.replay import local_replay
from actorq.components.envs import single_agent
from actorq.launch import experiment
from actorq.components import placement
from actorq.launch import spec as spec_lib


def filled_learner(agent: str, env_id: str, overrides: Dict[str, Any], seed: int = 0,
                   warmup: int = 2, max_fill_steps: int = 200_000):
  """`(learner, env)`: the agent's learner built as a single-process run builds it, its
  replay filled by the builder's own training actor to `min_replay_size` (and at least
  `warmup` actor steps), then `warmup` learner steps taken (jit compilation). Close `env`.

  Raises:
    RuntimeError: replay did not reach the learner's minimum size within `max_fill_steps`.
  """
  placement.cpu_unless_gpu()
  builder = spec_lib.make_builder(agent, overrides=overrides)
  config = experiment.ExperimentConfig(builder=builder, env_id=env_id, num_steps=1, seed=seed,
                                       eval_every=1, eval_episodes=1, logdir=None)
  env = single_agent.make_training_environment(config, seed)
  parts = experiment.agent_parts(config, single_agent.training_environment_spec(env))
  key_learner, key_actor, _, key_replay = jax.random.split(jax.random.PRNGKey(seed), 4)
  client = local_replay.LocalReplayClient(
      builder.make_replay_tables(parts.environment_spec, parts.policy),
      seed=int(jax.random.randint(key_replay, (), 0, 2**31 - 1)))
  learner = builder.make_learner(key_learner, parts.networks, builder.make_dataset_iterator(client),
                                 lambda label: None, parts.environment_spec, client, None)
  server = vc.PolicyServer(learner, parts.networks.spec)
  key_actor = jax.device_put(key_actor, placement.cpu_device())
  _, actor = single_agent.make_training_actor(config, parts, key_actor, client, server)
  table = builder.replay_table_name()
  need = max(int(builder.min_replay_size()), 1)
  size = lambda: int(client.server_info()[table].current_size)
  # The one actor/environment loop fills replay (episode cap, variable pulls, adder), as a
  # run's does, until the learner's minimum and at least `warmup` steps.
  loop = single_agent.make_training_loop(
      config, env, actor, hooks=(), should_stop=lambda: loop.steps >= warmup and size() >= need)
  loop.run(num_steps=max_fill_steps)
  if size() < need:
    env.close()
    raise RuntimeError(f"replay held fewer than {need} items after {max_fill_steps} actor steps")
  for _ in range(warmup):
    learner.step()
  return learner, env


def timed_steps(learner, steps: int) -> Tuple[List[float], List[float]]:
  """`steps` learner steps: (wall seconds, CPU seconds of the whole process) of each."""
  wall, cpu = [], []
  for _ in range(steps):
    t, c = time.perf_counter(), time.process_time()
    learner.step()
    wall.append(time.perf_counter() - t)
    cpu.append(time.process_time() - c)
  return wall, cpu


def measure(agent: str, env_id: str, overrides: Dict[str, Any], seed: int = 0,
            steps: int = 20, warmup: int = 2, max_fill_steps: int = 200_000) -> Dict[str, Any]:
  """The learner step of `agent` on `env_id` in this process (see the module docstring).

  Raises:
    RuntimeError: replay did not reach the learner's minimum size within `max_fill_steps`.
  """
  learner, env = filled_learner(agent, env_id, overrides, seed, warmup, max_fill_steps)
  try:
    wall, cpu = timed_steps(learner, steps)
  finally:
    env.close()
  return {"step_ms_mean": 1e3 * statistics.fmean(wall),
          "step_ms_median": 1e3 * statistics.median(wall),
          "cpu_ms_mean": 1e3 * statistics.fmean(cpu), "steps": steps, "pid": os.getpid(),
          "loadavg": list(os.getloadavg())}


def measure_in_child(agent: str, env_id: str, overrides: Dict[str, Any], workdir: str,
                     seed: int = 0, steps: int = 20, log: Callable[[str], None] = print
                     ) -> Dict[str, Any]:
  """`measure` in a fresh child process (its output in `<workdir>/learner_step.log`);
  {"error": one line} when it fails (the benchmark goes on without the reference)."""
  job = {"agent": agent, "env": env_id, "overrides": overrides, "seed": int(seed),
         "steps": int(steps)}
  n = 0
  while os.path.exists(os.path.join(workdir, f"learner_step{n or ''}.job.json")):
    n += 1
  stem = os.path.join(workdir, f"learner_step{n or ''}")
  job_path, out_path, log_path = stem + ".job.json", stem + ".json", stem + ".log"
  atomic.write_json(job_path, job)
  start = time.time()
  with open(log_path, "w", encoding="utf-8") as logf:
    proc = subprocess.run([sys.executable, "-m", "actorq.benchmarks.learner_step", "--job",
                           job_path, "--out", out_path], stdout=logf, stderr=subprocess.STDOUT,
                          check=False, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
  if proc.returncode != 0 or not os.path.exists(out_path):
    with open(log_path, encoding="utf-8", errors="replace") as f:
      lines = [l.strip() for l in f if l.strip()]
    result = {"error": f"exit {proc.returncode}: {lines[-1] if lines else 'no output'}"}
  else:
    with open(out_path, encoding="utf-8") as f:
      result = json.load(f)
  if "error" in result:
    log(f"  single-process learner step: not measured ({result['error']})")
  else:
    log(f"  single-process learner step: {result['step_ms_mean']:.1f} ms mean, "
        f"{result['step_ms_median']:.1f} ms median over {result['steps']} steps "
        f"({time.time() - start:.0f} s)")
  return result


def combine(before: Dict[str, Any], after: Dict[str, Any]) -> Dict[str, Any]:
  """One reference from the measurements taken before and after a benchmark's programs:
  the means of their figures (steps summed), both kept under "before" and "after"; the one
  that succeeded if the other failed; `before` (an error) if neither did."""
  ok = [m for m in (before, after) if "error" not in m]
  if not ok:
    return dict(before)
  out = {k: statistics.fmean(m[k] for m in ok)
         for k in ("step_ms_mean", "step_ms_median", "cpu_ms_mean")}
  out["steps"] = int(sum(m["steps"] for m in ok))
  out.update(before=before, after=after)
  return out


if __name__ == "__main__":
  from actorq.cli.benchmarks import learner_step as command_line  # its flags: cli/
  sys.exit(command_line.main())
