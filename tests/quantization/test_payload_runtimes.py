"""Payloads and policy runtimes: bytes, parity with dequantize + forward, load errors,
case Q4 (a slower int8 path is never chosen silently; no test asserts a speedup)."""
import warnings

import numpy as np
import pytest

from actorq.quantization import forward
from actorq.quantization import network_spec as ns
from actorq.quantization import payload as pl
from actorq.quantization import runtimes
from actorq.quantization.runtimes import litert_runtime

MLP = ns.mlp(24, [64, 64], 6)
SMALL = ns.mlp(32, [64, 64], 4)  # case Q4's network
CNN = ns.nature_cnn((36, 36, 4), 5)  # Nature CNN layers on a smaller frame (fast test)


def random_params(spec, seed=0):
  rng = np.random.default_rng(seed)
  out = {}
  for n, shp in pl.expected_shapes(spec).items():
    fan_in = int(np.prod(shp["w"][:-1]))
    out[n] = {"w": rng.normal(0, 1 / np.sqrt(fan_in), shp["w"]).astype(np.float32),
              "b": rng.normal(0, 0.1, shp["b"]).astype(np.float32)}
  return out


def observations(spec, batch, seed=1):
  rng = np.random.default_rng(seed)
  if len(spec.input_shape) == 3:
    return rng.integers(0, 256, (batch,) + spec.input_shape).astype(np.float32)
  return rng.normal(size=(batch,) + spec.input_shape).astype(np.float32)


@pytest.mark.parametrize("precision,ratio", [
    ("fp32", 1.0), ("fp16", 0.5), ("bf16", 0.5), ("int8", 0.27), ("simulated-int8", 0.27)])
def test_payload_nbytes(precision, ratio):
  spec = ns.mlp(24, [256, 256], 6)
  params = random_params(spec)
  fp32 = sum(a.nbytes for l in params.values() for a in l.values())
  p = pl.make_payload(params, spec, precision, version=3)
  assert p.version == 3 and p.precision == precision
  assert p.nbytes == sum(a.nbytes for l in p.layers.values() for a in l.values())
  if precision in ("fp32", "fp16", "bf16"):
    assert p.nbytes == pytest.approx(ratio * fp32)
  else:
    assert p.nbytes <= ratio * fp32
    w = p.layers["dense_1"]
    assert w["w"].dtype == np.int8 and w["scale"].shape == (256,) and "zero_point" not in w
    pt = pl.make_payload(params, spec, precision, 3, per_channel=False)
    assert pt.layers["dense_1"]["scale"].shape == () and pt.nbytes < p.nbytes


def test_make_payload_errors_name_layer():
  params = random_params(MLP)
  bad = dict(params, dense_1={"w": np.zeros((64, 65), np.float32), "b": np.zeros(65, np.float32)})
  with pytest.raises(ValueError, match=r"layer 'dense_1'.*\(64, 65\).*\(64, 64\)"):
    pl.make_payload(bad, MLP, "int8", 0)
  params["dense_2"]["w"][3, 1] = np.inf
  for prec in ("int8", "fp32"):
    with pytest.raises(ValueError, match=r"layer 'dense_2'.*non-finite"):
      pl.make_payload(params, MLP, prec, 0)
  with pytest.raises(ValueError, match="allowed"):
    pl.make_payload(random_params(MLP), MLP, "int4", 0)


@pytest.mark.parametrize("precision,atol", [("fp32", 1e-5), ("fp16", 3e-2), ("bf16", 1e-1),
                                            ("simulated-int8", 1e-5)])
def test_jax_runtimes_match_forward(precision, atol):
  params = random_params(MLP)
  rt = runtimes.make_runtime(precision, MLP)
  assert rt.version == -1
  p = pl.make_payload(params, MLP, rt.payload_precision, version=5)
  rt.load(p)
  assert rt.version == 5 and rt.timings["loads"] == 1
  obs = observations(MLP, 4)
  out = rt(obs)
  ref = np.asarray(forward.forward(pl.dequantize_payload(p), MLP, obs))
  assert out.shape == (4, 6) and out.dtype == np.float32
  np.testing.assert_allclose(out, ref, atol=atol * max(1.0, np.abs(ref).max()))


@pytest.mark.parametrize("precision", ["fp32", "fp16", "bf16", "simulated-int8"])
@pytest.mark.parametrize("spec", [MLP, CNN], ids=["mlp", "cnn"])
def test_jax_runtime_holds_exactly_the_payload_after_its_one_transfer_load(precision, spec):
  """The flat-buffer load (one transfer, split on the device) is bit-identical to the
  payload's arrays, of every layer and both versions loaded, on the runtime's device."""
  rt = runtimes.make_runtime(precision, spec)
  for version, seed in ((1, 0), (2, 1)):
    p = pl.make_payload(random_params(spec, seed), spec, rt.payload_precision, version)
    rt.load(p)
    want = rt._to_device(p)
    assert set(rt._params) == set(want)
    for name, layer in want.items():
      for key in ("w", "b"):
        got = rt._params[name][key]
        assert got.dtype == layer[key].dtype and got.shape == layer[key].shape
        np.testing.assert_array_equal(np.asarray(got), layer[key])
    assert rt.devices() == (str(rt.device),)


