"""components/aggregate.py: IQM, median, mean, stratified bootstrap intervals, paired
differences, probability of improvement and target figures, on values worked by hand."""
import math

import numpy as np
import pytest

from actorq.components import aggregate as ag


def test_iqm_median_mean_of_known_arrays():
  # IQM drops floor(n/4) = 2 values at each end of 1..8: mean(3, 4, 5, 6).
  assert ag.iqm(np.arange(1, 9)) == pytest.approx(4.5)
  # An outlier moves the mean but not the IQM: 1..7 and 1000 -> mean(3, 4, 5, 6) still.
  assert ag.iqm([1, 2, 3, 4, 5, 6, 7, 1000]) == pytest.approx(4.5)
  assert ag.mean([1, 2, 3, 4, 5, 6, 7, 1000]) == pytest.approx(1028 / 8)
  assert ag.median([1, 2, 3, 4, 5, 6, 7, 1000]) == pytest.approx(4.5)
  assert ag.median([3, 1, 2]) == 2.0
  # Pooled over runs x tasks: 12 scores, 3 dropped at each end -> mean(4..9) = 6.5.
  est, _, _ = ag.interval(np.arange(1, 13, dtype=float).reshape(4, 3), "iqm")
  assert est == pytest.approx(6.5)


def test_bootstrap_interval_is_seeded_and_contains_the_estimate():
  x = np.random.default_rng(7).normal(100.0, 20.0, size=10)
  for name, fn in (("median", np.median), ("iqm", ag.iqm), ("mean", np.mean)):
    est, low, high = ag.interval(x, name, reps=2000, seed=3)
    assert est == pytest.approx(float(fn(x)))
    assert low < est < high
    assert (est, low, high) == ag.interval(x, name, reps=2000, seed=3)  # reproducible
    assert (low, high) != ag.interval(x, name, reps=2000, seed=4)[1:]  # the seed matters
  # A wider coverage gives a wider interval; one score repeated gives a point.
  _, l95, h95 = ag.interval(x, "mean", confidence=0.95)
  _, l50, h50 = ag.interval(x, "mean", confidence=0.50)
  assert l95 < l50 < h50 < h95
  assert ag.interval([500.0] * 10, "iqm") == (500.0, 500.0, 500.0)


def test_stratified_resamples_stay_within_their_task():
  # Two tasks on very different scales: a resample that mixed tasks could produce a task-0
  # mean above 10; stratified, task 0's mean stays within [1, 3] and task 1's within [1001, 1003].
  scores = np.array([[1.0, 1001.0], [2.0, 1002.0], [3.0, 1003.0]])
  task_means = lambda x: x.mean(axis=-2)  # (..., runs, tasks) -> (..., tasks)
  _, low, high = ag.stratified_bootstrap([scores], lambda x: task_means(x)[..., 0])
  assert 1.0 <= low <= high <= 3.0
  _, low, high = ag.stratified_bootstrap([scores], lambda x: task_means(x)[..., 1])
  assert 1001.0 <= low <= high <= 1003.0


def test_paired_difference_excludes_zero_for_a_shift_and_includes_it_for_equal_runs():
  base = np.random.default_rng(0).normal(300.0, 80.0, size=10)  # seeds differ a lot...
  shifted = base + 25.0 + np.random.default_rng(1).normal(0.0, 5.0, size=10)  # ...pairs don't
  est, low, high = ag.paired_difference(shifted, base)
  assert est == pytest.approx(float(np.mean(shifted - base)))
  assert 0.0 < low < est < high
  assert ag.paired_difference(base, base) == (0.0, 0.0, 0.0)
  # Per-seed differences of +-5 that cancel: the interval straddles 0.
  est, low, high = ag.paired_difference(base + np.tile([5.0, -5.0], 5), base)
  assert est == pytest.approx(0.0) and low < 0.0 < high
  # Unpaired, the same shift is lost in the spread between seeds: the intervals of the
  # two means overlap.
  _, _, base_high = ag.interval(base, "mean")
  _, shifted_low, _ = ag.interval(shifted, "mean")
  assert shifted_low < base_high


def test_probability_of_improvement_one_half_zero():
  x = np.array([10.0, 20.0, 30.0, 40.0])
  assert ag.probability_of_improvement(x + 100.0, x) == (1.0, 1.0, 1.0)
  assert ag.probability_of_improvement(x, x + 100.0) == (0.0, 0.0, 0.0)
  assert ag.probability_of_improvement(x, x) == (0.5, 0.5, 0.5)  # ties count 0.5
  # All pairs, not only same-seed pairs: x = (1, 4), y = (2, 3): 1 < 2, 1 < 3, 4 > 2, 4 > 3.
  est, low, high = ag.probability_of_improvement([1.0, 4.0], [2.0, 3.0])
  assert est == 0.5 and 0.0 <= low <= est <= high <= 1.0


