"""The compiled launch's layers (`components.anakin.layers`) compute what the plain layers
compute: the im2col convolution equals Haiku's Conv2D and `lax.conv_general_dilated`,
the custom-VJP product's gradients equal autodiff's, and a network traced under
`layer_arithmetic` equals the plain network, values and gradients, on random inputs
(within float32 rounding: the products add in another order), vmapped over seeds too."""
import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from actorq.components import networks
from actorq.components.anakin import layers
from actorq.quantization import network_spec as ns

TOL = dict(rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape,kernel,stride,channels", [
    ((3, 10, 10, 4), 3, 1, 16),  # MinAtar's layer
    ((2, 12, 9, 3), 4, 2, 5),    # strided, non-square, a remainder row and column
])
def test_im2col_convolution_equals_haikus_conv2d(shape, kernel, stride, channels):
  x = jax.random.normal(jax.random.PRNGKey(0), shape)
  conv = hk.without_apply_rng(hk.transform(
      lambda x: hk.Conv2D(channels, kernel, stride=stride, padding="VALID")(x)))
  params = conv.init(jax.random.PRNGKey(1), x)
  w = params["conv2_d"]["w"]
  b = jax.random.normal(jax.random.PRNGKey(2), (channels,))  # Haiku's starts at 0
  expected = conv.apply({"conv2_d": {"w": w, "b": b}}, x)
  got = layers.conv2d(x, w, b, stride)
  assert got.shape == expected.shape
  np.testing.assert_allclose(got, expected, **TOL)
  # Under vmap over seeds (a kernel per seed): the case the layer exists for.
  ws = jnp.stack([w, 2.0 * w])
  xs = jnp.stack([x, -x])
  got = jax.vmap(lambda x, w: layers.conv2d(x, w, b, stride))(xs, ws)
  for i in range(2):
    want = jax.lax.conv_general_dilated(xs[i], ws[i], (stride, stride), "VALID",
                                        dimension_numbers=("NHWC", "HWIO", "NHWC")) + b
    np.testing.assert_allclose(got[i], want, **TOL)


def test_patches_refuse_what_is_not_an_image_or_smaller_than_the_kernel():
  with pytest.raises(ValueError, match="rank 4"):
    layers.patches(jnp.zeros((10, 10, 4)), 3, 1)
  with pytest.raises(ValueError, match="3x3 kernel does not fit images of 2x5"):
    layers.patches(jnp.zeros((1, 2, 5, 4)), 3, 1)


def test_the_products_gradients_equal_autodiffs_vmapped_over_seeds():
  k = jax.random.split(jax.random.PRNGKey(3), 3)
  x = jax.random.normal(k[0], (4, 8, 5))  # [seeds, B, K]
  w = jax.random.normal(k[1], (4, 5, 6))
  g = jax.random.normal(k[2], (4, 8, 6))

  def vjp(fn):
    out, back = jax.vjp(jax.vmap(fn), x, w)
    return (out,) + back(g)

  for got, want in zip(vjp(layers.matmul), vjp(lambda x, w: x @ w)):
    np.testing.assert_allclose(got, want, **TOL)


def test_a_network_under_layer_arithmetic_equals_the_plain_network():
  spec = ns.minatar_cnn((10, 10, 4), 6)
  net = networks.haiku_network(spec)
  seeds = jax.random.split(jax.random.PRNGKey(4), 3)
  params = jax.vmap(lambda k: networks.init_params(spec, k))(seeds)
  obs = jax.random.bernoulli(jax.random.PRNGKey(5), 0.3, (3, 7, 10, 10, 4)).astype(jnp.float32)

  def loss(p, o):
    return jnp.sum(jnp.square(net.apply(p, o)))

  def values_and_grads():
    return jax.jit(jax.vmap(lambda p, o: (net.apply(p, o), jax.grad(loss)(p, o))))(params, obs)

  plain = values_and_grads()
  with networks.layer_arithmetic(layers.pre_activation):
    fast = values_and_grads()
  assert jax.tree_util.tree_structure(fast) == jax.tree_util.tree_structure(plain)
  for got, want in zip(jax.tree_util.tree_leaves(fast), jax.tree_util.tree_leaves(plain)):
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
  # Outside the block the network is the plain one again.
  np.testing.assert_array_equal(jax.jit(jax.vmap(net.apply))(params, obs), plain[0])
