"""Actor inference: fp32 JAX policy vs the int8 LiteRT runtime, side by side.

For MLPs 24-256x3-6 and 24-2048x3-6 and the Nature CNN (84x84x4 -> 6), at batch 1
and 16: median latency of each path, the int8/fp32 latency ratio, the payload
bytes ratio (int8 payload / fp32 params), and the refresh time from a new
parameter version to a runnable int8 policy (`make_payload` + `load`, which
includes creating the interpreter and its first invoke).

Both paths are pinned to one thread (XLA flags set before jax is imported;
LiteRT `num_threads=1`). The ratios are printed whatever they are; a slower
int8 path is flagged (case Q4).

    python benchmarks/actor_inference.py [--quick] [--json FILE]
"""
from __future__ import annotations

import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                           " --xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")

import numpy as np  # pylint: disable=g-import-not-at-top

from actorq.quantization import network_spec as ns  # pylint: disable=g-import-not-at-top
from actorq.quantization import payload as pl  # pylint: disable=g-import-not-at-top
from actorq.quantization import runtimes  # pylint: disable=g-import-not-at-top

NETWORKS = {
    "mlp_3x256": lambda: ns.mlp(24, [256, 256, 256], 6),
    "mlp_3x2048": lambda: ns.mlp(24, [2048, 2048, 2048], 6),
    "nature_cnn": lambda: ns.nature_cnn((84, 84, 4), 6),
}
TARGETS = {"mlp_3x2048": 5.0, "mlp_3x256": 1.8}  # fp32/int8 speedup at batch 1


def random_params(spec, rng):
  return {n: {k: rng.normal(0, 0.05, s).astype(np.float32) for k, s in shp.items()}
          for n, shp in pl.expected_shapes(spec).items()}


def run(quick: bool, batches=(1, 16)):
  repeats = 30 if quick else 200
  refreshes = 3 if quick else 10
  rng = np.random.default_rng(0)
  results = {}
  for name, make_spec in NETWORKS.items():
    spec = make_spec()
    params = random_params(spec, rng)
    fp32 = runtimes.make_runtime("fp32", spec, num_threads=1)
    fp32.load(pl.make_payload(params, spec, "fp32", 0))
    t0 = time.perf_counter()
    int8 = runtimes.make_runtime("int8", spec, num_threads=1)
    build_s = time.perf_counter() - t0
    payload = pl.make_payload(params, spec, "int8", 0)
    int8.load(payload)
    fp32_bytes = sum(a.size * 4 for l in params.values() for a in l.values())
    res = {"payload_ratio": payload.nbytes / fp32_bytes, "payload_bytes": payload.nbytes,
           "fp32_bytes": fp32_bytes, "template_build_s": build_s, "batches": {}}
    for b in batches:
      if spec.input_shape == (84, 84, 4):
        obs = rng.integers(0, 256, (b,) + spec.input_shape).astype(np.float32)
      else:
        obs = rng.normal(size=(b,) + spec.input_shape).astype(np.float32)
      f = runtimes.median_latency_us(fp32, obs, repeats)
      q = runtimes.median_latency_us(int8, obs, repeats)
      res["batches"][str(b)] = {"fp32_us": f, "int8_us": q, "int8_over_fp32": q / f}
    # New version -> runnable int8 policy (batch size kept at the last one used).
    times = []
    for v in range(1, refreshes + 1):
      new = {n: {k: a + np.float32(0.01 * v) for k, a in l.items()} for n, l in params.items()}
      t0 = time.perf_counter()
      int8.load(pl.make_payload(new, spec, "int8", v))
      times.append(time.perf_counter() - t0)
    res["refresh_ms"] = float(np.median(times) * 1e3)
    res["load_ms"] = int8.timings["last_load_ms"]
    results[name] = res
    print_network(name, res)
  return results


def print_network(name, res):
  print(f"\n== {name}: payload {res['payload_bytes']:,} B / fp32 {res['fp32_bytes']:,} B = "
        f"{res['payload_ratio']:.3f}x; refresh (make_payload + load) {res['refresh_ms']:.1f} ms"
        f" (load alone {res['load_ms']:.1f} ms); one-off template build {res['template_build_s']:.2f} s")
  print(f"   {'batch':>5} {'fp32 us':>10} {'int8 us':>10} {'int8/fp32':>10} {'speedup':>8}")
  for b, r in res["batches"].items():
    flag = "  <-- int8 SLOWER than fp32" if r["int8_us"] > r["fp32_us"] else ""
    print(f"   {b:>5} {r['fp32_us']:10.1f} {r['int8_us']:10.1f} {r['int8_over_fp32']:10.3f} "
          f"{r['fp32_us'] / r['int8_us']:7.2f}x{flag}")
  if name in TARGETS:
    sp = res["batches"]["1"]["fp32_us"] / res["batches"]["1"]["int8_us"]
    ok = "met" if sp >= TARGETS[name] else "NOT met"
    print(f"   target batch-1 speedup >= {TARGETS[name]}x: {ok} ({sp:.2f}x)")


if __name__ == "__main__":
  from actorq.cli.benchmarks import actor_inference as command_line  # its flags: cli/
  sys.exit(command_line.main())
