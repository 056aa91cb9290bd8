"""Fidelity of a compressed policy to its fp32 policy, on the same observations (the metrics
of `actorq quantize`, defined in `actorq.studies.compression`'s docstring):

* ``agreement``: discrete actions: the fraction of observations where the greedy action
  equals fp32's; continuous: ``1 - action_distance``;
* ``kl``: the mean of ``KL(p_fp32 || p)``, ``p = softmax(z / T)`` over the Q-values (``T``
  in return units) or the logits (``T = 1``); NaN for continuous policies;
* ``action_distance``: continuous: the mean of ``|a - a_fp32| / (maximum - minimum)``;
* ``q_regret``: Q-value policies: the mean of ``Q(s, a_fp32) - Q(s, a)`` under fp32's Q.

`OutputSemantics` says what a network's outputs mean (from the builder's declared
`core.PolicyOutputs`); `compensation_target` is what error-compensating rounding keeps.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, Dict, Optional

import numpy as np

from actorq import core
from actorq.quantization import error_compensation

OUTPUT_KINDS = ("q_values", "logits", "continuous")
# A builder's declared `core.PolicyOutputs.kind` -> the study's kind.
DECLARED_KINDS = {"q_values": "q_values", "logits": "logits",
                  "tanh_deterministic": "continuous", "tanh_gaussian": "continuous"}


@dataclasses.dataclass(frozen=True)
class OutputSemantics:
  """What a policy network's outputs mean, for agreement and KL.

  Attributes:
    kind: "q_values" (DQN), "logits" (discrete on-policy heads) or "continuous".
    selector: the greedy (evaluation) selector, outputs row -> (action, extras).
    transform: outputs `[N, output_size]` -> Q-values or logits `[N, A]` (e.g. the
      dueling combination); identity by default.
    temperature: T of `softmax(Q / T)` for "q_values" (return units; > 0).
    action_range: continuous: `maximum - minimum` per action dimension.
  """
  kind: str
  selector: core.Selector
  transform: Optional[Callable[[np.ndarray], np.ndarray]] = None
  temperature: float = 1.0
  action_range: Any = 1.0

  @classmethod
  def declared(cls, outputs: core.PolicyOutputs, selector: core.Selector, action_spec,
               temperature: float = 1.0) -> "OutputSemantics":
    """The semantics of what a builder declares (`Builder.policy_outputs`): its kind
    through `DECLARED_KINDS` (tanh kinds: "continuous", with `action_range` = maximum -
    minimum of the `action_spec` per dimension), its `to_values` as `transform`.

    Raises:
      ValueError: a kind `DECLARED_KINDS` does not map (naming the allowed ones).
    """
    if outputs.kind not in DECLARED_KINDS:
      raise ValueError(f"policy output kind {outputs.kind!r} has no study semantics; "
                       f"allowed: {', '.join(DECLARED_KINDS)}")
    kind = DECLARED_KINDS[outputs.kind]
    if kind == "continuous":
      lo = np.broadcast_to(np.asarray(action_spec.minimum, np.float64), action_spec.shape)
      hi = np.broadcast_to(np.asarray(action_spec.maximum, np.float64), action_spec.shape)
      return cls(kind, selector, outputs.to_values, action_range=hi - lo)
    return cls(kind, selector, outputs.to_values, temperature if kind == "q_values" else 1.0)

  def __post_init__(self):
    if self.kind not in OUTPUT_KINDS:
      raise ValueError(f"output kind {self.kind!r}; allowed: {OUTPUT_KINDS}")
    if not (math.isfinite(float(self.temperature)) and float(self.temperature) > 0):
      raise ValueError(f"temperature must be a finite number > 0, got {self.temperature}")


def compensation_target(semantics: OutputSemantics) -> Callable[[Any], Any]:
  """What error-compensating rounding keeps (`error_compensation.compensated_layers`'s
  `target`): for Q-values and logits the values (`semantics.transform` of the outputs)
  centred per state, since the greedy action and the softmax ignore a per-state constant;
  for continuous policies the outputs themselves."""
  if semantics.kind == "continuous":
    return lambda y: y
  return error_compensation.centred(semantics.transform)


def log_softmax(z: np.ndarray) -> np.ndarray:
  """Row-wise log-softmax of float64 `[N, A]` (max-shifted: no overflow)."""
  z = np.asarray(z, np.float64)
  z = z - z.max(axis=-1, keepdims=True)
  return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


def mean_kl(reference_logits: np.ndarray, logits: np.ndarray) -> float:
  """Mean over rows of `KL(softmax(reference) || softmax(logits))` in nats, `[N, A]`."""
  lp, lq = log_softmax(reference_logits), log_softmax(logits)
  return float(np.mean(np.sum(np.exp(lp) * (lp - lq), axis=-1)))


def fidelity(reference_outputs: np.ndarray, outputs: np.ndarray,
             semantics: OutputSemantics) -> Dict[str, float]:
  """`{"agreement", "kl", "action_distance", "q_regret"}` of `outputs` against the fp32
  policy's `reference_outputs` on the same observations (both float `[N, output_size]`);
  see the module docstring for the definitions. `q_regret` (Q-value policies, else NaN):
  the mean over observations of ``Q(s, a_fp32) - Q(s, a)`` under the fp32 Q-values, what
  the other policy's greedy choice gives up by the fp32 network's own estimate (return
  units; 0 when the actions agree, small when they differ only where Q-values tie)."""
  ref, out = np.asarray(reference_outputs), np.asarray(outputs)
  if ref.shape != out.shape or ref.ndim != 2 or ref.shape[0] == 0:
    raise ValueError(f"fidelity needs two [N, K] output arrays with N >= 1, got {ref.shape} "
                     f"and {out.shape}")
  rng = np.random.default_rng(0)
  a_ref = np.stack([np.asarray(semantics.selector(r, rng, 0)[0]) for r in ref])
  a_out = np.stack([np.asarray(semantics.selector(r, rng, 0)[0]) for r in out])
  if semantics.kind == "continuous":
    rng_ = np.broadcast_to(np.asarray(semantics.action_range, np.float64), a_ref.shape[1:])
    dist = float(np.mean(np.abs(a_out.astype(np.float64) - a_ref) / rng_))
    return {"agreement": 1.0 - dist, "kl": float("nan"), "action_distance": dist,
            "q_regret": float("nan")}
  transform = semantics.transform or (lambda x: x)
  z_ref, z_out = transform(ref.astype(np.float64)), transform(out.astype(np.float64))
  t = float(semantics.temperature) if semantics.kind == "q_values" else 1.0
  regret = float("nan")
  if semantics.kind == "q_values" and a_ref.ndim == 1:
    rows = np.arange(len(z_ref))
    regret = float(np.mean(z_ref[rows, a_ref.astype(int)] - z_ref[rows, a_out.astype(int)]))
  return {"agreement": float(np.mean(a_ref == a_out)), "kl": mean_kl(z_ref / t, z_out / t),
          "action_distance": 0.0, "q_regret": regret}
