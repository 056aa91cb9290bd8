"""Dense and Conv2D layers written for `jax.vmap` over seeds on XLA's CPU backend: the
same values as `quantization.forward.pre_activation` (within float32 rounding), with
every matrix product in the one form XLA hands to oneDNN.

Why (measured for issue 54, jax/jaxlib 0.4.23 on a 2-core AMD EPYC, family 25): under
`jax.vmap` a layer's products become `dot`s with a leading seed (batch) dimension. XLA's
oneDNN rewriter takes a batched `dot` only in the canonical form `[S, M, K] @ [S, K, N]`
with row-major operands; the forward product `x @ w` is that form, but the two products
of its autodiff backward pass are not: the weight gradient `x^T g` contracts the row
axis of both operands and the input gradient `g w^T` the column axis of both. XLA folds
any transpose written before them back into the `dot` (transpose folding; layout
assignment turns a copied transpose into a layout), so they run as plain batched `dot`s,
at half the rate (30 seeds, [64, 256] x [256, 256]: 9.5-10 ms against 5.5-6.5 ms in
oneDNN with the transpose included). `dense` has a custom VJP whose backward products
take a transposed operand made by a gather (which XLA neither folds into the `dot` nor
lays out transposed), so all three products of a layer run in oneDNN.

A convolution under `jax.vmap` over seeds (a kernel per seed) becomes ONE grouped
convolution (`feature_group_count` = seeds), which XLA's CPU backend runs on its slow
generic path: >24 h projected for MinAtar DQN, 1M steps x 5 seeds. `conv2d` is the same
VALID, strided convolution as im2col (Chellapilla et al. 2006, "High Performance
Convolutional Neural Networks for Document Processing"): the kernel-sized patches of the
input, gathered by slicing, times the kernel reshaped to a matrix, through `dense`.

The values equal the plain layers' up to float32 rounding (the products add in another
order), not bit for bit, so only the compiled launch uses them (`DQNSystem`, through
`components.networks.layer_arithmetic`); the Python launches keep the plain layers and
their learner checksums.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from actorq.quantization import network_spec as ns


def _transposed(a: jnp.ndarray) -> jnp.ndarray:
  """a [M, N] -> a^T [N, M], written as a gather so that XLA materializes it row-major
  (a `jnp.transpose` would be folded into the consuming `dot`)."""
  m, n = a.shape
  return a[jnp.arange(m)[None, :], jnp.arange(n)[:, None]]


@jax.custom_vjp
def matmul(x: jnp.ndarray, w: jnp.ndarray) -> jnp.ndarray:
  """`x @ w` for x float32 [..., K], w float32 [K, N] -> [..., N] (the plain product);
  its VJP computes `g w^T` and `x^T g` from gathered transposes (module docstring)."""
  return x @ w


def _matmul_fwd(x, w):
  return x @ w, (x, w)


def _matmul_bwd(residuals, g):
  x, w = residuals
  rows = x.reshape(-1, x.shape[-1])
  g_rows = g.reshape(-1, g.shape[-1])
  dw = _transposed(rows) @ g_rows  # [K, R] @ [R, N]
  dx = (g_rows @ _transposed(w)).reshape(x.shape)  # [R, N] @ [N, K]
  return dx, dw


matmul.defvjp(_matmul_fwd, _matmul_bwd)


def dense(x: jnp.ndarray, w: jnp.ndarray, b: jnp.ndarray) -> jnp.ndarray:
  """`x @ w + b`: x float32 [B, K], w [K, N], b [N] -> float32 [B, N]."""
  return matmul(x, w) + b


def patches(x: jnp.ndarray, kernel: int, stride: int) -> jnp.ndarray:
  """The VALID `kernel` x `kernel` patches of x NHWC at `stride`: float32
  [N, H', W', kernel * kernel * C], H' = (H - kernel) // stride + 1 (W' alike), features
  ordered (row, column, channel) of the patch, as a HWIO kernel reshaped to
  [kernel * kernel * C, O] orders its rows.

  Raises:
    ValueError: x is not rank 4, or smaller than the kernel.
  """
  if x.ndim != 4:
    raise ValueError(f"patches takes NHWC images (rank 4), got shape {x.shape}")
  _, h, w, _ = x.shape
  if h < kernel or w < kernel:
    raise ValueError(f"a {kernel}x{kernel} kernel does not fit images of {h}x{w} (VALID)")
  out_h, out_w = (h - kernel) // stride + 1, (w - kernel) // stride + 1
  span_h, span_w = (out_h - 1) * stride + 1, (out_w - 1) * stride + 1
  return jnp.concatenate(
      [x[:, i:i + span_h:stride, j:j + span_w:stride, :]
       for i in range(kernel) for j in range(kernel)], axis=-1)


def conv2d(x: jnp.ndarray, w: jnp.ndarray, b: jnp.ndarray, stride: int) -> jnp.ndarray:
  """The VALID, strided convolution of x NHWC [N, H, W, C] by w HWIO [k, k, C, O] plus
  b [O]: float32 [N, H', W', O] (as `lax.conv_general_dilated` with ("NHWC", "HWIO",
  "NHWC"), by im2col)."""
  k, _, c, o = w.shape
  p = patches(x, k, stride)
  n, out_h, out_w, f = p.shape
  y = matmul(p.reshape(n * out_h * out_w, f), w.reshape(k * k * c, o))
  return y.reshape(n, out_h, out_w, o) + b


def pre_activation(layer, x, w, b):
  """`forward.pre_activation`'s contract (a `forward.LayerFn` of a Dense or Conv2D
  `layer` with its w and b) computed by `dense` / `conv2d`; JAX arrays only."""
  if isinstance(layer, ns.Dense):
    return dense(x, w, b)
  return conv2d(x, w, b, layer.stride)
