"""Empirical bias correction of int8 payloads (issue 39): the corrected network's mean
pre-activation over the calibration set equals the float network's, layer by layer."""
import collections

import numpy as np
import pytest

from actorq.components.acting import variable_client as vc
from actorq.quantization import bias_correction as bc
from actorq.quantization import forward
from actorq.quantization import network_spec as ns
from actorq.quantization import payload as pl


def _params(spec, seed=0, mean=0.3):
  rng = np.random.default_rng(seed)
  return {n: {k: rng.normal(mean, 0.5, s).astype(np.float32) for k, s in shp.items()}
          for n, shp in pl.expected_shapes(spec).items()}


def _outputs(params, spec, obs):
  return np.asarray(forward.forward(params, spec, obs), np.float64)


def test_one_dense_layer_matches_the_hand_computed_correction():
  spec = ns.NetworkSpec((2,), (ns.Dense("out", 1, "none"),))
  params = {"out": {"w": np.array([[0.5], [0.25]], np.float32), "b": np.array([1.0], np.float32)}}
  quantized = {"out": {"w": np.array([[0.6], [0.2]], np.float32), "b": np.array([1.0], np.float32)}}
  obs = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)  # mean [2, 3]
  # b' = b - mean(x) (W_q - W) = 1 - (2 * 0.1 + 3 * -0.05) = 0.95
  np.testing.assert_allclose(bc.corrected_biases(params, quantized, spec, obs)["out"], [0.95],
                             rtol=1e-6)


def test_corrected_int8_mlp_has_no_mean_output_error_on_its_calibration_set():
  spec = ns.mlp(4, (32, 32), 3)
  params = _params(spec)
  obs = np.random.default_rng(1).normal(1.0, 1.0, (100, 4)).astype(np.float32)
  payload = pl.make_payload(params, spec, "int8", 7)
  corrected = bc.correct_payload(payload, params, spec, obs)
  before = (_outputs(pl.dequantize_payload(payload), spec, obs) - _outputs(params, spec, obs))
  after = (_outputs(pl.dequantize_payload(corrected), spec, obs) - _outputs(params, spec, obs))
  assert np.abs(before.mean(0)).min() > 1e-2  # the rounding offset is real ...
  np.testing.assert_allclose(after.mean(0), 0.0, atol=1e-4)  # ... and gone
  # Only biases change: the int8 weights and scales are the same arrays, the bytes equal.
  for name, layer in payload.layers.items():
    assert corrected.layers[name]["w"] is layer["w"]
    assert corrected.layers[name]["scale"] is layer["scale"]
  assert (corrected.precision, corrected.version, corrected.nbytes) == ("int8", 7, payload.nbytes)
  # Correcting a corrected payload again changes nothing (its mean error is already 0).
  again = bc.correct_payload(corrected, params, spec, obs)
  for name in payload.layers:
    np.testing.assert_allclose(again.layers[name]["b"], corrected.layers[name]["b"], atol=1e-4)


def test_convolutions_are_corrected_per_channel_over_batch_and_positions():
  spec = ns.NetworkSpec((6, 6, 2), (ns.Conv2D("conv", 4, 3, 1), ns.Flatten(),
                                    ns.Dense("out", 2, "none")))
  params = _params(spec, seed=3)
  obs = np.random.default_rng(4).uniform(0, 1, (20, 6, 6, 2)).astype(np.float32)
  corrected = bc.correct_payload(pl.make_payload(params, spec, "int8", 0), params, spec, obs)
  err = _outputs(pl.dequantize_payload(corrected), spec, obs) - _outputs(params, spec, obs)
  np.testing.assert_allclose(err.mean(0), 0.0, atol=1e-4)
  assert corrected.layers["conv"]["b"].shape == (4,)


def test_a_float_payload_is_returned_unchanged():
  spec = ns.mlp(4, (8,), 2)
  params = _params(spec)
  payload = pl.make_payload(params, spec, "fp32", 0)
  assert bc.correct_payload(payload, params, spec, np.ones((3, 4), np.float32)) is payload


def test_bad_calibration_input_is_refused():
  spec = ns.mlp(4, (8,), 2)
  params = _params(spec)
  quantized = pl.dequantize_payload(pl.make_payload(params, spec, "int8", 0))
  with pytest.raises(ValueError, match=r"shape \(3, 5\); allowed: \[N >= 1, 4\]"):
    bc.corrected_biases(params, quantized, spec, np.ones((3, 5), np.float32))
  with pytest.raises(ValueError, match="allowed: >= 1"):
    bc.ObservationTap(iter([]), (4,), size=0)


Transition = collections.namedtuple("Transition", "observation action")
Sample = collections.namedtuple("Sample", "info data")


def test_the_tap_passes_samples_through_and_keeps_the_newest_observations():
  samples = [Sample(i, Transition(np.full((5, 4), i, np.float32), np.zeros(5)))
             for i in range(3)] + [Sample(9, {"no": "observation"})]
  tap = bc.ObservationTap(iter(samples), (4,), size=3)
  assert tap.observations() is None
  got = [next(tap) for _ in range(4)]
  assert [s.info for s in got] == [0, 1, 2, 9]  # unchanged, in order
  np.testing.assert_array_equal(tap.observations(), np.full((3, 4), 2, np.float32))
  # Sequences [B, T, ...] (R2D2-style steps) give rows too.
  seq = Sample(0, Transition(np.arange(24, dtype=np.float32).reshape(2, 3, 4), None))
  assert bc.observations_of(seq, (4,)).shape == (6, 4)
  assert bc.observations_of(seq, (5,)) is None


def test_the_policy_server_corrects_int8_payloads_on_its_calibration_source():
  spec = ns.mlp(4, (16,), 2)
  params = _params(spec)
  obs = np.random.default_rng(2).normal(0.5, 1.0, (64, 4)).astype(np.float32)

  class Learner:
    def get_variables(self, names):
      return [{"policy": params, "version": 3}[n] for n in names]

  plain = vc.PolicyServer(Learner(), spec).get_variables(["policy/int8"])[0]
  served = vc.PolicyServer(Learner(), spec, calibration=lambda: obs)
  got = served.get_variables(["policy/int8"])[0]
  want = bc.correct_payload(plain, params, spec, obs)
  for name in plain.layers:
    np.testing.assert_array_equal(got.layers[name]["b"], want.layers[name]["b"])
    np.testing.assert_array_equal(got.layers[name]["w"], plain.layers[name]["w"])
  assert not np.array_equal(got.layers["dense_0"]["b"], plain.layers["dense_0"]["b"])
  # fp32 is served as before, and no calibration yet means no correction.
  fp32 = served.get_variables(["policy/fp32"])[0]
  np.testing.assert_array_equal(fp32.layers["dense_0"]["b"], params["dense_0"]["b"])
  early = vc.PolicyServer(Learner(), spec, calibration=lambda: None)
  np.testing.assert_array_equal(early.get_variables(["policy/int8"])[0].layers["dense_0"]["b"],
                                plain.layers["dense_0"]["b"])
