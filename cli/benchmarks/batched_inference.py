"""`python -m actorq.benchmarks.batched_inference`:
the benchmark's flags, parsed here, and the calls of its functions with typed
arguments (argparse lives in cli/)."""
from __future__ import annotations

import argparse
import os
import sys

from actorq.components import atomic
from actorq.benchmarks import batched_inference as benchmark
from actorq.benchmarks.batched_inference import NETWORKS, measure


def main(argv=None):
  parser = argparse.ArgumentParser(description=benchmark.__doc__.splitlines()[0])
  parser.add_argument("--batches", default="1,8,32")
  parser.add_argument("--repeats", type=int, default=200)
  parser.add_argument("--json", default=None)
  args = parser.parse_args(argv)
  batches = [int(b) for b in args.batches.split(",")]
  result = {}
  print("median microseconds per call (per row); one thread")
  print(f"{'network':12s} {'B':>3s} {'fp32':>18s} {'int8 fixed B':>18s} {'int8/fp32':>9s} "
        f"{'int8 dynamic':>18s}")
  for name, make in NETWORKS.items():
    result[name] = measure(make(), batches, args.repeats)
    for r in result[name]:
      b = r["batch"]
      cell = lambda us: f"{us:9.1f} ({us / b:6.1f})"  # pylint: disable=cell-var-from-loop
      dyn = cell(r["int8_dynamic_us"]) if "int8_dynamic_us" in r else f"{'-':>18s}"
      print(f"{name:12s} {b:3d} {cell(r['fp32_us'])} {cell(r['int8_us'])} "
            f"{r['int8_us'] / r['fp32_us']:9.2f} {dyn}")
  load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
  print(f"(load average {load:.2f} on {os.cpu_count()} cores)")
  if args.json:
    atomic.write_json(args.json, result)


if __name__ == "__main__":
  sys.exit(main())
