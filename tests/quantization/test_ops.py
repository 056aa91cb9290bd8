"""Tests of quantization.ops: cases Q1 and Q3, jit/vmap, errors."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from actorq.quantization import ops
from actorq.quantization import ptq

CONST_CHANNEL = np.arange(12, dtype=np.float32).reshape(3, 4)
CONST_CHANNEL[:, 1] = 7.0


@pytest.mark.parametrize("symmetric", [True, False])
@pytest.mark.parametrize("x,axis", [
    (np.zeros((3, 4), np.float32), None), (np.zeros((3, 4), np.float32), 1),
    (np.full((3, 4), 0.5, np.float32), None), (np.full((3, 4), 0.5, np.float32), 0),
    (CONST_CHANNEL, None), (CONST_CHANNEL, 1)])
def test_q1_degenerate_ranges(x, axis, symmetric):
  qt = ops.quantize_tensor(x, 8, symmetric, axis)
  scale, zp = np.asarray(qt.scale), np.asarray(qt.zero_point)
  qmin, qmax = ops.qrange(8, symmetric)
  assert np.all(np.isfinite(scale)) and np.all(scale > 0)
  assert np.all((zp >= qmin) & (zp <= qmax))
  back = np.asarray(ops.dequantize_tensor(qt))
  assert np.all(np.isfinite(back))
  step = scale if axis is None else np.expand_dims(scale, [a for a in range(2) if a != axis])
  assert np.all(np.abs(back - x) <= step + 1e-7)
  if not x.any():
    np.testing.assert_array_equal(back, 0.0)
  # numpy twin (the PTQ hot path) agrees bit for bit.
  q2, s2, z2 = ptq.quantize_array(x, 8, symmetric, axis)
  np.testing.assert_array_equal(q2, np.asarray(qt.values))
  np.testing.assert_array_equal(s2, scale)
  np.testing.assert_array_equal(z2, zp)


def test_q3_straight_through_estimator():
  s, bits = 0.1, 8
  qmin, qmax = ops.qrange(bits, True)
  eps = 1e-3
  xs = jnp.array([qmin * s - eps, qmin * s, 0.0, qmax * s, qmax * s + eps], jnp.float32)
  scale = jnp.float32(s)
  grad = jax.vmap(jax.grad(lambda x: ops.fake_quant(x, scale, jnp.int32(0), bits)))(xs)
  np.testing.assert_array_equal(np.asarray(grad), [0.0, 1.0, 1.0, 1.0, 0.0])


def test_q3_saturates_monotonically():
  s = jnp.float32(0.1)
  x = jnp.linspace(-50.0, 50.0, 2001)
  y = np.asarray(ops.fake_quant(x, s, jnp.int32(0), 8))
  assert np.all(np.diff(y) >= 0)
  np.testing.assert_allclose(y.min(), -127 * 0.1, rtol=1e-6)
  np.testing.assert_allclose(y.max(), 127 * 0.1, rtol=1e-6)
  q = np.asarray(ops.quantize(jnp.array([1e9, -1e9]), s, jnp.int32(0), 8))
  np.testing.assert_array_equal(q, [127, -127])


def test_round_half_to_even_and_affine_range():
  q = ops.quantize(jnp.array([0.5, 1.5, 2.5, -0.5]), jnp.float32(1.0), jnp.int32(0), 8)
  np.testing.assert_array_equal(np.asarray(q), [0, 2, 2, 0])
  assert ops.qrange(8, False) == (-128, 127)
  assert ops.qrange(2, True) == (-1, 1)
  qt = ops.quantize_tensor(jnp.array([-1.0, 0.0, 3.0]), 4, symmetric=False)
  assert -8 <= int(qt.zero_point) <= 7
  np.testing.assert_allclose(np.asarray(ops.dequantize_tensor(qt))[1], 0.0, atol=0)


@pytest.mark.parametrize("bits", [2, 4, 8])
def test_error_within_half_step(bits):
  x = np.random.default_rng(0).normal(size=(5, 7)).astype(np.float32)
  qt = ops.quantize_tensor(x, bits, True, 0)
  err = np.abs(np.asarray(ops.dequantize_tensor(qt)) - x)
  assert np.all(err <= np.asarray(qt.scale)[:, None] / 2 + 1e-6)


def test_jit_and_vmap():
  x = jax.random.normal(jax.random.PRNGKey(0), (4, 6, 3))

  @jax.jit
  def f(x):
    qt = ops.quantize_tensor(x, 8, True, -1)
    return ops.dequantize_tensor(qt)

  np.testing.assert_allclose(f(x), ops.dequantize_tensor(ops.quantize_tensor(x, 8, True, -1)))
  batched = jax.vmap(lambda v: ops.fake_quant_tensor(v, 8, True, None))(x)
  for i in range(4):
    np.testing.assert_allclose(batched[i], ops.fake_quant_tensor(x[i], 8, True, None), atol=1e-6)
  g = jax.jit(jax.grad(lambda v: ops.fake_quant_tensor(v, 8, False, 1).sum()))(x)
  np.testing.assert_array_equal(np.asarray(g), 1.0)  # min-max range: all inside


@pytest.mark.parametrize("bits", [1, 9, 0, 2.5, True])
def test_bad_bits(bits):
  with pytest.raises(ValueError, match=r"bits=.*allowed: an int in 2\.\.8"):
    ops.quantize_tensor(np.ones(3), bits)


def test_bad_inputs():
  with pytest.raises(ValueError, match="empty"):
    ops.quantize_tensor(np.zeros((0, 3)))
  with pytest.raises(ValueError, match="non-finite"):
    ops.quantize_tensor(np.array([1.0, np.nan]))
  with pytest.raises(ValueError, match="non-finite"):
    ptq.quantize_array(np.array([[1.0, np.inf]]), axis=1, name="layer 'x'")
  with pytest.raises(ValueError, match="axis"):
    ops.quantize_tensor(np.ones((2, 2)), axis=3)


def test_casts():
  x = jnp.array([1.0 + 2 ** -12, 70000.0, 1e-3])
  assert ops.to_fp16(x).dtype == jnp.float16
  assert ops.to_bf16(x).dtype == jnp.bfloat16
  assert np.isinf(np.asarray(ops.roundtrip(x, jnp.float16))[1])
  np.testing.assert_allclose(np.asarray(ops.roundtrip(x, jnp.bfloat16)), x, rtol=2 ** -8)
  with pytest.raises(ValueError, match="allowed"):
    ops.cast(x, jnp.int8)
