"""The actor-side runtime of a recurrent Q-network (`network_spec.RecurrentSpec`).

A `RecurrentSpec` cannot be one sequential `NetworkSpec` (the LSTM's matmul takes the
torso's output *and* the previous hidden state), and the LiteRT int8 path converts only
sequential Dense/Conv2D models. So `RecurrentRuntime` executes it in four pieces:

    x_t   = torso(o_t)                          runtime of `spec.torso` at `precision`
    z_t   = [x_t, h_{t-1}] @ W + b              runtime of `spec.gates` at `precision`
    i, g, f, o = split(z_t, 4)                  float32 numpy (the cell, `lstm_cell`)
    c_t   = sigmoid(f + 1) c_{t-1} + sigmoid(i) tanh(g)
    h_t   = sigmoid(o) tanh(c_t)
    q_t   = head(h_t)                           runtime of `spec.head` at `precision`

A per-layer policy's ``"mixed:<choice>,..."`` name (`mixed.policy_of`: one label per
parameter layer, torso layers, then the gate matmul, then head layers) runs each part as
the `LiteRTMixedRuntime` of its own labels, e.g. ``"mixed:int8,int8,fp32"``: int8 torso
and gate matmul, float32 head (the common practice of keeping the last layer in float:
Choi et al. 2018, "PACT"; Zhou et al. 2016, "DoReFa-Net").

At "int8" the three matmul parts (torso, the LSTM's gate matmul, head) run LiteRT's
dynamic-range int8 kernels (int8 weights with per-channel scales, activations quantized
on the fly, float32 out); the cell's elementwise update and the recurrent state (h, c)
stay float32. At "fp32"/"fp16"/"bf16" the matmul parts run the JAX runtimes at that
precision and the cell is float32 numpy as well. The cell is Haiku 0.0.10's `hk.LSTM`
(gate order i, g, f, o; +1 on the forget gate), which the learner trains.
"""
from __future__ import annotations

from typing import Tuple

import numpy as np

from actorq.quantization import forward
from actorq.quantization import network_spec as ns
from actorq.quantization import payload as pl
from actorq.quantization.runtimes import base

State = Tuple[np.ndarray, np.ndarray]  # (hidden [B, H], cell [B, H]), float32


def _sigmoid(x: np.ndarray) -> np.ndarray:
  return (0.5 * (np.tanh(0.5 * x) + 1.0)).astype(np.float32)


def lstm_cell(gates: np.ndarray, cell: np.ndarray) -> State:
  """Haiku's LSTM update from the gate pre-activations.

  Args:
    gates: float32 [B, 4H], `[x_t, h_{t-1}] @ W + b`, in the order (i, g, f, o).
    cell: float32 [B, H], c_{t-1}.

  Returns:
    (h_t, c_t), float32 [B, H] each.
  """
  i, g, f, o = np.split(np.asarray(gates, np.float32), 4, axis=-1)
  c = _sigmoid(f + 1.0) * cell + _sigmoid(i) * np.tanh(g)
  h = _sigmoid(o) * np.tanh(c)
  return h.astype(np.float32), c.astype(np.float32)