def test_run_scores_and_targets():
  steps = [200, 400, 600, 800]
  returns = [20.0, 480.0, 300.0, 500.0]
  s = ag.run_scores(steps, returns, target=475.0)
  assert s == {"final_return": 500.0, "last3_return": pytest.approx((480 + 300 + 500) / 3),
               "best_return": 500.0, "first_step_at_target": 400}
  assert ag.run_scores(steps, returns, target=501.0)["first_step_at_target"] is None
  assert ag.run_scores([200], [9.0])["last3_return"] == 9.0
  # 3 of 4 runs reached it: median of (400, 600, 1000, inf) = 800.
  t = ag.target_summary([400, None, 1000, 600])
  assert t == {"fraction_reached": 0.75, "reached": 3, "runs": 4, "median_first_step": 800.0}
  # Half or fewer reached it: the median is "not reached" (None).
  assert ag.target_summary([400, None])["median_first_step"] is None
  assert ag.target_summary([None, None, 200])["fraction_reached"] == pytest.approx(1 / 3)
  assert ag.censored_median([1.0, float("nan"), 3.0]) == 3.0
  assert math.isinf(ag.censored_median([1.0, None, None]))


def test_aggregate_of_rows_pairs_by_seed():
  rows = [{"precision": "fp32", "seed": s, "final_return": 400.0 + s, "last3_return": 300.0 + s,
           "first_step_at_target": 1000 * (s + 1)} for s in range(4)]
  # int8 has seeds 1..4: only seeds 1, 2, 3 are paired; each int8 run is 10 above fp32's.
  rows += [{"precision": "int8", "seed": s, "final_return": 410.0 + s, "last3_return": 310.0 + s,
            "first_step_at_target": ""} for s in range(1, 5)]
  r = ag.aggregate(rows, target=405.0, reps=500)
  assert r["precisions"]["fp32"]["seeds"] == [0, 1, 2, 3]
  assert r["precisions"]["fp32"]["final_return"]["mean"]["value"] == pytest.approx(401.5)
  assert r["precisions"]["fp32"]["target"]["fraction_reached"] == 1.0
  assert r["precisions"]["int8"]["target"] == {"fraction_reached": 0.0, "reached": 0, "runs": 4,
                                               "median_first_step": None}
  c = r["comparisons"]["int8"]
  assert c["reference"] == "fp32" and c["seeds"] == [1, 2, 3]
  assert c["final_return"]["difference"] == {"value": 10.0, "ci_low": 10.0, "ci_high": 10.0}
  # int8 seed s (410+s) beats fp32 seed t (400+t) for every pair among seeds 1..3.
  assert c["last3_return"]["probability_of_improvement"]["value"] == 1.0
  assert "fp32" not in r["comparisons"]
  rows_csv = ag.flat_rows(r)
  assert {(x["precision"], x["statistic"]) for x in rows_csv} >= {
      ("fp32", "iqm"), ("int8", "difference"), ("int8", "probability_of_improvement"),
      ("fp32", "fraction_reached")}
  with pytest.raises(ValueError, match="appears twice"):
    ag.aggregate(rows + rows[:1])


# ---------------------------------------------------------------------------------
# Parity verdicts: two one-sided tests on the paired t interval (hand-computed).
# ---------------------------------------------------------------------------------
T_95_4 = 2.131847  # t_{0.95, 4}: a 90% two-sided interval with 5 pairs


def _pairs(d):
  y = np.full(len(d), 400.0)
  return y + np.asarray(d, float), y


def test_paired_t_interval_hand_computed():
  # d = [10, -10, 0, 20, -20]: mean 0, sd sqrt(1000 / 4) = 15.8114, se = sd / sqrt(5)
  x, y = _pairs([10, -10, 0, 20, -20])
  mean, low, high, sd = ag.paired_t_interval(x, y)
  half = T_95_4 * np.sqrt(250.0) / np.sqrt(5.0)  # 15.0745
  assert mean == pytest.approx(0.0)
  assert sd == pytest.approx(np.sqrt(250.0))
  assert (low, high) == pytest.approx((-half, half), rel=1e-6)
  with pytest.raises(ValueError, match="at least 2 pairs"):
    ag.paired_t_interval([1.0], [2.0])
  with pytest.raises(ValueError, match="one length"):
    ag.paired_t_interval([1.0, 2.0], [2.0, 3.0, 4.0])