@pytest.mark.parametrize("spec", [MLP, SMALL, CNN], ids=["mlp", "q4_mlp", "cnn"])
@pytest.mark.parametrize("per_channel", [True, False])
def test_int8_runtime_matches_dequantized_forward(spec, per_channel):
  params = random_params(spec)
  rt = runtimes.make_runtime("int8", spec, num_threads=1)
  assert rt.precision == "int8" and rt.payload_precision == "int8"
  for version, batch in ((0, 1), (1, 8), (2, 1)):
    params = {n: {k: a * (1 + 0.1 * version) for k, a in l.items()} for n, l in params.items()}
    p = pl.make_payload(params, spec, "int8", version, per_channel=per_channel)
    rt.load(p)
    assert rt.version == version
    obs = observations(spec, batch, seed=version)
    out = rt(obs)
    ref = np.asarray(forward.forward(pl.dequantize_payload(p), spec, obs))
    assert out.shape == (batch, spec.output_size) and out.dtype == np.float32
    # Tight: the kernels' semantics (int8 weights + per-row dynamic int8 activations).
    exact = litert_runtime.dynamic_range_reference(pl.dequantize_payload(p), spec, obs)
    np.testing.assert_allclose(out, exact, atol=1e-5 * max(1.0, np.abs(ref).max()), rtol=0)
    # Loose: vs dequantize + fp32 forward, the only difference is activation quantization.
    np.testing.assert_allclose(out, ref, atol=0.05 * np.abs(ref).max(), rtol=0)
  assert rt.timings["loads"] == 3 and rt.timings["last_load_ms"] > 0


def test_int8_runtime_patches_every_version():
  """A new version really changes the executed weights (no stale template)."""
  params = random_params(MLP)
  rt = runtimes.make_runtime("int8", MLP)
  obs = observations(MLP, 2)
  rt.load(pl.make_payload(params, MLP, "int8", 0))
  a = rt(obs)
  params["dense_2"]["b"] += 1.0
  rt.load(pl.make_payload(params, MLP, "int8", 1))
  np.testing.assert_allclose(rt(obs) - a, 1.0, atol=1e-4)
  # a second runtime of the same spec shares the template, not the weights
  rt2 = runtimes.make_runtime("int8", MLP)
  rt2.load(pl.make_payload(random_params(MLP, seed=3), MLP, "int8", 0))
  np.testing.assert_allclose(rt(obs) - a, 1.0, atol=1e-4)


@pytest.mark.parametrize("precision", ["int8", "fp32", "simulated-int8"])
def test_load_mismatch_names_layer(precision):
  rt = runtimes.make_runtime(precision, MLP)
  other = ns.mlp(24, [64, 32], 6)
  p = pl.make_payload(random_params(other), other, rt.payload_precision, 0)
  with pytest.raises(ValueError, match=r"layer 'dense_1'.*\(64, 32\).*\(64, 64\)"):
    rt.load(p)
  renamed = ns.mlp(24, [64, 64], 6, prefix="fc")
  with pytest.raises(ValueError, match=r"missing layers \['dense_0'"):
    rt.load(pl.make_payload(random_params(renamed), renamed, rt.payload_precision, 0))
  assert rt.version == -1
  with pytest.raises(RuntimeError, match="load"):
    rt(observations(MLP, 1))


def test_load_wrong_precision_and_observation_shape():
  rt = runtimes.make_runtime("int8", MLP)
  with pytest.raises(ValueError, match="precision 'fp32'.*allowed"):
    rt.load(pl.make_payload(random_params(MLP), MLP, "fp32", 0))
  rt.load(pl.make_payload(random_params(MLP), MLP, "int8", 0))
  with pytest.raises(ValueError, match=r"observation shape \(2, 23\)"):
    rt(np.zeros((2, 23), np.float32))
  with pytest.raises(ValueError, match="allowed"):
    runtimes.make_runtime("int4", MLP)


def test_q4_slower_path_is_not_chosen_silently(monkeypatch):
  # Real measurement: whichever is faster is chosen; if int8 is slower a warning is issued.
  with warnings.catch_warnings(record=True) as rec:
    warnings.simplefilter("always")
    chosen, info = runtimes.choose_runtime(SMALL, batch_size=1, repeats=5)
  assert set(info) == {"int8_us", "fp32_us", "ratio"}
  slower = info["int8_us"] > info["fp32_us"]
  assert chosen == ("fp32" if slower else "int8")
  assert any(issubclass(w.category, RuntimeWarning) for w in rec) == slower
  # Forced slow int8: warns once, chooses fp32.
  calls = iter([100.0, 10.0, 100.0, 10.0])
  monkeypatch.setattr(runtimes, "median_latency_us", lambda *a, **k: next(calls))
  spec = ns.mlp(8, [8], 2)
  with warnings.catch_warnings(record=True) as rec:
    warnings.simplefilter("always")
    assert runtimes.choose_runtime(spec, 1)[0] == "fp32"
    assert runtimes.choose_runtime(spec, 1)[0] == "fp32"
  msgs = [str(w.message) for w in rec if issubclass(w.category, RuntimeWarning)]
  assert len(msgs) == 1 and "slower" in msgs[0] and "ratio 10.00" in msgs[0]
