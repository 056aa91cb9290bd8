"""The one forward pass over a `NetworkSpec` (issue 52): every path that evaluates a spec
(float runtimes, the learner's Haiku network, activation calibration, bias correction,
error-compensating rounding, LiteRT's dynamic-range reference) walks it through
`forward.layer_outputs` and gives the outputs `forward.forward` gives."""
import jax
import numpy as np
import pytest

from actorq.components import networks
from actorq.quantization import bias_correction
from actorq.quantization import error_compensation as ec
from actorq.quantization import forward
from actorq.quantization import mixed
from actorq.quantization import network_spec as ns
from actorq.quantization import payload as pl
from actorq.quantization import ptq
from actorq.quantization.runtimes import litert_runtime

SPECS = {
    "mlp": ns.mlp(4, (16, 16), 3, output_activation="tanh"),
    "cnn": ns.NetworkSpec((9, 9, 2), (ns.Conv2D("conv_0", 4, 3, 2), ns.Flatten("flatten"),
                                      ns.Dense("dense_0", 8), ns.Dense("dense_1", 3, "none")),
                          input_scale=0.5),
}


def _params_and_observations(spec):
  rng = np.random.default_rng(0)
  params = {n: {k: rng.normal(0.1, 0.5, s).astype(np.float32) for k, s in shp.items()}
            for n, shp in pl.expected_shapes(spec).items()}
  obs = rng.normal(0.0, 1.0, (12,) + tuple(spec.input_shape)).astype(np.float32)
  return params, obs


def _paths(spec, params, obs):
  """name -> outputs [B, output_size] of each path, each set up so that it computes the
  float network (nothing quantized, nothing to correct)."""
  float_layers = tuple(l.name for l in spec.parameter_layers)
  out = {
      "haiku": networks.haiku_network(spec).apply(params, obs),
      "calibration": ptq.layer_activations(params, spec, obs)[spec.layers[-1].name],
      "litert_reference": litert_runtime.dynamic_range_reference(params, spec, obs,
                                                                 float_layers),
  }
  # Bias correction of the float network by itself: every shift is 0, the biases stay.
  biases = bias_correction.corrected_biases(params, params, spec, obs)
  corrected = {n: {"w": params[n]["w"], "b": biases[n]} for n in params}
  out["bias_correction"] = forward.forward(corrected, spec, obs)
  if all(isinstance(l, ns.Dense) for l in spec.layers):
    # Error compensation over fp32 layers (no integer layer to re-round) keeps them.
    fp32 = mixed.PrecisionPolicy.uniform(spec, mixed.LayerChoice("fp32"))
    layers = ec.compensated_layers(params, mixed.compress(params, spec, fp32), spec, obs)
    dequantized = {n: {"w": layers[n].dequantized(), "b": np.asarray(layers[n].b)}
                   for n in params}
    out["error_compensation"] = forward.forward(dequantized, spec, obs)
  return out


@pytest.mark.parametrize("name", sorted(SPECS))
def test_every_path_gives_the_forward_outputs(name):
  spec = SPECS[name]
  params, obs = _params_and_observations(spec)
  want = np.asarray(forward.forward(params, spec, obs))
  assert want.shape == (12, 3) and np.all(np.isfinite(want))
  for path, got in _paths(spec, params, obs).items():
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-5, err_msg=path)


@pytest.mark.parametrize("name", sorted(SPECS))
def test_every_path_walks_the_spec_through_the_one_forward_pass(name, monkeypatch):
  spec = SPECS[name]
  params, obs = _params_and_observations(spec)
  walked = []
  original = forward.layer_outputs

  def spy(layers, x, layer_fn):
    walked.append([l.name for l in layers])
    return original(layers, x, layer_fn)

  monkeypatch.setattr(forward, "layer_outputs", spy)
  _paths(spec, params, obs)
  names = [l.name for l in spec.layers]
  # haiku, calibration, LiteRT reference: one walk each; bias correction: the float and
  # the corrected network, then forward; error compensation: its walk, then forward.
  expected = 3 + 3 + (2 if name == "mlp" else 0)
  assert walked.count(names) == expected
  walked.clear()
  jax.jit(lambda o: forward.forward(params, spec, o))(obs)
  forward.first_non_finite_layer(params, spec, obs)
  assert walked == [names, names]


def test_activations_and_layer_arithmetic_agree_in_numpy_and_jax():
  y = np.linspace(-3, 3, 13, dtype=np.float32).reshape(1, 13)
  for activation in forward.ACTIVATIONS:
    layer = ns.Dense("d", 13, activation)
    np.testing.assert_allclose(forward.activate(layer, y),
                               np.asarray(forward.activate(layer, jax.numpy.asarray(y))),
                               rtol=1e-6, atol=1e-7)
  assert isinstance(forward.activate(ns.Dense("d", 13, "relu"), y), np.ndarray)
  assert set(forward.ACTIVATIONS) == set(ns.ACTIVATIONS)
