"""Batched policy inference: per-row cost at batch B of the fp32 JAX runtime and the int8
LiteRT runtime, and what a dynamic batch (re-sizing the interpreter on every call) costs.

For each network (the DQN small preset's 4-256-256-3 dueling MLP and ActorQ's 5-2048x3-1
D4PG policy) and B in --batches: median microseconds per call and per row of
  * fp32: `JaxRuntime` (jit, compiled once per batch size);
  * int8, fixed B: `LiteRTInt8Runtime` whose interpreter was sized for B once (what a
    vectorized actor does: its batch never changes);
  * int8, dynamic: the same runtime alternating between B and B - 1 rows, so every call
    re-sizes the interpreter's input (`resize_tensor_input` + `allocate_tensors`).
XLA is pinned to one thread and LiteRT runs one thread.

    python benchmarks/batched_inference.py [--batches 1,8,32] [--repeats 200] [--json FILE]
"""
from __future__ import annotations

import sys

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                           " --xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")

import numpy as np  # pylint: disable=g-import-not-at-top

from actorq.quantization import network_spec as ns  # pylint: disable=g-import-not-at-top
from actorq.quantization import payload as pl  # pylint: disable=g-import-not-at-top
from actorq.quantization import runtimes  # pylint: disable=g-import-not-at-top

NETWORKS = {"dqn_2x256": lambda: ns.mlp(4, [256, 256], 3),
            "d4pg_3x2048": lambda: ns.mlp(5, [2048, 2048, 2048], 1, output_activation="tanh")}


def measure(spec, batches, repeats: int):
  rng = np.random.default_rng(0)
  params = {n: {k: rng.normal(0, 0.05, s).astype(np.float32) for k, s in shp.items()}
            for n, shp in pl.expected_shapes(spec).items()}
  rows = []
  for b in batches:
    obs = rng.normal(size=(b,) + spec.input_shape).astype(np.float32)
    out = {"batch": b}
    for precision in ("fp32", "int8"):
      rt = runtimes.make_runtime(precision, spec)
      rt.load(pl.make_payload(params, spec, rt.payload_precision, 0))
      call = lambda i, rt=rt: rt(obs)  # pylint: disable=cell-var-from-loop
      out[f"{precision}_us"] = runtimes.median_call_us(call, repeats)
    if b > 1:
      rt = runtimes.make_runtime("int8", spec)
      rt.load(pl.make_payload(params, spec, "int8", 0))
      short = obs[:-1]
      call = lambda i: rt(obs if i % 2 else short)  # pylint: disable=cell-var-from-loop
      out["int8_dynamic_us"] = runtimes.median_call_us(call, repeats)
    rows.append(out)
  return rows


if __name__ == "__main__":
  from actorq.cli.benchmarks import batched_inference as command_line  # its flags: cli/
  sys.exit(command_line.main())
