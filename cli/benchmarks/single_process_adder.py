"""`python -m actorq.benchmarks.single_process_adder`:
the benchmark's flags, parsed here, and the calls of its functions with typed
arguments (argparse lives in cli/)."""
from __future__ import annotations

from typing import List
import argparse
import json
import os
import statistics
import subprocess
import sys

from actorq.components import atomic
from actorq.benchmarks import peer_sb3
from actorq.benchmarks import single_process_adder as benchmark
from actorq.benchmarks.single_process_adder import ADDERS, run_child


def main(argv: List[str] = None) -> int:
  parser = argparse.ArgumentParser(description=benchmark.__doc__.split("\n\n")[0])
  parser.add_argument("--steps", type=int, default=20_000)
  parser.add_argument("--rounds", type=int, default=2)
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--cores", default="0,1", help="two cores to pin the two runs to")
  parser.add_argument("--json", default=None, help="write the rows here")
  parser.add_argument("--child", choices=ADDERS, help=argparse.SUPPRESS)
  args = parser.parse_args(argv)
  if args.child:
    print(json.dumps(run_child(args.child, args.steps, args.seed)))
    return 0
  cores = args.cores.split(",")
  env = dict(os.environ, **peer_sb3.ONE_THREAD_ENV)
  rows, ratios = [], []
  for k in range(args.rounds):
    procs = {}
    for i, adder in enumerate(ADDERS):
      core = cores[(i + k) % 2]
      procs[adder] = (core, subprocess.Popen(
          ["taskset", "-c", core, sys.executable, "-m", "actorq.benchmarks.single_process_adder",
           "--child", adder, "--steps", str(args.steps), "--seed", str(args.seed)],
          stdout=subprocess.PIPE, text=True, env=env))
    got = {}
    for adder, (core, proc) in procs.items():
      out, _ = proc.communicate()
      if proc.returncode != 0:
        print(f"round {k + 1}: the {adder} run exited {proc.returncode}", file=sys.stderr)
        return 1
      got[adder] = dict(json.loads(out.strip().splitlines()[-1]), core=int(core), round=k + 1)
      rows.append(got[adder])
      print(f"round {k + 1}: {adder:10s} core {core}: {got[adder]['steps_per_s']:.1f} actor "
            f"steps/s, checksum {got[adder]['checksum']}", flush=True)
    if got["acme"]["checksum"] != got["single_env"]["checksum"]:
      print(f"round {k + 1}: the checksums differ", file=sys.stderr)
      return 1
    ratios.append(got["single_env"]["steps_per_s"] / got["acme"]["steps_per_s"])
    print(f"round {k + 1}: single_env / acme = {ratios[-1]:.2f}x")
  print(f"median single_env / acme over {len(ratios)} rounds: {statistics.median(ratios):.2f}x "
        f"(same checksum in every round)")
  if args.json:
    atomic.write_json(args.json, {"rows": rows, "ratios": ratios, "steps": args.steps,
                               "seed": args.seed})
  return 0


if __name__ == "__main__":
  sys.exit(main())
