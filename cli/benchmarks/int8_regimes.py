"""`python -m actorq.benchmarks.int8_regimes`:
the benchmark's flags, parsed here, and the calls of its functions with typed
arguments (argparse lives in cli/)."""
from __future__ import annotations

from typing import Optional
from typing import Sequence
import argparse
import os
import sys

from actorq.components import atomic
from actorq.benchmarks import int8_regimes as benchmark
from actorq.benchmarks.int8_regimes import (
    LOCAL_MP, SINGLE, calibrations, curves, format_table, load_workload, plot, points, ratios)


def main(argv: Optional[Sequence[str]] = None) -> int:
  parser = argparse.ArgumentParser(description=benchmark.__doc__.splitlines()[0])
  parser.add_argument("--single", nargs="*", default=(), metavar="RUN_DIR",
                      help="single-process `actorq bench` outputs (bench.json)")
  parser.add_argument("--local-mp", nargs="*", default=(), metavar="RUN_DIR",
                      help="`actorq bench --launch local_mp` outputs (bench_distributed.json)")
  parser.add_argument("--cores", type=float, default=float(os.cpu_count() or 1),
                      help="cores of the measured machine (default: this one's)")
  parser.add_argument("--out", required=True, help="output directory")
  args = parser.parse_args(argv)
  if not args.cores > 0:
    print("int8_regimes: --cores must be > 0", file=sys.stderr)
    return 2
  dirs = [(d, SINGLE) for d in args.single] + [(d, LOCAL_MP) for d in args.local_mp]
  if not dirs:
    print("int8_regimes: give at least one run directory (--single, --local-mp, ...)",
          file=sys.stderr)
    return 2
  try:
    workloads = [load_workload(d, launch) for d, launch in dirs]
    calibrated = calibrations(workloads, args.cores)
    rows, costs = points(workloads, args.cores, calibrated)
  except (FileNotFoundError, ValueError, KeyError) as e:
    print(f"int8_regimes: {e}", file=sys.stderr)
    return 2
  summary = ratios(rows)
  spis = [2 ** (k / 4) for k in range(-4, 25)]  # 0.5 .. 64
  model = curves(workloads, args.cores, spis, calibrated)
  os.makedirs(args.out, exist_ok=True)
  atomic.write_json(os.path.join(args.out, "int8_regimes.json"),
                 {"cores": args.cores, "costs": costs, "summary": summary, "points": rows,
                  "model_curves": {"samples_per_insert": spis, **model}})
  table = format_table(summary, rows)
  with atomic.atomic_write(os.path.join(args.out, "table.md")) as f:
    f.write(table + "\n")
  png = plot(summary, rows, model, spis, os.path.join(args.out, "int8_regimes.png"))
  print(table)
  print(f"files: {args.out}/int8_regimes.json, {args.out}/table.md, {png}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