class RecurrentRuntime(base.PolicyRuntime):
  """Executes a `RecurrentSpec` one step at a time (see the module docstring).

  Args:
    precision: "fp32", "fp16", "bf16" or "int8" (the matmul parts' precision), or a
      ``"mixed:<choice>,..."`` name with one label per parameter layer of `spec`.
    spec: the `RecurrentSpec`.
    make_runtime: `make_runtime(precision, NetworkSpec) -> PolicyRuntime`.
    row: the `PolicyRuntime` class of `precision`'s row of the precision table, asked how
      to split the precision by part (`PolicyRuntime.part_precision`).

  `load(payload)` takes a payload of the whole spec (`payload.make_payload(params, spec,
  runtime.payload_precision, version)`, or `mixed.make_payload` of the policy a
  ``"mixed:..."`` precision names) and loads its three parts; `step(observation
  [B, ...], (h, c)) -> (outputs float32 [B, output_size], (h, c))`.
  """

  def __init__(self, precision: str, spec: ns.RecurrentSpec, make_runtime, num_threads: int = 1,
               row=base.PolicyRuntime):
    if not isinstance(spec, ns.RecurrentSpec):
      raise ValueError(f"RecurrentRuntime needs a RecurrentSpec, got {type(spec).__name__}")
    super().__init__(spec, num_threads)
    # Each part runs at the precision its row gives it (`PolicyRuntime.part_precision`): a
    # uniform precision is every part's; a per-layer policy is split by part, each part's
    # runtime getting the name of its own layers (the gate matmul's layer is renamed in its
    # spec), and the whole network pulls the whole name's payload.
    torso = row.part_precision(precision, spec, [l.name for l in spec.torso.parameter_layers])
    gates = row.part_precision(precision, spec, [spec.LSTM_LAYER])
    head = row.part_precision(precision, spec, [l.name for l in spec.head.parameter_layers])
    split = (torso, gates, head) != (precision,) * 3
    self._torso = make_runtime(torso, spec.torso)
    self._gates = make_runtime(gates, spec.gates)
    self._head = make_runtime(head, spec.head)
    self.precision = precision if split else self._torso.precision
    self.payload_precision = precision if split else self._torso.payload_precision
    self.accepted_payloads = self._torso.accepted_payloads
    self.lstm_size = int(spec.lstm_size)

  def initial_state(self, batch_size: int = 1) -> State:
    """Zeros (h, c), float32 [batch_size, H] each (Haiku's `LSTM.initial_state`)."""
    zeros = np.zeros((int(batch_size), self.lstm_size), np.float32)
    return zeros, zeros.copy()

  def _parts(self, payload):
    spec = self.spec
    layers = payload.layers
    sub = lambda names, rename=None: pl.Payload(
        payload.precision, payload.version,
        {(rename or n): layers[n] for n in names}, payload.per_channel)
    return (sub([l.name for l in spec.torso.parameter_layers]),
            sub([spec.LSTM_LAYER], spec.GATES_LAYER),
            sub([l.name for l in spec.head.parameter_layers]))

  def _load(self, payload) -> None:
    pl.check_payload(payload, self.spec, self.accepted_payloads)
    torso, gates, head = self._parts(payload)
    self._torso.load(torso)
    self._gates.load(gates)
    self._head.load(head)

  def step(self, observation, state: State) -> Tuple[np.ndarray, State]:
    """One step of the recurrent network.

    Args:
      observation: float32 [B, *input_shape].
      state: (h, c), float32 [B, H] each.

    Returns:
      (outputs float32 [B, output_size], the next (h, c)).
    """
    obs = self._check_observation(observation)
    hidden, cell = state
    x = self._torso(obs)
    gates = self._gates(np.concatenate([np.asarray(x, np.float32),
                                        np.asarray(hidden, np.float32)], axis=-1))
    h, c = lstm_cell(gates, np.asarray(cell, np.float32))
    self.timings["calls"] += 1
    return np.asarray(self._head(h), np.float32), (h, c)

  def __call__(self, observation) -> np.ndarray:
    raise TypeError("a recurrent runtime keeps a state: call step(observation, state)")

  def diagnose(self, observation, state: State = None) -> str:
    """Which part's output is not finite for `observation` [B, ...] from `state` (zeros
    if None), computed in float32 from the loaded (dequantized) parameters."""
    params = pl.dequantize_payload(self._payload)
    spec = self.spec
    obs = np.asarray(observation, np.float32)
    if state is None:
      state = self.initial_state(obs.shape[0])
    if not np.isfinite(obs).all():
      return "the observation itself is not finite"
    x = np.asarray(forward.forward(params, spec.torso, obs))
    if not np.isfinite(x).all():
      return "the torso's output is not finite (" + forward.first_non_finite_layer(
          params, spec.torso, obs) + ")"
    w, b = params[spec.LSTM_LAYER]["w"], params[spec.LSTM_LAYER]["b"]
    h, _ = lstm_cell(np.concatenate([x, state[0]], axis=-1) @ w + b, state[1])
    if not np.isfinite(h).all():
      return "the LSTM's output is not finite"
    return "the head's output is not finite (" + forward.first_non_finite_layer(
        params, spec.head, h) + ")"
