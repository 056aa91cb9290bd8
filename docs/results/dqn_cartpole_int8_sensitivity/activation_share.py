"""How much of the int8 disagreement LiteRT's activation quantization alone causes.

Float32 weights, every named layer's input quantized as LiteRT's dynamic-range
FULLY_CONNECTED kernels with asymmetric inputs do it (per batch row: range
[min(x, 0), max(x, 0)] over 255 steps, round to nearest, zero point in [-128, 127]),
greedy agreement with fp32 on the fp32 policy's visited observations (the sensitivity
study's reference episodes, seeds 12345..). A numpy simulation, not a LiteRT run.

    .venv/bin/python docs/results/dqn_cartpole_int8_sensitivity/activation_share.py \
        /work/runs/dqn10/fp32-s0 ... /work/runs/dqn10/fp32-s9
"""
import sys

import numpy as np

from actorq.quantization import network_spec as ns
from actorq.quantization import payload as pl
from actorq.studies import compression as cs
from actorq.studies import quantize as qs


def litert_inputs(x):
  lo = np.minimum(x.min(1, keepdims=True), 0)
  hi = np.maximum(x.max(1, keepdims=True), 0)
  s = np.where(hi > lo, (hi - lo) / 255, 1.0)
  zp = np.round(-128 - lo / s)
  return (np.clip(np.round(x / s) + zp, -128, 127) - zp) * s


def outputs(params, spec, obs, quantized_inputs):
  x = np.asarray(obs, np.float64) * spec.input_scale
  for layer in spec.layers:
    if layer.name in quantized_inputs:
      x = litert_inputs(x)
    x = x @ params[layer.name]["w"] + params[layer.name]["b"]
    x = np.maximum(x, 0) if layer.activation == "relu" else x
  return x


def main(paths, episodes=10):
  rows = {}
  for path in paths:
    run = qs.load_run(path, 1.0)
    assert all(isinstance(l, ns.Dense) for l in run.spec.layers)
    ctx = cs.StudyContext(run.params, run.spec, run.env_fn, run.semantics,
                          list(range(12345, 12345 + episodes)))
    obs = cs.reference_run(ctx)["observations"]
    p = {n: {k: np.asarray(v, np.float64) for k, v in l.items()}
         for n, l in pl.validate_params(run.params, run.spec).items()}
    greedy = lambda y: run.semantics.transform(y).argmax(1)
    ref = greedy(outputs(p, run.spec, obs, ()))
    names = [l.name for l in run.spec.layers]
    for label, layers in [("all layers", names)] + [(n, [n]) for n in names]:
      rows.setdefault(label, []).append(
          float((greedy(outputs(p, run.spec, obs, layers)) == ref).mean()))
  for label, v in rows.items():
    print(f"fp32 weights, LiteRT int8 inputs of {label}: agreement median "
          f"{np.median(v):.3f} [{min(v):.3f}, {max(v):.3f}]")


if __name__ == "__main__":
  main(sys.argv[1:])
