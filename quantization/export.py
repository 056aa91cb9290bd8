"""A trained policy as a standalone `.tflite` model (what `actorq export` writes; the command
and its JSON report are `actorq.studies.export`):

* `policy_model(params, spec, precision, calibration)`: the model of `params` at int8, fp32
  or a per-layer precision policy (``mixed:...``; `mixed.compress`), integer layers' biases
  corrected on the calibration observations (`bias_correction`, Nagel et al. 2019,
  sec. 4.2), with the blocks of its JSON that describe the weights (scales, stored bytes,
  the runtime) -- the model of the very payload whose scales and bytes are reported;
* `ModelRuntime(model)`: such a model's bytes run by `ai_edge_litert` behind the
  policy-runtime interface actors call.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from ai_edge_litert.interpreter import Interpreter

from actorq.quantization import bias_correction
from actorq.quantization import mixed
from actorq.quantization import payload as pl
from actorq.quantization import runtimes
from actorq.quantization.runtimes import litert_runtime


class ModelRuntime:
  """A `.tflite` model's bytes behind the policy-runtime interface actors call (what the
  exported file computes, run by `ai_edge_litert`), for the parity episodes."""
  precision = "exported"
  version = 0

  def __init__(self, model: bytes):
    self._interp = Interpreter(model_content=model)
    self._in = self._interp.get_input_details()[0]["index"]
    self._out = self._interp.get_output_details()[0]["index"]
    self._batch = None

  def __call__(self, observation) -> np.ndarray:
    obs = np.asarray(observation, np.float32)
    if obs.shape[0] != self._batch:
      self._interp.resize_tensor_input(self._in, list(obs.shape))
      self._interp.allocate_tensors()
      self._batch = obs.shape[0]
    self._interp.set_tensor(self._in, obs)
    self._interp.invoke()
    return self._interp.get_tensor(self._out)

  def diagnose(self, observation) -> str:
    del observation
    return "the exported model's outputs"


def scales_of(payload, labels=None) -> list:
  """One entry per integer layer of `payload`: what its weights are and its float32 scales
  (`labels`: a per-layer policy's choice labels by layer, e.g. "int4+p0.5")."""
  out = []
  for name, layer in payload.layers.items():
    if "scale" not in layer:
      continue
    scale = np.asarray(layer["scale"], np.float32)
    held = f"{labels[name]} held in int8" if labels else "int8"
    out.append({"layer": name, "scale": scale.reshape(-1).tolist(),
                "weights": held + (", per output channel" if scale.ndim else ", per tensor")})
  return out


class PolicyModel:
  """One policy's exported model and the blocks of its JSON that do not depend on where
  it is played (`policy_model`)."""

  def __init__(self, payload, model, scales, runtime_note, policy_block, bias_block):
    self.payload, self.model, self.scales = payload, model, scales
    self.runtime_note, self.policy_block, self.bias_block = (runtime_note, policy_block,
                                                             bias_block)


def policy_model(params, spec, precision: str, calibration,
                  calibration_seed: Optional[int] = None) -> PolicyModel:
  """The `.tflite` model of `params` (network `spec`) at `precision`, integer layers'
  biases corrected on `calibration` (observations `[N, *input_shape]`, or None): the one
  path every export takes (`actorq.studies.export`: a single-agent run's policy, or one
  parameter group's); `calibration_seed`, the environment seed the calibration
  observations were played on, is recorded in the JSON's bias-correction block."""
  policy_block = {}
  if runtimes.family_of(precision) is not None:  # a per-layer policy (the mixed: row)
    precision_policy = mixed.policy_of(precision, spec)
    layers = mixed.compress(params, spec, precision_policy)
    payload = mixed.payload_of(layers)
    scales = scales_of(payload, {n: c.label for n, c in precision_policy.layers})
    policy_block = {"precision_policy": mixed.to_json_dict(precision_policy, spec),
                    "stored_bytes": mixed.storage_report(layers)}
    runtime_note = (f"ai_edge_litert Interpreter (XNNPACK); layers "
                    f"{list(precision_policy.float_layers)} "
                    "float32 weights and kernels, the others dynamic-range int8 weights with "
                    "float32 activations quantized per row by the kernels")
  else:
    payload = pl.make_payload(params, spec, precision, 0)
    scales = scales_of(payload)
    runtime_note = ("ai_edge_litert Interpreter (XNNPACK); int8 = dynamic-range int8 "
                    "weights, float32 activations quantized per row by the kernels")
  bias_block = {}
  if calibration is not None and any("scale" in l for l in payload.layers.values()):
    payload = bias_correction.correct_payload(payload, params, spec, calibration)
    bias_block = {"bias_correction": {
        "method": "empirical bias correction (Nagel et al. 2019, sec. 4.2): each layer's "
                  "bias minus the mean pre-activation error over the calibration "
                  "observations (actorq/quantization/bias_correction.py)",
        "calibration_observations": int(len(calibration)),
        **({} if calibration_seed is None else {"calibration_env_seed": calibration_seed})}}
  # The model of the very payload whose scales and bytes the JSON reports.
  model = litert_runtime.payload_model(payload, spec)
  return PolicyModel(payload, model, scales, runtime_note, policy_block, bias_block)