@pytest.mark.parametrize("d, margin, expected, interval", [
    # mean 0, [-15.07, 15.07]: inside (-50, 50); not inside (-10, 10)
    ([10, -10, 0, 20, -20], 50.0, "equivalent", (-15.0745, 15.0745)),
    ([10, -10, 0, 20, -20], 10.0, "inconclusive", (-15.0745, 15.0745)),
    # mean -50, [-65.07, -34.93]: below 0, reaches past -50 -> worse; inside (-70, 70)
    ([-60, -40, -50, -70, -30], 50.0, "worse", (-65.0745, -34.9255)),
    ([-60, -40, -50, -70, -30], 70.0, "equivalent", (-65.0745, -34.9255)),
    # mean 50, [34.93, 65.07]: above 0 -> better at 50
    ([30, 40, 50, 60, 70], 50.0, "better", (34.9255, 65.0745)),
    # mean 0, sd sqrt(25000 / 4) = 79.06, half 2.131847 * 35.355 = 75.37: holds 0, past 50
    ([100, -100, 0, 50, -50], 50.0, "inconclusive", (-75.3730, 75.3730)),
])
def test_tost_verdicts_hand_computed(d, margin, expected, interval):
  x, y = _pairs(d)
  t = ag.tost(x, y, margin)
  assert t["verdict"] == expected
  assert (t["ci_low"], t["ci_high"]) == pytest.approx(interval, abs=1e-3)
  assert t["interval"] == "paired t" and t["confidence"] == pytest.approx(0.90)
  # Both one-sided tests reject at 5% exactly when the verdict is "equivalent".
  assert (t["p_tost"] < 0.05) == (expected == "equivalent")


def test_tost_p_values_hand_computed():
  # d = [-60, -40, -50, -70, -30], m = 70: t- = (-50 + 70) / 7.0711 = 2.8284 on 4 df,
  # P(T4 > t) = 1/2 - t (t^2 + 6) / (2 (t^2 + 4)^(3/2)) (the t_4 cdf in closed form)
  # = 1/2 - 2.8284 * 14 / (2 * 12^1.5) = 0.02371; t+ = (-50 - 70) / 7.0711 = -16.97, tiny.
  x, y = _pairs([-60, -40, -50, -70, -30])
  t = ag.tost(x, y, 70.0)
  assert t["p_lower"] == pytest.approx(0.02371, abs=1e-5)
  assert t["p_upper"] < 1e-4
  assert t["p_tost"] == t["p_lower"]


def test_verdict_rules_and_a_constant_difference():
  assert ag.verdict(-49.0, 49.0, 50.0) == "equivalent"
  assert ag.verdict(-50.0, 10.0, 50.0) == "inconclusive"  # the bound itself is not inside
  assert ag.verdict(-120.0, -1.0, 50.0) == "worse"
  assert ag.verdict(1.0, 80.0, 50.0) == "better"
  with pytest.raises(ValueError, match="margin must be > 0"):
    ag.verdict(-1.0, 1.0, 0.0)
  # Every pair differs by -5: sd 0, the interval is the point, equivalent at 50.
  t = ag.tost([495.0, 495.0, 495.0], [500.0, 500.0, 500.0], 50.0)
  assert (t["ci_low"], t["ci_high"], t["verdict"]) == (-5.0, -5.0, "equivalent")
  assert t["pairs_needed"] is None


def test_pairs_needed_for_the_measured_paired_sd():
  # Normal approximation: n = (z_0.95 + z_0.90)^2 (sd / m)^2 = (1.6449 + 1.2816)^2 *
  # (92 / 50)^2 = 29.0; with t quantiles a few pairs more.
  n = ag.pairs_needed(92.0, 50.0)
  assert 29 <= n <= 33
  assert ag.tost_power(n, 92.0, 50.0) >= 0.8 > ag.tost_power(n - 1, 92.0, 50.0)
  # Ten pairs have almost no power at this sd; a true difference past the margin never passes.
  assert ag.tost_power(10, 92.0, 50.0) < 0.3
  assert ag.pairs_needed(92.0, 50.0, true_difference=60.0) is None
  # Halving the sd quarters the pairs (about).
  assert ag.pairs_needed(46.0, 50.0) <= n / 3


def test_aggregate_writes_the_verdicts_with_a_margin():
  rows = []
  for s, d in enumerate([-60, -40, -50, -70, -30]):
    rows.append({"precision": "fp32", "seed": s, "final_return": 500.0, "last3_return": 500.0})
    rows.append({"precision": "int8", "seed": s, "final_return": 500.0 + d,
                 "last3_return": 500.0 + d})
  r = ag.aggregate(rows, reps=200, margin=50.0)
  assert r["margin"] == 50.0
  t = r["comparisons"]["int8"]["final_return"]["tost"]
  assert t["verdict"] == "worse" and t["n"] == 5
  assert (t["ci_low"], t["ci_high"]) == pytest.approx((-65.0745, -34.9255), abs=1e-3)
  assert ("int8", "tost_margin_50_worse") in {(x["precision"], x["statistic"])
                                              for x in ag.flat_rows(r)}
  assert "tost" not in ag.aggregate(rows, reps=200)["comparisons"]["int8"]["final_return"]
