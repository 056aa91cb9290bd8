"""`python -m actorq.benchmarks.anakin_bench`: the benchmark's flags, parsed here, and the calls
of its functions with typed arguments (argparse lives in cli/)."""
from __future__ import annotations

import argparse
import statistics
import sys

import jax

from actorq.components import atomic
from actorq.benchmarks import anakin_bench as benchmark


def main(argv=None):
  p = argparse.ArgumentParser(description=benchmark.__doc__.split("\n")[0])
  p.add_argument("--ppo-steps", type=int, default=500_000)
  p.add_argument("--local-steps", type=int, default=20_000)
  p.add_argument("--batches", default="1,32,256,1024")
  p.add_argument("--scan-steps", type=int, default=2_000, help="steps per env in the rate rows")
  p.add_argument("--repeats", type=int, default=3)
  p.add_argument("--out", default=None)
  p.add_argument("--dqn", default=None, metavar="SEEDS,STEPS,LOCAL_RUNS",
                 help="only the DQN comparison: SEEDS seeds x STEPS in one anakin program "
                      "against LOCAL_RUNS sequential local runs, extrapolated to SEEDS")
  a = p.parse_args(argv)
  if a.dqn:
    seeds, steps, runs = (int(x) for x in a.dqn.split(","))
    ak, loc = benchmark.dqn_seeds_vs_local(seeds, steps, runs)
    print(f"DQN anakin: {seeds} seeds x {steps} steps in {ak['wall_s']:.0f} s wall "
          f"({ak['cpu_s']:.0f} CPU-s; first period incl. compile {ak['first_period_s']:.0f} s)")
    print(f"DQN local: {runs} runs of {steps} steps, median {loc['wall_s_per_run']:.0f} s wall "
          f"({loc['cpu_s_per_run']:.0f} CPU-s) per run; x {seeds} = "
          f"{loc['extrapolated_wall_s']:.0f} s wall ({loc['extrapolated_cpu_s']:.0f} CPU-s), "
          "extrapolated")
    print(f"anakin / local(extrapolated): {ak['wall_s'] / loc['extrapolated_wall_s']:.2f} wall, "
          f"{ak['cpu_s'] / loc['extrapolated_cpu_s']:.2f} CPU")
    print(f"projected to 100k steps per seed at the steady rates: anakin {seeds} seeds "
          f"{ak['projected_wall_s']:.0f} s ({ak['steady_steps_per_s']:.0f} steps/s per seed), "
          f"local {seeds} runs {loc['projected_wall_s']:.0f} s (median "
          f"{statistics.median(r['steady_steps_per_s'] for r in loc['runs']):.0f} steps/s); "
          f"anakin / local = {ak['projected_wall_s'] / loc['projected_wall_s']:.3f}")
    if a.out:
      atomic.write_json(a.out, {"anakin": ak, "local": loc})
    return 0
  batches = [int(b) for b in a.batches.split(",")]
  out = {"machine": {"devices": [str(d) for d in jax.devices()]},
         "rows": benchmark.rate_rows(batches, a.scan_steps, a.repeats,
                                     log=lambda m: print(m, flush=True))}
  local_run = benchmark.local_ppo(a.local_steps)
  print(f"training: PPO --launch local, gym:CartPole-v1: {local_run['steps']} steps in "
        f"{local_run['wall_s']:.1f} s ({local_run['steps_per_s']:,.0f} steps/s wall, "
        f"{local_run['steps'] / local_run['cpu_s']:,.0f} per CPU-s)", flush=True)
  ak = benchmark.anakin_ppo(a.ppo_steps)
  print(f"training: PPO --launch anakin, gymnax:CartPole-v1: {ak['steps']} steps in "
        f"{ak['wall_s']:.1f} s (first period incl. compile {ak['first_period_s']:.1f} s; "
        f"{ak['steps_per_s']:,.0f} steps/s wall, {ak['steps'] / ak['cpu_s']:,.0f} per CPU-s); "
        f"final greedy return {ak['final_return']:.1f}, first 500 at step "
        f"{ak['first_step_at_500']}", flush=True)
  ratio = ak["steps_per_s"] / local_run["steps_per_s"]
  ratio_cpu = (ak["steps"] / ak["cpu_s"]) / (local_run["steps"] / local_run["cpu_s"])
  print(f"training ratio anakin/local: {ratio:.1f}x wall, {ratio_cpu:.1f}x per CPU-s "
        "(compilation included)", flush=True)
  out.update(local_ppo=local_run, anakin_ppo=ak, ratio_wall=ratio, ratio_cpu=ratio_cpu)
  if a.out:
    atomic.write_json(a.out, out)
  return 0


if __name__ == "__main__":
  sys.exit(main())
