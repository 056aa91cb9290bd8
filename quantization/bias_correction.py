"""Empirical bias correction of a quantized feed-forward policy (ActorQ's int8 default).

Why (measured, `actorq quantize --sensitivity`, docs/results/int8_parity): rounding a
trained DQN CartPole Q-network's weights to int8 shifts its outputs by an almost constant
offset. The offset of layer l's pre-activation is ``E[x_l] (W_q - W)``: the inputs of a
ReLU network have a non-zero mean, so the rounding errors of a row of weights add up
instead of averaging out. The greedy action hangs on the gap between two Q-values that is
small beside the Q-values themselves (median 0.12 against Q ~ 96), so that offset alone
flipped 25-47% of the greedy actions of trained policies, while the per-call quantization
of the activations cost almost nothing ("int8 weights only" agreed as little as "int8").

The correction (Nagel et al. 2019, "Data-Free Quantization Through Weight Equalization and
Bias Correction", sec. 4.2, in its empirical form; Finkelstein et al. 2019, "Fighting
Quantization Bias With Bias"): on calibration observations X, layer by layer, with the
quantized network's own (already corrected) inputs ``x_q`` and the float network's ``x``,

    b_l <- b_l - mean_X[ x_q W_q + b_l - (x W + b_l) ]      (pre-activation, per channel)

(for Conv2D the mean also runs over the output positions), so that every corrected layer's
mean pre-activation over X equals the float network's, including the error its inputs carry
from the layers below. Only biases change: the int8 weights, their scales, the payload's
layout and bytes are those of the uncorrected payload, and any runtime that loads the
payload runs the corrected policy.

Where X comes from: the learner's most recent replay sample (`ObservationTap`, wired by
the launchers in front of the learner's iterator), so the correction is recalibrated at
every parameter version the actors pull, on the states the behaviour policy visits.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Iterator, Mapping, Optional

import numpy as np

from actorq.quantization import forward
from actorq.quantization import network_spec as ns
from actorq.quantization import payload as pl

# Calibration observations per correction: the mean of 64 rows matched the mean of
# 2,500 rows to within 0.3 points of greedy agreement on the DQN CartPole policies (16 rows
# lost up to 5 points), and 64 rows keep a 3x2048 network's correction to tens of ms.
DEFAULT_CALIBRATION_SIZE = 64


def corrected_biases(params: Mapping[str, Mapping[str, Any]],
                     quantized: Mapping[str, Mapping[str, Any]], spec: ns.NetworkSpec,
                     observations: np.ndarray) -> dict:
  """The biases of `quantized` corrected on `observations` (see the module docstring).

  Args:
    params: the float network `{layer: {"w", "b"}}` (float32 arrays of `spec`).
    quantized: the network the actors run, as float arrays: `{layer: {"w", "b"}}`
      (`payload.dequantize_payload` of its payload).
    spec: a feed-forward `NetworkSpec` (not a `RecurrentSpec`).
    observations: raw observations `[N, *spec.input_shape]` (N >= 1; `spec.input_scale`
      is applied here, as the runtimes do).

  Returns:
    `{layer: float32 bias}` for every parameter layer, shaped as its bias.

  Raises:
    ValueError: a `RecurrentSpec`, or observations of another shape than
      `[N, *spec.input_shape]` with N >= 1.
  """
  if isinstance(spec, ns.RecurrentSpec):
    raise ValueError("bias correction applies to feed-forward networks, not a RecurrentSpec")
  x = np.asarray(observations, np.float32)
  if x.ndim != 1 + len(spec.input_shape) or x.shape[1:] != tuple(spec.input_shape) \
      or x.shape[0] < 1:
    raise ValueError(f"calibration observations of shape {x.shape}; allowed: [N >= 1, "
                     f"{', '.join(map(str, spec.input_shape))}]")
  x = forward.scaled_input(spec, x)
  # The float network's pre-activations, then the quantized network's, each layer's
  # corrected (its bias shifted by the mean difference) before it feeds the next.
  float_pre = {}

  def float_layer(layer, x_in):
    float_pre[layer.name] = y = forward.params_layer(params, np.float32)(layer, x_in)
    return y

  out = {}

  def corrected_layer(layer, x_in):
    y = float_pre[layer.name]
    w_q, b_q = (np.asarray(quantized[layer.name][k], np.float32) for k in ("w", "b"))
    y_q = forward.pre_activation(layer, x_in, w_q, b_q)
    shift = (y_q - y).reshape(-1, y.shape[-1]).mean(axis=0)
    out[layer.name] = (b_q - shift).astype(np.float32).reshape(
        np.shape(quantized[layer.name]["b"]))
    return y_q - shift  # the corrected layer's pre-activation, no second matmul

  forward.apply(spec.layers, x, float_layer)
  forward.apply(spec.layers, x, corrected_layer)
  return out


def correct_payload(payload: pl.Payload, params, spec: ns.NetworkSpec,
                    observations: np.ndarray) -> pl.Payload:
  """`payload` with every layer's bias replaced by `corrected_biases` (a new `Payload`;
  weights and scales are the same arrays). A payload without integer layers (no
  ``"scale"``) is returned unchanged: it has no rounding offset to correct.

  Raises:
    ValueError: as `corrected_biases`.
  """
  if not any("scale" in l for l in payload.layers.values()):
    return payload
  arrays = pl.validate_params(params, spec, check_finite=False)
  biases = corrected_biases(arrays, pl.dequantize_payload(payload), spec, observations)
  layers = {name: dict(l, b=biases[name]) for name, l in payload.layers.items()}
  return dataclasses.replace(payload, layers=layers)


def observations_of(data: Any, input_shape) -> Optional[np.ndarray]:
  """The observations a replay sample holds, as rows `[N, *input_shape]`, or None when it
  holds none of that shape.

  Looks for an ``observation`` field (acme `Transition`, `Step` sequences `[B, T, ...]`,
  rollouts) on `data` or on ``data.data`` (a reverb `ReplaySample`).
  """
  data = getattr(data, "data", data)
  obs = getattr(data, "observation", None)
  if obs is None and isinstance(data, Mapping):
    obs = data.get("observation")
  if obs is None:
    return None
  obs = np.asarray(obs)
  size = int(np.prod(input_shape)) if input_shape else 1
  if obs.dtype == object or obs.size == 0 or obs.size % size:
    return None
  if tuple(obs.shape[-len(input_shape):]) != tuple(input_shape):
    return None
  return obs.reshape((-1,) + tuple(input_shape))


class ObservationTap:
  """An iterator in front of a learner's replay iterator that keeps the newest `size`
  observations it passed (`observations()`), the calibration set of `correct_payload`.

  The samples go through unchanged and in order (a seeded run samples what it sampled
  before); a sample without observations of `input_shape` is passed on and not kept.

  Args:
    iterator: the replay iterator (`builder.make_dataset_iterator`).
    input_shape: the policy network's input shape (`NetworkSpec.input_shape`).
    size: rows kept (>= 1).

  Raises:
    ValueError: size < 1.
  """

  def __init__(self, iterator: Iterator[Any], input_shape, size: int = DEFAULT_CALIBRATION_SIZE):
    if int(size) < 1:
      raise ValueError(f"calibration size {size}; allowed: >= 1")
    self._iterator = iterator
    self._shape = tuple(input_shape)
    self._size = int(size)
    self._newest: Optional[np.ndarray] = None  # replaced whole: a reader sees old or new

  def __iter__(self):
    return self

  def __next__(self):
    sample = next(self._iterator)
    obs = observations_of(sample, self._shape)
    if obs is not None:
      self._newest = np.array(obs[:self._size], np.float32, copy=True)
    return sample

  def __getattr__(self, name):  # the wrapped iterator's other attributes (e.g. `close`)
    return getattr(self._iterator, name)

  def observations(self) -> Optional[np.ndarray]:
    """float32 `[N <= size, *input_shape]`: the newest sample's first `size` observations,
    or None before any sample."""
    return self._newest


Calibration = Callable[[], Optional[np.ndarray]]


def tap(iterator: Iterator[Any], spec, size: int = DEFAULT_CALIBRATION_SIZE):
  """`(iterator, calibration)` for a launcher: the learner's replay `iterator` behind an
  `ObservationTap` and the tap's `observations` (what `PolicyServer(calibration=...)`
  takes); for a `RecurrentSpec` (no bias correction) the iterator itself and None."""
  if isinstance(spec, ns.RecurrentSpec):
    return iterator, None
  t = ObservationTap(iterator, spec.input_shape, size)
  return t, t.observations
