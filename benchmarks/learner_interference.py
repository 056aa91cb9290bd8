"""Does an actor's inference beside the learner slow the learner's step, and is it the CPU
time or the memory traffic? (issue 40, item 1)

    python -m actorq.benchmarks.learner_interference --rounds 2 --steps 15 --out OUT.json

The single-process learner step of the actorq preset (D4PG, 3x2048 policy, built and fed as
`benchmarks/learner_step.py` does) timed in blocks of `--steps` steps, each block with one
neighbour process running at `--rate` steps per second:

  alone   nothing
  spin    a busy loop taking, per step, the CPU time of one fp32 actor step (measured in the
          fp32 block before it): CPU time without memory traffic
  stream  a sum over a 33,628,164-byte float32 array per step (the fp32 3x2048 policy's
          weight bytes): memory traffic with little CPU
  fp32    the preset's actor at fp32 (one XLA thread, as an actor node) on its environment
  int8    the same at int8 (LiteRT; 8.4 MB of weights)

The neighbours run with one thread (`placement.node_env`'s flags for actor nodes). Blocks are
rotated by one condition per round (slow drifts hit every condition alike). Per block: mean
wall and process-CPU milliseconds per learner step; the neighbour's CPU per step.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any, Callable, Dict, List, Sequence

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# pylint: disable=wrong-import-position
import jax
import numpy as np

from actorq.benchmarks import actorq_bench as ab
from actorq.benchmarks import learner_step
from actorq.components.acting import variable_client as vc
from actorq.components.envs import single_agent
from actorq.launch import experiment
from actorq.components import placement
from actorq.launch import spec as spec_lib

MODES = ("alone", "fp32", "spin", "stream", "int8")
POLICY_BYTES = 33_628_164  # the fp32 3x2048 policy's payload on dmc:cartpole-balance
ENV_ID = "dmc:cartpole-balance"


def preset_overrides() -> Dict[str, Any]:
  return dict(ab.PRESETS["actorq"].overrides)


def spin_step(cpu_s: float) -> Callable[[], None]:
  """A step that burns `cpu_s` seconds of this thread's CPU and touches no memory."""
  def step():
    start = time.thread_time()
    while time.thread_time() - start < cpu_s:
      pass
  return step


def stream_step(nbytes: int = POLICY_BYTES) -> Callable[[], float]:
  """A step that reads `nbytes` of float32 (a sum): memory traffic, little CPU."""
  array = np.ones(nbytes // 4, np.float32)
  return lambda: float(array.sum())


def actor_step(precision: str) -> Callable[[], None]:
  """One step of the preset's actor at `precision` on its own environment (random policy
  parameters: the cost of inference does not depend on their values)."""
  builder = spec_lib.make_builder("d4pg", overrides=dict(preset_overrides(), actor_precision=precision))
  config = experiment.ExperimentConfig(builder=builder, env_id=ENV_ID, num_steps=1, seed=1,
                                       eval_every=1, eval_episodes=1, logdir=None)
  env = single_agent.make_environment(config, 1)
  parts = experiment.agent_parts(config, single_agent.environment_spec(config))
  key_learner, key_actor = jax.random.split(jax.random.PRNGKey(1), 2)
  learner = builder.make_learner(key_learner, parts.networks, iter(()), lambda label: None,
                                 parts.environment_spec, None, None)
  actor = builder.make_actor(key_actor, parts.policy, parts.environment_spec,
                             vc.PolicyServer(learner, parts.networks.spec))
  state = {"ts": env.reset()}

  def step():
    ts = env.step(actor.select_action(state["ts"].observation))
    state["ts"] = env.reset() if ts.last() else ts
  return step


def neighbour(mode: str, rate: float, cpu_s: float) -> None:
  """The neighbour process: prints {"cpu_per_step_s"} and "ready", then steps at `rate`
  per second until killed."""
  step = {"alone": lambda: (lambda: None), "spin": lambda: spin_step(cpu_s),
          "stream": stream_step, "fp32": lambda: actor_step("fp32"),
          "int8": lambda: actor_step("int8")}[mode]()
  for _ in range(20):
    step()
  cpu0 = time.thread_time()
  for _ in range(20):
    step()
  print(json.dumps({"cpu_per_step_s": (time.thread_time() - cpu0) / 20}), flush=True)
  print("ready", flush=True)
  due = time.perf_counter()
  while True:
    step()
    due += 1.0 / rate
    wait = due - time.perf_counter()
    if wait > 0:
      time.sleep(wait)
    else:
      due = time.perf_counter()


def _neighbour_env() -> Dict[str, str]:
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
  env.update(placement.node_env("actor", "cpu", 1))
  return env


def measure(rounds: int, steps: int, rate: float, modes: Sequence[str] = MODES,
            log=print) -> Dict[str, List[Dict[str, float]]]:
  """The blocks (module docstring): {mode: [{"wall_ms", "cpu_ms", "neighbour_cpu_ms"}]}."""
  learner, env = learner_step.filled_learner("d4pg", ENV_ID, preset_overrides(), warmup=3)
  fp32_cpu_s, out = 0.004, {}
  for r in range(rounds):
    order = list(modes[r % len(modes):]) + list(modes[:r % len(modes)])
    for mode in order:
      proc = subprocess.Popen(
          [sys.executable, "-m", "actorq.benchmarks.learner_interference", "--neighbour", mode,
           "--rate", str(rate), "--cpu-s", str(fp32_cpu_s)],
          stdout=subprocess.PIPE, text=True, env=_neighbour_env())
      try:
        info = json.loads(proc.stdout.readline())
        if proc.stdout.readline().strip() != "ready":
          raise RuntimeError(f"the {mode} neighbour did not start")
        if mode == "fp32":
          fp32_cpu_s = info["cpu_per_step_s"]
        time.sleep(1.0)
        wall, cpu = learner_step.timed_steps(learner, steps)
      finally:
        proc.kill()
        proc.wait()
      row = {"wall_ms": 1e3 * statistics.fmean(wall), "cpu_ms": 1e3 * statistics.fmean(cpu),
             "neighbour_cpu_ms": 1e3 * info["cpu_per_step_s"], "loadavg": os.getloadavg()[0]}
      out.setdefault(mode, []).append(row)
      log(f"round {r} {mode}: learner step {row['wall_ms']:.1f} ms (CPU {row['cpu_ms']:.1f} ms); "
          f"neighbour {row['neighbour_cpu_ms']:.2f} ms CPU per step")
  env.close()
  return out


if __name__ == "__main__":
  from actorq.cli.benchmarks import learner_interference as command_line  # its flags: cli/
  sys.exit(command_line.main())
