"""Per-layer precision policies (quantization/mixed.py), the LiteRT mixed runtime, and
QAT's forward against the PTQ path the sweep evaluates with."""
import json

import jax
import numpy as np
import pytest

from actorq.quantization import mixed
from actorq.quantization import network_spec as ns
from actorq.quantization import payload as pl
from actorq.quantization import qat
from actorq.quantization import runtimes
from actorq.quantization.runtimes import litert_runtime


def random_params(spec, seed=0, std=0.2):
  rng = np.random.default_rng(seed)
  return {n: {k: rng.normal(0, std, s).astype(np.float32) for k, s in shp.items()}
          for n, shp in pl.expected_shapes(spec).items()}


@pytest.mark.parametrize("text,kind,bits,per_channel,sparsity", [
    ("fp32", "fp32", 32, True, 0.0), ("fp16", "fp16", 16, True, 0.0),
    ("int4", "int", 4, True, 0.0), ("int3/tensor", "int", 3, False, 0.0),
    ("int8+p0.9", "int", 8, True, 0.9), ("int2/tensor+p0.5", "int", 2, False, 0.5),
    ("fp16+p0.5", "fp16", 16, True, 0.5)])
def test_parse_choice_and_label_round_trip(text, kind, bits, per_channel, sparsity):
  c = mixed.parse_choice(text)
  assert (c.kind, c.bits, c.per_channel, c.sparsity) == (kind, bits, per_channel, sparsity)
  assert mixed.parse_choice(c.label) == c


@pytest.mark.parametrize("text", ["int9", "int1", "fp8", "int4+p1.0", "int4+p-1", "", "int4/row"])
def test_parse_choice_rejects(text):
  with pytest.raises(ValueError, match="precision choice|sparsity"):
    mixed.parse_choice(text)


def test_storage_bytes_packed_and_bitmask():
  """The documented formulas on a [10, 4] layer: 3-bit dense packs 40 values into 15
  bytes; 8-bit at sparsity 0.9 is a 5-byte mask plus 4 one-byte values."""
  rng = np.random.default_rng(0)
  w = rng.uniform(0.5, 1.0, (10, 4)).astype(np.float32) * rng.choice([-1, 1], (10, 4))
  b = np.zeros(4, np.float32)
  l3 = mixed.compress_layer(w, b, mixed.parse_choice("int3"))
  assert l3.nonzero_weights == 40  # |w| >= max/2: no value rounds to 0 at 3 bits
  assert l3.storage == {"format": "dense", "weight_bytes": 15, "scale_bytes": 16,
                        "bias_bytes": 16, "bytes": 47}
  l8 = mixed.compress_layer(w, b, mixed.parse_choice("int8/tensor+p0.9"))
  assert l8.nonzero_weights == 4  # round(0.9 * 40) = 36 pruned
  assert l8.storage == {"format": "bitmask", "weight_bytes": 5 + 4, "scale_bytes": 4,
                        "bias_bytes": 16, "bytes": 29}
  assert l8.runtime_bytes == 40 + 4 + 16  # LiteRT holds the int8 tensor, not the bitmask
  dense8 = mixed.compress_layer(w, b, mixed.parse_choice("int8/tensor"))
  assert dense8.storage["bytes"] == 40 + 4 + 16
  f16 = mixed.compress_layer(w, b, mixed.parse_choice("fp16"))
  assert f16.storage["bytes"] == 80 + 8 and f16.values.dtype == np.float16
  # Pruning keeps the largest magnitudes and quantization keeps zeros at exactly 0.
  kept = np.abs(w).reshape(-1) >= np.sort(np.abs(w).reshape(-1))[-4]
  np.testing.assert_array_equal(l8.dequantized().reshape(-1) != 0, kept)


@pytest.mark.parametrize("bits", [2, 3, 4, 8])
@pytest.mark.parametrize("per_channel", [True, False])
def test_qat_forward_equals_the_sweeps_ptq_bit_for_bit(bits, per_channel):
  """`qat.fake_quant_params` (eager and jitted, as the learner runs it) gives the same
  float32 weights as the sweep's int<b> setting (`mixed.compress` -> dequantize)."""
  spec = ns.mlp(4, [16, 16], 2)
  fq = jax.jit(lambda p: qat.fake_quant_params(p, bits, per_channel))
  for seed in range(3):
    params = random_params(spec, seed, std=[0.05, 0.7, 3.0][seed])
    policy = mixed.PrecisionPolicy.uniform(spec, mixed.LayerChoice("int", bits, per_channel))
    sim = mixed.simulated_params(mixed.compress(params, spec, policy))
    eager = qat.fake_quant_params(params, bits, per_channel)
    jitted = fq(params)
    for name in params:
      np.testing.assert_array_equal(np.asarray(eager[name]["w"]), sim[name]["w"])
      np.testing.assert_array_equal(np.asarray(jitted[name]["w"]), sim[name]["w"])


