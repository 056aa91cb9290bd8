"""PTQ (case Q2), calibration, QAT and pruning."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from actorq.quantization import calibration
from actorq.quantization import forward
from actorq.quantization import network_spec as ns
from actorq.quantization import payload as pl
from actorq.quantization import pruning
from actorq.quantization import ptq
from actorq.quantization import qat


def random_params(spec, seed=0):
  rng = np.random.default_rng(seed)
  return {n: {k: rng.normal(0, 0.1, s).astype(np.float32) for k, s in shp.items()}
          for n, shp in pl.expected_shapes(spec).items()}


def q2_matrix():
  rng = np.random.default_rng(0)
  w = np.zeros((3, 256), np.float32)
  w[0] = rng.uniform(0.5e-3, 1.5e-3, 256) * rng.choice([-1, 1], 256)
  w[1] = rng.uniform(5.0, 15.0, 256) * rng.choice([-1, 1], 256)
  return w


def test_q2_per_channel_vs_per_tensor():
  w = q2_matrix()
  q, s, z = ptq.quantize_array(w, 8, True, axis=0)
  w_hat = ptq.dequantize_array(q, s, z, 0)
  rel = ptq.channel_errors(w, w_hat, 0)
  assert rel[0] < 0.01 and rel[1] < 0.01
  np.testing.assert_array_equal(w_hat[2], 0.0)
  rep = ptq.granularity_report(w, 8, axis=0)
  assert rep["per_channel"]["flushed_channels"] == []
  assert rep["per_tensor"]["flushed_channels"] == [0]
  assert rep["per_tensor"]["channel_rel_error"][0] > 0.9  # flushed to ~0
  qt, st, zt = ptq.quantize_array(w, 8, True, None)
  assert np.abs(ptq.dequantize_array(qt, st, zt)[0]).max() < 1e-3 * 0.5 or \
      np.mean(ptq.dequantize_array(qt, st, zt)[0] == 0) > 0.9


def test_quantize_params_policy_and_reports():
  spec = ns.mlp(8, [16, 16], 4)
  params = random_params(spec)
  policy = ptq.QuantPolicy(ptq.LayerPolicy(8), {
      "dense_0": ptq.LayerPolicy(4, per_channel=False, symmetric=False),
      "dense_2": ptq.LayerPolicy(keep_fp32=True)})
  qp = ptq.quantize_params(params, policy, version=7)
  assert qp.version == 7
  l0, l1, l2 = (qp.layers[f"dense_{i}"] for i in range(3))
  assert l0.w_q.dtype == np.int8 and l0.w_q.min() >= -8 and l0.w_q.max() <= 7
  assert l0.scale.shape == () and l1.scale.shape == (16,) and l2.w_q is None
  assert l1.b.dtype == np.float32 and l1.zero_point.dtype == np.int32
  expected = (l0.w_q.nbytes + 4 + 4 + 16 * 4) + (256 + 64 + 64) + (16 * 4 * 4 + 16)
  assert qp.nbytes == expected
  deq = ptq.dequantize_params(qp)
  np.testing.assert_array_equal(deq["dense_2"]["w"], params["dense_2"]["w"])
  np.testing.assert_allclose(deq["dense_1"]["w"], params["dense_1"]["w"],
                             atol=float(l1.scale.max()) / 2 + 1e-7)
  size = ptq.size_report(params, qp)
  assert size["quantized_bytes"] == qp.nbytes and size["ratio"] < 1
  err = ptq.error_report(params, qp)
  assert err["dense_2"] == {"kept_fp32": True}
  assert err["dense_1"]["granularity"] == "per_channel" and err["dense_1"]["max_rel_error"] < 0.02


def test_quantize_params_errors_name_layer():
  spec = ns.mlp(4, [8], 2)
  params = random_params(spec)
  params["dense_1"]["w"][0, 0] = np.nan
  with pytest.raises(ValueError, match=r"layer 'dense_1'.*non-finite"):
    ptq.quantize_params(params)
  params = random_params(spec)
  with pytest.raises(ValueError, match=r"layer 'dense_0'.*bits=9"):
    ptq.quantize_params(params, ptq.QuantPolicy(overrides={"dense_0": ptq.LayerPolicy(9)}))
  params["dense_0"]["w"] = np.zeros((0, 8), np.float32)
  with pytest.raises(ValueError, match=r"layer 'dense_0'.*empty"):
    ptq.quantize_params(params)


def test_observers():
  data = [np.array([0.0, 1.0, -2.0]), np.array([3.0, -1.0, 0.5])]
  mm = calibration.MinMaxObserver()
  st = mm.init()
  for d in data:
    st = jax.jit(mm.update)(st, d)
  assert float(st.min) == -2.0 and float(st.max) == 3.0
  ema = calibration.MovingAverageMinMaxObserver(momentum=0.5)
  st = ema.init()
  for d in data:
    st = ema.update(st, d)
  np.testing.assert_allclose([float(st.min), float(st.max)], [-1.5, 2.0])
  pc = calibration.PercentileObserver(percentile=90.0, axis=0)
  st = pc.update(pc.init(2), np.stack([np.arange(101.0), -np.arange(101.0)]))
  np.testing.assert_allclose(np.asarray(st.max), [90.0, -10.0])
  scale, zp = mm.qparams(mm.init(), 8, False)  # unobserved -> degenerate but finite
  assert float(scale) > 0 and -128 <= int(zp) <= 127


def test_calibrate_activations():
  spec = ns.mlp(4, [8], 2)
  params = random_params(spec)
  batches = [np.random.default_rng(i).normal(size=(16, 4)).astype(np.float32) for i in range(3)]
  rep = ptq.calibrate_activations(params, spec, batches, observer="minmax")
  assert set(rep) == {"input", "dense_0", "dense_1"}
  assert rep["dense_0"]["min"] >= 0.0  # relu
  assert rep["input"]["max"] == pytest.approx(max(b.max() for b in batches))
  with pytest.raises(ValueError, match="no batches"):
    ptq.calibrate_activations(params, spec, [])


def test_qat_fake_quant_params_gradients():
  spec = ns.mlp(6, [32], 3)
  params = jax.tree_util.tree_map(jnp.asarray, random_params(spec))
  obs = jnp.ones((5, 6))

  def loss(p):
    return jnp.sum(forward.forward(qat.fake_quant_params(p, 8), spec, obs) ** 2)

  g = jax.jit(jax.grad(loss))(params)
  g_ref = jax.grad(lambda p: jnp.sum(forward.forward(p, spec, obs) ** 2))(
      qat.fake_quant_params(params, 8))
  # STE: gradient w.r.t. the float weights equals the gradient at the fake-quant point.
  for n in params:
    np.testing.assert_allclose(g[n]["w"], g_ref[n]["w"], rtol=1e-5, atol=1e-6)
  fq = qat.fake_quant_params(params, 4, per_channel=False)["dense_0"]["w"]
  assert len(np.unique(np.asarray(fq))) <= 15
  a = qat.fake_quant_activation(jnp.linspace(-2, 2, 9), 8, jnp.float32(-1), jnp.float32(1))
  assert float(a.min()) >= -1.0 - 1e-6 and float(a.max()) <= 1.0 + 1e-2


@pytest.mark.parametrize("scope", ["layer", "global"])
def test_pruning(scope):
  spec = ns.mlp(10, [20, 20], 4)
  params = random_params(spec)
  masks = pruning.magnitude_masks(params, 0.75, scope)
  pruned = pruning.apply_masks(params, masks)
  assert pruning.sparsity(pruned) == pytest.approx(0.75, abs=0.01)
  if scope == "layer":
    for n in params:
      assert float(np.mean(np.asarray(pruned[n]["w"]) == 0)) == pytest.approx(0.75, abs=0.02)
  # the kept weights are the largest ones
  kept = np.abs(np.asarray(pruned["dense_1"]["w"]))
  dropped = np.abs(params["dense_1"]["w"])[np.asarray(masks["dense_1"]["w"]) == 0]
  if scope == "layer":
    assert kept[kept > 0].min() >= dropped.max()
  # masks persist through a (jitted) training step
  step = jax.jit(lambda p: pruning.apply_masks(
      jax.tree_util.tree_map(lambda x: x + 1.0, p), masks))
  after = step(pruned)
  assert pruning.sparsity(after) == pytest.approx(0.75, abs=0.01)
  np.testing.assert_array_equal(np.asarray(after["dense_0"]["b"]), params["dense_0"]["b"] + 1)
  with pytest.raises(ValueError, match="sparsity"):
    pruning.magnitude_masks(params, 1.0)
  assert float(pruning.polynomial_sparsity(100, 0.8, 0, 100)) == pytest.approx(0.8)
  assert float(pruning.polynomial_sparsity(0, 0.8, 0, 100)) == pytest.approx(0.0)
