"""quantization/export.py: the standalone model of a policy at a precision, run by LiteRT,
computes what the actors' runtime of the same payload computes."""
import numpy as np
import pytest

from actorq.quantization import export as qe
from actorq.quantization import network_spec as ns
from actorq.quantization import payload as pl
from actorq.quantization import runtimes


def _params(spec, seed=0):
  rng = np.random.default_rng(seed)
  return {n: {k: rng.normal(0, 0.3, s).astype(np.float32) for k, s in shapes.items()}
          for n, shapes in pl.expected_shapes(spec).items()}


@pytest.mark.parametrize("precision", ["int8", "fp32"])
def test_the_model_computes_what_the_actors_runtime_computes(precision):
  spec = ns.mlp(4, [16], 3)
  params = _params(spec)
  exported = qe.policy_model(params, spec, precision, calibration=None)
  obs = np.random.default_rng(1).normal(size=(5, 4)).astype(np.float32)
  runtime = runtimes.make_runtime(precision, spec)
  runtime.load(exported.payload)
  np.testing.assert_allclose(qe.ModelRuntime(exported.model)(obs), runtime(obs),
                             rtol=1e-4, atol=1e-4)
  assert qe.ModelRuntime(exported.model)(obs[:1]).shape == (1, 3)  # the batch is dynamic
  # int8: one scale entry per layer, per output channel; fp32: no integer layer.
  assert [s["layer"] for s in exported.scales] == (
      [l.name for l in spec.parameter_layers] if precision == "int8" else [])
  assert exported.bias_block == {}


def test_bias_correction_is_applied_and_its_calibration_recorded():
  spec = ns.mlp(4, [16], 3)
  params = _params(spec)
  calibration = np.random.default_rng(2).normal(size=(64, 4)).astype(np.float32)
  plain = qe.policy_model(params, spec, "int8", calibration=None)
  corrected = qe.policy_model(params, spec, "int8", calibration, calibration_seed=54321)
  block = corrected.bias_block["bias_correction"]
  assert block["calibration_observations"] == 64 and block["calibration_env_seed"] == 54321
  assert "calibration_env_seed" not in qe.policy_model(
      params, spec, "int8", calibration).bias_block["bias_correction"]
  # Same weights and scales, other biases.
  assert [s["scale"] for s in corrected.scales] == [s["scale"] for s in plain.scales]
  assert any(not np.allclose(corrected.payload.layers[n]["b"], plain.payload.layers[n]["b"])
             for n in plain.payload.layers)