def test_policy_file_round_trip_and_errors(tmp_path):
  spec = ns.mlp(4, [8], 2)
  policy = mixed.PrecisionPolicy((("dense_0", mixed.parse_choice("fp16")),
                                  ("dense_1", mixed.parse_choice("int4+p0.5"))))
  path = tmp_path / "policy.json"
  mixed.save(str(path), policy, spec, notes={"dense_1": {"why": "cheap"}}, search={"x": 1})
  data = json.loads(path.read_text())
  assert data["format"] == mixed.FORMAT and data["format_version"] == 1
  assert [l["choice"] for l in data["layers"]] == ["fp16", "int4+p0.5"]
  assert data["layers"][1]["why"] == "cheap" and data["layers"][1]["w_shape"] == [8, 2]
  assert data["execution"]["float_layers"] == ["dense_0"] and data["search"] == {"x": 1}
  assert mixed.load(str(path), spec) == policy
  with pytest.raises(ValueError, match="do not match the network"):
    mixed.load(str(path), ns.mlp(4, [8, 8], 2))
  data["layers"][0]["w_shape"] = [5, 8]
  with pytest.raises(ValueError, match="w_shape"):
    mixed.from_json_dict(data, spec)
  with pytest.raises(ValueError, match="format_version"):
    mixed.from_json_dict(dict(data, format_version=2))
  with pytest.raises(ValueError, match="not an actorq precision policy"):
    mixed.from_json_dict({"layers": []})


def test_litert_mixed_runtime_matches_its_reference():
  """Float layers run float32 kernels on unquantized inputs, integer layers (any width,
  pruned or not) the dynamic-range int8 kernels; all-int8 equals the int8 runtime."""
  spec = ns.mlp(6, [32, 32], 3)
  params = random_params(spec)
  obs = np.random.default_rng(1).normal(size=(7, 6)).astype(np.float32)
  policy = mixed.PrecisionPolicy((("dense_0", mixed.parse_choice("fp32")),
                                  ("dense_1", mixed.parse_choice("int3+p0.5")),
                                  ("dense_2", mixed.parse_choice("fp16"))))
  rt = runtimes.make_mixed_runtime(policy, spec)
  rt.load(mixed.make_payload(params, spec, policy, version=4))
  sim = mixed.simulated_params(mixed.compress(params, spec, policy))
  want = litert_runtime.dynamic_range_reference(sim, spec, obs, policy.float_layers)
  np.testing.assert_allclose(rt(obs), want, atol=1e-5)
  assert rt.version == 4 and rt.precision == "mixed"
  int8 = mixed.PrecisionPolicy.uniform(spec, mixed.parse_choice("int8"))
  a = runtimes.make_mixed_runtime(int8, spec)
  a.load(mixed.make_payload(params, spec, int8))
  b = runtimes.make_runtime("int8", spec)
  b.load(pl.make_payload(params, spec, "int8", 0))
  np.testing.assert_array_equal(a(obs), b(obs))
  with pytest.raises(ValueError, match="runs int8 kernels"):
    a.load(mixed.make_payload(params, spec, policy))


def test_precision_name_round_trip_and_errors():
  """A policy as an actor precision: "mixed:" + the labels in layer order, read back for
  the same network (a recurrent one's too); a wrong layer count or a bad label is refused."""
  spec = ns.mlp(4, [8, 8], 2)
  policy = mixed.PrecisionPolicy((("dense_0", mixed.parse_choice("fp16")),
                                  ("dense_1", mixed.parse_choice("int4/tensor+p0.5")),
                                  ("dense_2", mixed.parse_choice("int8"))))
  name = mixed.precision_name(policy)
  assert name == "mixed:fp16,int4/tensor+p0.5,int8"
  assert mixed.policy_of(name, spec) == policy
  assert [c.label for c in mixed.parse_precision_name("mixed: int2 ,fp32")] == ["int2", "fp32"]
  with pytest.raises(ValueError, match=r"gives 2 layer choice\(s\); the policy network has 3 "
                     r"parameter layers \(dense_0, dense_1, dense_2\)"):
    mixed.policy_of("mixed:fp16,int8", spec)
  with pytest.raises(ValueError, match="precision choice 'int9' not understood"):
    mixed.parse_precision_name("mixed:int9,int8")
  with pytest.raises(ValueError, match="empty layer choice"):
    mixed.parse_precision_name("mixed:int8,,int8")
  with pytest.raises(ValueError, match="not a per-layer policy"):
    mixed.parse_precision_name("int8")
  # A recurrent network's layers: torso, the LSTM's gate matmul, head.
  recurrent = ns.RecurrentSpec(ns.mlp(4, [8], 8), 8, ns.mlp(8, [], 2, prefix="head"))
  assert mixed.policy_of("mixed:int8,int4,int8,fp32", recurrent).names == (
      "dense_0", "dense_1", "lstm/linear", "head_0")
  with pytest.raises(ValueError, match=r"gives 2 layer choice\(s\); the policy network has 4 "
                     r"parameter layers \(dense_0, dense_1, lstm/linear, head_0\)"):
    mixed.policy_of("mixed:int8,int8", recurrent)


def test_make_runtime_of_a_mixed_name_executes_that_policy():
  """`runtimes.make_runtime("mixed:...")` is the policy's LiteRT mixed runtime, pulling
  by the name: same outputs as `make_mixed_runtime` of the parsed policy."""
  spec = ns.mlp(6, [32], 3)
  params = random_params(spec, seed=3)
  obs = np.random.default_rng(2).normal(size=(4, 6)).astype(np.float32)
  name = "mixed:fp16,int3+p0.5"
  rt = runtimes.make_runtime(name, spec)
  assert rt.payload_precision == name
  policy = mixed.policy_of(name, spec)
  rt.load(mixed.make_payload(params, spec, policy, version=2))
  sim = mixed.simulated_params(mixed.compress(params, spec, policy))
  np.testing.assert_allclose(
      rt(obs), litert_runtime.dynamic_range_reference(sim, spec, obs, ("dense_0",)), atol=1e-5)
  with pytest.raises(ValueError, match="gives 1 layer choice"):
    runtimes.make_runtime("mixed:int8", spec)
