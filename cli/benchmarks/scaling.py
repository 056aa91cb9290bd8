"""`python -m actorq.benchmarks.scaling`:
the benchmark's flags, parsed here, and the calls of its functions with typed
arguments (argparse lives in cli/)."""
from __future__ import annotations

from typing import Optional
from typing import Sequence
import argparse
import dataclasses
import json
import os
import sys

from actorq.components import atomic
from actorq.benchmarks import scaling as benchmark
from actorq.benchmarks.scaling import (
    load_runs, calibrate, curves, parse_us, plot, predict, validate)


def main(argv: Optional[Sequence[str]] = None) -> int:
  parser = argparse.ArgumentParser(description=benchmark.__doc__.splitlines()[0])
  parser.add_argument("--calibrate", required=True, metavar="RUN_DIR",
                      help="a distributed bench whose runs give the costs")
  parser.add_argument("--validate", nargs="+", default=(), metavar="RUN_DIR",
                      help="distributed benches whose measured steps/s are predicted")
  parser.add_argument("--cores", type=float, default=float(os.cpu_count() or 1),
                      help="cores of the measured machine (default: this one's)")
  parser.add_argument("--gpu-learner-ms", type=float, default=2.0,
                      help="ASSUMED learner step time on the GPU machine (ms, default 2)")
  parser.add_argument("--gpu-host-cpu-ms", type=float, default=1.0,
                      help="ASSUMED host CPU per GPU learner step (ms, default 1)")
  parser.add_argument("--gpu-cores", type=float, default=16.0)
  parser.add_argument("--gpu-actor-us", default=None, metavar="P=US,...",
                      help="actor CPU us per step (pulls excluded) to assume on the GPU "
                           "machine, e.g. fp32=1873,int8=958 (default: as calibrated)")
  parser.add_argument("--out", required=True, help="output directory (scaling.json/png)")
  args = parser.parse_args(argv)
  for name in ("gpu_learner_ms", "gpu_host_cpu_ms", "gpu_cores", "cores"):
    if not getattr(args, name) > 0:
      print(f"scaling: --{name.replace('_', '-')} must be > 0", file=sys.stderr)
      return 2
  try:
    costs = calibrate(load_runs(args.calibrate), args.cores)
    checks = [r for d in args.validate for r in load_runs(d)]
  except (FileNotFoundError, ValueError) as e:
    print(f"scaling: {e}", file=sys.stderr)
    return 2
  try:
    gpu_actor_s = parse_us(args.gpu_actor_us, costs.actor_s)
  except ValueError as e:
    print(f"scaling: --gpu-actor-us: {e}", file=sys.stderr)
    return 2
  os.makedirs(args.out, exist_ok=True)
  rows = validate(costs, checks)
  gpu = dataclasses.replace(costs, learner_s=args.gpu_learner_ms / 1e3, actor_s=gpu_actor_s,
                            learner_cpu_s=args.gpu_host_cpu_ms / 1e3, cores=args.gpu_cores)
  sensitivity = {ms: {p: [dataclasses.asdict(predict(dataclasses.replace(gpu, learner_s=ms / 1e3),
                                                     p, n)) for n in (12, 14)]
                      for p in sorted(gpu.actor_s)} for ms in (1.0, 2.0, 5.0)}
  out = {"costs": dataclasses.asdict(costs), "validation": rows,
         "this_machine": curves(costs, 8),
         "gpu_prediction": {"label": "PREDICTION (no GPU was measured)",
                            "assumptions": {"learner_s": gpu.learner_s,
                                            "learner_cpu_s": gpu.learner_cpu_s,
                                            "cores": gpu.cores,
                                            "actor_s": gpu.actor_s,
                                            "other costs": "as calibrated on this CPU"},
                            "curves": curves(gpu, 16), "learner_ms_sensitivity": sensitivity}}
  atomic.write_json(os.path.join(args.out, "scaling.json"), out)
  png = plot([{"title": f"this machine ({args.cores:g} cores, CPU learner)\nmodel (lines) vs "
                        "measured (circles)",
               "costs": costs, "max_actors": 8,
               "measured": [(r["num_actors"], r["precision"], r["measured"]) for r in rows]},
              {"title": f"PREDICTION (not measured): {args.gpu_cores:g} cores, GPU learner\n"
                        f"t_L = {args.gpu_learner_ms:g} ms ASSUMED", "costs": gpu,
               "max_actors": 16}], os.path.join(args.out, "scaling.png"))
  print(f"costs (s): {json.dumps(dataclasses.asdict(costs))}")
  for r in rows:
    print(f"N={r['num_actors']} {r['precision']}: measured {r['measured']:.1f}, predicted "
          f"{r['predicted']:.1f} actor steps/s ({r['bound']}-bound), error {100 * r['error']:+.1f}%")
  for n in (12, 13, 14):
    preds = {p: predict(gpu, p, n) for p in sorted(gpu.actor_s)}
    text = ", ".join(f"{p} {x.steps_per_s:.0f} ({x.bound}-bound)" for p, x in preds.items())
    ratio = (f"; int8/fp32 {preds['int8'].steps_per_s / preds['fp32'].steps_per_s:.2f}x"
             if {"int8", "fp32"} <= set(preds) else "")
    print(f"PREDICTION, {args.gpu_cores:g} cores + GPU learner (t_L {args.gpu_learner_ms:g} ms, "
          f"host {args.gpu_host_cpu_ms:g} ms per learner step, ASSUMED), N={n}: {text} actor "
          f"steps/s{ratio}")
  print(f"files: {args.out}/scaling.json, {png}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
