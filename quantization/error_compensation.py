"""Error-compensating rounding of a feed-forward policy's integer Dense layers (GPTQ, and
Optimal Brain Surgeon on the action values' gradient for the small layers).

Why (measured on the ten trained DQN CartPole policies, issue 39,
docs/results/dqn_cartpole_int8_sensitivity): after bias correction the int8 policy's
remaining disagreement with fp32 is state-dependent weight rounding (weights-only
simulation 0.870 median greedy agreement, LiteRT 0.869). Rounding each weight to its nearest int8 step ignores that
the inputs of a layer are strongly correlated (a CartPole network's 256 hidden units are
functions of a 4-dimensional observation), so one weight's rounding error can be
cancelled by nudging the weights of the inputs correlated with it.

The method (Frantar et al. 2022, "GPTQ: Accurate Post-Training Quantization for
Generative Pre-trained Transformers", Algorithm 1 without its lazy block updates; the
update is Optimal Brain Surgeon's, Hassibi & Stork 1993, as in Frantar & Alistarh 2022,
"Optimal Brain Compression", eq. 2-3): for a Dense layer ``y = x W`` (W ``[I, C]``) with
calibration inputs X ``[N, I]``, ``H = X^T X / N + lambda I`` with
``lambda = damp * mean(diag(X^T X / N))``; with ``U`` the upper Cholesky factor of
``H^-1``, input rows i = 0..I-1 are rounded in order and the error of row i is spread
over the rows not yet rounded:

    q_i = clip(round(w_i / s), -qmax, qmax) s ;  e_i = (w_i - q_i) / U_ii ;
    w_j <- w_j - U_ij e_i   (j > i)

so that ``||X (W - W_q)||`` is smaller than nearest rounding's. The per-channel (or
per-tensor) scales ``s`` are nearest rounding's (`ptq.quantize_array`): the payload's
layout, scales and bytes do not change, only which int8 value each weight takes.

Small layers (``I C <= FULL_HESSIAN_MAX`` weights: a CartPole network's first layer, 4 x
256, and its head, 256 x 3) are rounded against what the policy's choice depends on
instead: with ``v(x)`` the action values (or logits) the outputs stand for, centred per
state, ``c_a(x) = v_a(x) - mean_b v_b(x)`` (argmax and softmax are invariant to a per-state
constant, so the common value of ~100 a CartPole Q-network carries is left out of the
objective), and ``g_na = d c_a(x_n) / d vec(W)`` at the float weights (the layers above in
float), the same sequential update runs over all I C weights with
``H = sum_na g_na g_na^T / N + lambda I``: ``||c(W) - c(W_q)||^2`` to second order (OBS,
Hassibi & Stork 1993; the first-order output-gradient Hessian of Frantar & Alistarh 2022,
sec. 3). That lets errors of one output channel be cancelled by another's (the two
advantage columns of a dueling head), which input-Hessian GPTQ, one channel at a time,
cannot. A larger first layer keeps nearest rounding (4 inputs: input-Hessian GPTQ did not
raise agreement, 0.936 against 0.937 with only that layer int8); a larger layer after it
gets input-Hessian GPTQ.

Measured (the ten DQN CartPole policies, 64 calibration rows, bias-corrected after the
rounding; median greedy agreement with fp32): int8 weights only (simulated) nearest
rounding 0.870, GPTQ on the layers after the first 0.931, plus output-gradient OBS on the
first layer and the head 0.951; on LiteRT's int8 kernels 0.869 -> 0.910, where the per-call
activation quantization alone (float weights) caps agreement at 0.929, below issue 39's
0.97 (`actorq quantize --sensitivity`, rows "... GPTQ, bias-corrected"). It costs seconds
per conversion of a 3x256 network (bias correction: tens of ms), so it is measured in the
study, not applied to the actors' payloads. Conv2D layers and pruned layers keep nearest
rounding. Bias correction (`bias_correction`) is applied after this rounding.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Dict, Mapping, Optional

import jax
import jax.numpy as jnp
import numpy as np

from actorq.quantization import forward
from actorq.quantization import network_spec as ns

# Hessian damping, a fraction of the mean diagonal (GPTQ's default). On the ten DQN
# CartPole policies (64 calibration rows) 0.01 gave median agreement 0.931, 0.1 0.915.
DEFAULT_DAMP = 0.01
# The output-gradient Hessian's damping: 0.1 gave 0.967 with only the first layer int8,
# 0.01 0.956, 1.0 0.962 (the same policies and rows).
OUTPUT_DAMP = 0.1
# Layers of at most this many weights get the output-gradient Hessian (an [I C, I C]
# float64 matrix: 4096 weights take 128 MiB).
FULL_HESSIAN_MAX = 4096


def _sequential_round(w: np.ndarray, steps: np.ndarray, h: np.ndarray, qmax: int,
                      damp: float) -> np.ndarray:
  """OBS / GPTQ rounding of the vector `w` [M] on the grid `steps` [M] under the quadratic
  form `h` [M, M] (rows and columns of entries with a zero diagonal are dropped: they
  are rounded to nearest and take no error). Returns the integer values, float64 [M]."""
  w = np.asarray(w, np.float64).copy()
  h = np.array(h, np.float64)
  diag = np.diag(h).copy()
  live = diag > 1e-12 * max(float(diag.max()), 1e-30)
  h[~live, :] = 0
  h[:, ~live] = 0
  h[~live, ~live] = 1.0
  h += damp * (float(np.mean(diag[live])) if live.any() else 1.0) * np.eye(len(h))
  u = np.linalg.cholesky(np.linalg.inv(h)).T  # upper: H^-1 = U^T U
  q = np.zeros(w.shape, np.float64)
  for i in range(len(w)):
    q[i] = np.clip(np.rint(w[i] / steps[i]), -qmax, qmax)
    if live[i]:
      w[i + 1:] -= u[i, i + 1:] * ((w[i] - q[i] * steps[i]) / u[i, i])
  return q


def centred(values: Optional[Callable[[Any], Any]] = None) -> Callable[[Any], Any]:
  """outputs `[N, output_size]` -> `values(outputs)` minus its mean over the last axis
  (a per-state constant argmax and softmax ignore); `values` None: the outputs. JAX-
  traceable when `values` is."""
  def fn(y):
    v = y if values is None else values(y)
    return v - v.mean(axis=-1, keepdims=True)
  return fn


def output_hessian(params: Mapping[str, Mapping[str, Any]], spec: ns.NetworkSpec,
                   layer_name: str, x: np.ndarray,
                   target: Callable[[Any], Any]) -> np.ndarray:
  """float64 `[I C, I C]`: ``sum_na g_na g_na^T / N`` with ``g_na = d target(f(x_n))_a /
  d vec(W)`` for the Dense layer `layer_name` fed `x` `[N, I]` (the layers from it on in
  float: `params`), `target` mapping the network's outputs to the values kept.

  Raises:
    ValueError: `layer_name` is not a Dense layer of `spec`.
  """
  names = [l.name for l in spec.layers]
  if layer_name not in names or not isinstance(spec.layers[names.index(layer_name)], ns.Dense):
    raise ValueError(f"layer {layer_name!r} is not a Dense layer of the spec; allowed: "
                     f"{[l.name for l in spec.layers if isinstance(l, ns.Dense)]}")
  tail = spec.layers[names.index(layer_name):]
  fparams = {l.name: {k: jnp.asarray(params[l.name][k], jnp.float32) for k in ("w", "b")}
             for l in tail}

  def f(w, xi):
    p = dict(fparams, **{layer_name: {"w": w, "b": fparams[layer_name]["b"]}})
    return target(forward.apply(tail, xi[None], forward.params_layer(p, jnp.float32)))[0]

  w0 = fparams[layer_name]["w"]
  g = jax.vmap(jax.jacrev(f), in_axes=(None, 0))(w0, jnp.asarray(x, jnp.float32))
  g = np.asarray(g, np.float64).reshape(-1, w0.size)  # [N * A, I C]
  return g.T @ g / len(x)


def compensated_values(w: np.ndarray, scale: np.ndarray, x: np.ndarray, bits: int = 8,
                       damp: float = DEFAULT_DAMP) -> np.ndarray:
  """int8 `[I, C]` values of Dense weights `w` rounded with GPTQ (module docstring).

  Args:
    w: float weights `[I, C]`.
    scale: float32 `[C]` (per channel) or `[]` (per tensor): the fixed quantization steps.
    x: float inputs `[N, I]` the layer sees (N >= 1).
    bits: integer width, 2..8 (values in [-(2^(bits-1) - 1), 2^(bits-1) - 1]).
    damp: lambda as a fraction of the mean of diag(X^T X / N); > 0.

  Returns:
    int8 `[I, C]`. An input that is 0 on every row of `x` carries no information: it is
    rounded to nearest and receives no error.

  Raises:
    ValueError: `x` not `[N >= 1, I]`, `damp` <= 0, bits outside 2..8.
  """
  w = np.asarray(w, np.float64).copy()
  x = np.asarray(x, np.float64)
  if x.ndim != 2 or x.shape[1] != w.shape[0] or x.shape[0] < 1:
    raise ValueError(f"calibration inputs of shape {x.shape}; allowed: [N >= 1, {w.shape[0]}]")
  if not damp > 0:
    raise ValueError(f"damp {damp}; allowed: > 0")
  if not 2 <= int(bits) <= 8:
    raise ValueError(f"bits {bits}; allowed: 2..8")
  qmax = 2 ** (int(bits) - 1) - 1
  s = np.broadcast_to(np.asarray(scale, np.float64), (w.shape[1],))
  s = np.where(s == 0, 1.0, s)
  h = x.T @ x / len(x)
  diag = np.diag(h).copy()
  live = diag > 0
  h[~live, :] = 0
  h[:, ~live] = 0
  h[~live, ~live] = 1.0
  h += damp * (float(np.mean(diag[live])) if live.any() else 1.0) * np.eye(len(h))
  u = np.linalg.cholesky(np.linalg.inv(h)).T  # upper: H^-1 = U^T U
  q = np.zeros(w.shape, np.int8)
  for i in range(w.shape[0]):
    qi = np.clip(np.rint(w[i] / s), -qmax, qmax)
    q[i] = qi
    if live[i]:
      err = (w[i] - qi * s) / u[i, i]
      w[i + 1:] -= np.outer(u[i, i + 1:], err)
  return q


def output_aware_values(w: np.ndarray, scale: np.ndarray, h: np.ndarray, bits: int = 8,
                        damp: float = OUTPUT_DAMP) -> np.ndarray:
  """int8 `[I, C]` values of Dense weights `w` rounded sequentially (row-major order)
  under the quadratic form `h` `[I C, I C]` (`output_hessian`), on the fixed `scale`
  (`[C]` or `[]`) grid.

  Raises:
    ValueError: `h` not `[I C, I C]`, `damp` <= 0, bits outside 2..8.
  """
  w = np.asarray(w, np.float64)
  if np.shape(h) != (w.size, w.size):
    raise ValueError(f"hessian of shape {np.shape(h)}; allowed: [{w.size}, {w.size}]")
  if not damp > 0:
    raise ValueError(f"damp {damp}; allowed: > 0")
  if not 2 <= int(bits) <= 8:
    raise ValueError(f"bits {bits}; allowed: 2..8")
  s = np.broadcast_to(np.asarray(scale, np.float64), (w.shape[1],))
  steps = np.broadcast_to(np.where(s == 0, 1.0, s), w.shape).reshape(-1)
  q = _sequential_round(w.reshape(-1), steps, h, 2 ** (int(bits) - 1) - 1, damp)
  return q.reshape(w.shape).astype(np.int8)


def compensated_layers(params: Mapping[str, Mapping[str, Any]], layers: Mapping[str, Any],
                       spec: ns.NetworkSpec, observations: np.ndarray,
                       target: Optional[Callable[[Any], Any]] = None) -> Dict[str, Any]:
  """`layers` (`mixed.CompressedLayer`s of `params` under some policy) with their
  unpruned integer Dense layers re-rounded, in order, on the inputs the quantized network
  itself feeds them: with `target` given, a layer of at most `FULL_HESSIAN_MAX` weights by
  `output_aware_values` (`output_hessian` of `target`); otherwise every such layer after
  the first parameter layer by `compensated_values` (module docstring).

  Args:
    params: the float network `{layer: {"w", "b"}}` (float32 arrays of `spec`).
    layers: `{layer: CompressedLayer}` for every parameter layer of `spec`.
    spec: a feed-forward `NetworkSpec` of Dense (and Conv2D/Flatten) layers.
    observations: raw observations `[N, *spec.input_shape]` (N >= 1; `spec.input_scale`
      is applied here, as the runtimes do).
    target: the network's outputs `[N, output_size]` -> the values whose error is
      minimised (JAX-traceable), e.g. `centred(PolicyOutputs.to_values)` for Q-values or
      logits; None: input-Hessian GPTQ only.

  Returns:
    A new dict: the re-rounded layers are new `CompressedLayer`s with the same choice,
    scale and biases; the others are the same objects.

  Raises:
    ValueError: a `RecurrentSpec`, observations not `[N >= 1, *spec.input_shape]`.
  """
  if isinstance(spec, ns.RecurrentSpec):
    raise ValueError("error-compensating rounding applies to feed-forward networks, not a "
                     "RecurrentSpec")
  x = np.asarray(observations, np.float32)
  if x.ndim != 1 + len(spec.input_shape) or x.shape[1:] != tuple(spec.input_shape) \
      or x.shape[0] < 1:
    raise ValueError(f"calibration observations of shape {x.shape}; allowed: [N >= 1, "
                     f"{', '.join(map(str, spec.input_shape))}]")
  out = dict(layers)
  first = spec.parameter_layers[0].name

  def compensated_layer(layer, x):
    c = out[layer.name]
    if isinstance(layer, ns.Dense) and c.scale is not None and c.choice.sparsity == 0:
      w = params[layer.name]["w"]
      values = None
      if target is not None and np.size(w) <= FULL_HESSIAN_MAX:
        h = output_hessian(params, spec, layer.name, x, target)
        values = output_aware_values(w, c.scale, h, c.choice.bits)
      elif layer.name != first:
        values = compensated_values(w, c.scale, x, c.choice.bits)
      if values is not None:
        c = dataclasses.replace(c, values=values)
        out[layer.name] = c
    return forward.pre_activation(layer, x, c.dequantized(), np.asarray(c.b, np.float32))

  forward.apply(spec.layers, forward.scaled_input(spec, x), compensated_layer)
  return out
