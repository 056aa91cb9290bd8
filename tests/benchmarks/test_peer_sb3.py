"""benchmarks/peer_sb3.summarize on hand-worked runs (the side-by-side itself needs an
SB3 + PyTorch environment and is not run in CI)."""
import math

import pytest

from actorq.benchmarks import peer_sb3


def _run(seed, sps, first):
  return {"seed": seed, "steps_per_second": sps, "first_step_at_target": first}


def test_summarize_medians_and_paired_ratios():
  results = {"actorq": [_run(0, 300.0, 5000), _run(1, 340.0, 35000), _run(2, 320.0, None)],
             "sb3": [_run(0, 250.0, None), _run(1, 400.0, 20000), _run(2, 320.0, 10000)]}
  s = peer_sb3.summarize(results)
  assert s["actorq"]["median_steps_per_second"] == 320.0
  assert s["sb3"]["median_steps_per_second"] == 320.0
  assert s["ratio_of_medians"] == 1.0
  assert s["paired_ratios"] == pytest.approx([1.2, 0.85, 1.0])
  assert s["median_paired_ratio"] == pytest.approx(1.0)
  # seconds to target: 5000/300, 35000/340, inf -> median 35000/340
  assert s["actorq"]["median_seconds_to_target"] == pytest.approx(35000 / 340)
  assert s["actorq"]["first_step_at_target"] == [5000, 35000, None]
  assert s["sb3"]["median_seconds_to_target"] == pytest.approx(20000 / 400)
  never = {"actorq": [_run(0, 300.0, None)], "sb3": [_run(0, 300.0, None)]}
  assert math.isinf(peer_sb3.summarize(never)["sb3"]["median_seconds_to_target"])


def test_summarize_refuses_unpaired_seeds():
  with pytest.raises(ValueError, match="same seeds"):
    peer_sb3.summarize({"actorq": [_run(0, 1.0, None)], "sb3": [_run(1, 1.0, None)]})
