"""quantization/fidelity.py: agreement, KL, Q regret and action distance by hand."""
import math

import numpy as np
import pytest

from actorq.components.acting import actors
from actorq.quantization import fidelity as qf


def test_fidelity_definitions_by_hand():
  ref = np.array([[1.0, 0.0], [0.0, 2.0]])
  out = np.array([[0.0, 1.0], [0.0, 2.0]])
  sem = qf.OutputSemantics("q_values", actors.greedy, temperature=2.0)
  got = qf.fidelity(ref, out, sem)
  p = np.exp([0.5, 0.0]) / np.exp([0.5, 0.0]).sum()
  kl0 = float(np.sum(p * np.log(p / p[::-1])))
  assert got["agreement"] == 0.5 and got["kl"] == pytest.approx(kl0 / 2)
  # Q regret: row 0 takes action 1, worth 0 against the fp32 choice's 1; row 1 agrees.
  assert got["q_regret"] == pytest.approx((1.0 - 0.0 + 0.0) / 2)
  logits = qf.fidelity(ref, out, qf.OutputSemantics("logits", actors.greedy))
  assert math.isnan(logits["q_regret"])
  p = np.exp([1.0, 0.0]) / np.exp([1.0, 0.0]).sum()
  assert logits["kl"] == pytest.approx(float(np.sum(p * np.log(p / p[::-1]))) / 2)

  def bounded(outputs, rng, step):
    del rng, step
    return np.clip(outputs, -1.0, 1.0).astype(np.float32), ()

  cont = qf.OutputSemantics("continuous", bounded, action_range=np.array([2.0, 4.0]))
  got = qf.fidelity(np.array([[0.0, 0.0]]), np.array([[0.5, 2.0]]), cont)
  assert got["action_distance"] == pytest.approx((0.5 / 2 + 1.0 / 4) / 2)
  assert got["agreement"] == pytest.approx(1 - 0.25) and math.isnan(got["kl"])
