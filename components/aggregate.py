"""Statistics over per-seed results: point estimates with bootstrap confidence intervals.

A learning result is an aggregate over seeds, not one draw. Following Agarwal, Schwarzer,
Castro, Courville and Bellemare, "Deep Reinforcement Learning at the Edge of the
Statistical Precipice" (NeurIPS 2021; "Agarwal et al. 2021" below):

* IQM, the interquartile mean: the mean of the middle 50% of the scores, pooled over
  runs (and tasks), `scipy.stats.trim_mean(scores, 0.25)` (it drops floor(n/4) scores at
  each end). Robust to an outlier seed, less noisy than the median.
* 95% **stratified bootstrap** confidence intervals: each resample draws runs with
  replacement independently within every task (the strata; a sweep over one environment
  is one stratum), recomputes the statistic, and the interval is the 2.5th and 97.5th
  percentiles of the resampled statistics (percentile bootstrap, Efron & Tibshirani 1993).
* probability of improvement P(X > Y): for scores x_1..x_N of X and y_1..y_M of Y on a
  task, (1 / NM) * sum_ij S(x_i, y_j) with S = 1 if x_i > y_j, 0.5 if equal, 0 otherwise
  (the Mann-Whitney U statistic over NM), averaged over tasks.

Comparisons between precisions are **paired by seed**: a seed gives every precision the
same environment, network initialisation and replay seeds, so the bootstrap resamples
seeds, each carrying its pair of runs (X's and Y's run with that seed). Both the mean
paired difference X - Y and P(X > Y) get their interval from those paired resamples
(rliable's own interval for P(X > Y) resamples X and Y independently instead).

Why not rliable (checked 2026-12-01 for this pinned stack): `rliable` 1.2.0 installs
without moving a pin of requirements/constraints-py310.txt, but brings ten packages
(arch 7.2.0, statsmodels 0.15.0, pandas 2.3.3, seaborn, patsy, formulaic, narwhals, ...),
and its `StratifiedBootstrap.update_indices` draws its resamples from NumPy's global
generator (`np.random.choice`), ignoring the `random_state` it is given: the same call
with the same `random_state` gave different intervals after `np.random.seed(0)` and
`np.random.seed(1)` (arch 7.2.0 also warns that `random_state` is deprecated). A report
would be reproducible only by seeding NumPy's global state. `scipy.stats.bootstrap` is
seeded, but not stratified, and its default BCa interval is NaN when every seed has the
same score (CartPole runs that all end at 500). So the bootstrap here is a small,
vectorised percentile bootstrap drawn from `numpy.random.default_rng(seed)`: the same
inputs and seed give the same interval, and nothing global is touched.

**Parity verdicts** (`tost`, `verdict`): a precision is compared with the reference
within an equivalence margin m declared before the runs (return units), by two one-sided
tests (Schuirmann 1987, "A comparison of the two one-sided tests procedure and the power
approach for assessing the equivalence of average bioavailability", J. Pharmacokinet.
Biopharm. 15(6); Lakens 2017, "Equivalence tests", Soc. Psychol. Personal. Sci. 8(4)):
at level alpha = 0.05 each, H0- "mean difference <= -m" and H0+ "mean difference >= m"
are both rejected exactly when the 90% (1 - 2 alpha) interval of the mean paired
difference lies inside (-m, m). The interval is the **paired t interval**
mean(d) +- t_{0.95, n-1} sd(d) / sqrt(n) of the per-seed differences d_i = x_i - y_i,
not a bootstrap one: it is Schuirmann's test itself (the TOST p-value is
max(p-, p+) of the two one-sided t-tests and is < 0.05 exactly when the interval is
inside the margin), and the percentile bootstrap is too narrow at the 10-30 seeds a
sweep has (it uses the plug-in sd with divisor n and normal rather than t quantiles: at
n = 10 its nominal 90% interval covers about as much as an 85% t interval, at n = 30 an 88% one), which would
make "equivalent" easier to reach than the declared alpha allows. The t interval assumes
the mean difference is near normal (the central limit theorem over seeds); per-seed
differences of capped returns are skewed (many 0s where both runs end at 500, a few
large losses), so the verdict is as good as that approximation, stated beside it.
The verdict (`verdict`) is one of:
  equivalent    -m < low and high < m (both one-sided tests reject);
  worse         high < 0 and not equivalent (X significantly below the reference at
                one-sided 5%, and not shown to be within the margin);
  better        low > 0 and not equivalent;
  inconclusive  otherwise (the interval holds 0 and reaches past a margin: more seeds).
`tost_power` / `pairs_needed` give how many seeds a margin needs (the approximation of
Chow, Shao and Wang 2008, "Sample Size Calculations in Clinical Research", sec. 3.2,
with central t quantiles).

Everything here is pure: NumPy arrays or plain rows in, floats and dicts out.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

import numpy as np
from scipy import stats as sp_stats

CONFIDENCE = 0.95   # two-sided coverage of every interval
REPS = 10_000       # bootstrap resamples per interval (vectorised: milliseconds for 10 seeds)
SEED = 0            # seed of the bootstrap's generator; every interval restarts from it
LAST_EVALS = 3      # "last-3" return: mean greedy return over a run's last 3 evaluations
REFERENCE = "fp32"  # the precision every other one is compared with (paired by seed)
METRICS = ("final_return", "last3_return")
_CHUNK = 1_000      # resamples evaluated at once
STATISTICS = ("median", "iqm", "mean")
TOST_ALPHA = 0.05   # each one-sided test's level: the verdict's interval is 1 - 2 alpha = 90%
VERDICTS = ("equivalent", "worse", "better", "inconclusive")


# ---------------------------------------------------------------------------------
# Statistics. Each reduces the last axis: a (..., n) array -> (...,) array, so that a
# (reps, n) stack of resamples is reduced in one call.
# ---------------------------------------------------------------------------------
def iqm(scores, axis: int = -1):
  """Interquartile mean (Agarwal et al. 2021): the mean of the scores left after
  dropping floor(n/4) from each end, e.g. IQM(1..8) = mean(3, 4, 5, 6) = 4.5."""
  return sp_stats.trim_mean(np.asarray(scores, dtype=float), 0.25, axis=axis)


def median(scores, axis: int = -1):
  return np.median(np.asarray(scores, dtype=float), axis=axis)


def mean(scores, axis: int = -1):
  return np.mean(np.asarray(scores, dtype=float), axis=axis)


STATISTIC_FUNCTIONS: Dict[str, Callable] = {"median": median, "iqm": iqm, "mean": mean}


def _pooled(fn: Callable) -> Callable:
  """`fn` over every score of a (..., runs, tasks) array: runs and tasks pooled."""
  return lambda x: fn(x.reshape(x.shape[:-2] + (-1,)), axis=-1)


def _prob_improvement(x: np.ndarray, y: np.ndarray) -> np.ndarray:
  """P(X > Y) of (..., runs, tasks) arrays: per task over all N x M pairs, ties 0.5,
  then averaged over tasks."""
  xi = x[..., :, None, :]
  yj = y[..., None, :, :]
  s = (xi > yj).astype(float) + 0.5 * (xi == yj)
  return s.mean(axis=(-3, -2)).mean(axis=-1)


def _mean_difference(x: np.ndarray, y: np.ndarray) -> np.ndarray:
  """Mean over runs and tasks of the paired differences x - y."""
  return (x - y).mean(axis=(-2, -1))


def _as_runs_by_tasks(scores) -> np.ndarray:
  a = np.asarray(scores, dtype=float)
  if a.ndim == 1:
    a = a[:, None]
  if a.ndim != 2 or a.shape[0] == 0 or a.shape[1] == 0:
    raise ValueError(f"scores must be a non-empty (runs,) or (runs, tasks) array, got shape "
                     f"{np.shape(scores)}")
  if not np.all(np.isfinite(a)):
    raise ValueError("scores must be finite")
  return a


def stratified_bootstrap(samples: Sequence, statistic: Callable, reps: int = REPS,
                         confidence: float = CONFIDENCE, seed: int = SEED
                         ) -> Tuple[float, float, float]:
  """Point estimate and percentile bootstrap interval of `statistic(*samples)`.

  Args:
    samples: one array, or several of the same shape, each (runs,) or (runs, tasks).
      Several arrays are resampled with the **same** run indices (paired: run i of each
      array belongs to seed i).
    statistic: maps arrays of shape (..., runs, tasks), one per sample, to (...,).
    reps: bootstrap resamples.
    confidence: two-sided coverage, e.g. 0.95 for the 2.5th-97.5th percentiles.
    seed: seed of `numpy.random.default_rng`; the same inputs and seed give the same
      interval.
  Returns:
    (estimate, low, high).
  """
  arrays = [_as_runs_by_tasks(s) for s in samples]
  shape = arrays[0].shape
  if any(a.shape != shape for a in arrays):
    raise ValueError(f"paired samples must have one shape, got {[a.shape for a in arrays]}")
  if not 0.0 < confidence < 1.0:
    raise ValueError(f"confidence must be in (0, 1), got {confidence}")
  runs, tasks = shape
  rng = np.random.default_rng(seed)
  cols = np.arange(tasks)[None, None, :]
  boot = []
  for start in range(0, reps, _CHUNK):  # chunks bound the memory of P(X > Y)'s N x M pairs
    # Stratified: within each task (column), draw `runs` run indices with replacement.
    idx = rng.integers(0, runs, size=(min(_CHUNK, reps - start), runs, tasks))
    boot.append(np.asarray(statistic(*[a[idx, cols] for a in arrays]), dtype=float))
  boot = np.concatenate(boot)
  alpha = 100.0 * (1.0 - confidence) / 2.0
  low, high = np.percentile(boot, [alpha, 100.0 - alpha])
  estimate = float(np.asarray(statistic(*[a[None] for a in arrays])).reshape(-1)[0])
  return estimate, float(low), float(high)


def interval(scores, statistic: str = "iqm", **kw) -> Tuple[float, float, float]:
  """(estimate, low, high) of the median, IQM or mean of `scores` ((runs,) or (runs, tasks))
  with its stratified bootstrap interval; `kw`: reps, confidence, seed."""
  return stratified_bootstrap([scores], _pooled(STATISTIC_FUNCTIONS[statistic]), **kw)


def paired_difference(x, y, **kw) -> Tuple[float, float, float]:
  """(mean of x_i - y_i, low, high): `x[i]` and `y[i]` are the same seed's runs."""
  return stratified_bootstrap([x, y], _mean_difference, **kw)


def probability_of_improvement(x, y, **kw) -> Tuple[float, float, float]:
  """(P(X > Y), low, high), Agarwal et al. 2021's definition (ties count 0.5), the
  interval from resamples of seeds (paired: `x[i]` and `y[i]` are seed i's runs)."""
  return stratified_bootstrap([x, y], _prob_improvement, **kw)


# ---------------------------------------------------------------------------------
# Parity: two one-sided tests on the paired differences.
# ---------------------------------------------------------------------------------
def paired_t_interval(x, y, confidence: float = 1.0 - 2 * TOST_ALPHA
                      ) -> Tuple[float, float, float, float]:
  """(mean, low, high, sd) of the paired differences d_i = x_i - y_i: the t interval
  mean(d) +- t_{(1+confidence)/2, n-1} * sd(d) / sqrt(n), sd with divisor n - 1.

  Raises:
    ValueError: x and y of different lengths, fewer than 2 pairs, or non-finite values.
  """
  if np.ndim(x) != 1 or np.shape(x) != np.shape(y):
    raise ValueError(f"x and y must be paired 1-d arrays of one length, got shapes "
                     f"{np.shape(x)} and {np.shape(y)}")
  d = np.asarray(x, dtype=float) - np.asarray(y, dtype=float)
  if d.size < 2:
    raise ValueError(f"a t interval needs at least 2 pairs, got {d.size}")
  if not np.all(np.isfinite(d)):
    raise ValueError("paired scores must be finite")
  n, m = d.size, float(d.mean())
  sd = float(d.std(ddof=1))
  half = float(sp_stats.t.ppf(0.5 + confidence / 2.0, n - 1)) * sd / math.sqrt(n)
  return m, m - half, m + half, sd


def verdict(low: float, high: float, margin: float) -> str:
  """The parity verdict of an interval [low, high] of X - reference at margin m > 0 (see
  the module docstring): equivalent, worse, better or inconclusive."""
  if not margin > 0:
    raise ValueError(f"the equivalence margin must be > 0, got {margin}")
  if -margin < low and high < margin:
    return "equivalent"
  if high < 0:
    return "worse"
  if low > 0:
    return "better"
  return "inconclusive"


def tost(x, y, margin: float, alpha: float = TOST_ALPHA) -> Dict[str, Any]:
  """Two one-sided paired t-tests of X - Y against the margin (Schuirmann 1987).

  Args:
    x, y: [n] scores, x[i] and y[i] from seed i (n >= 2).
    margin: the equivalence margin m > 0, in the scores' units, declared before the runs.
    alpha: level of each one-sided test (the interval is 1 - 2 alpha).
  Returns:
    {"margin", "alpha", "confidence", "interval": "paired t", "n", "mean_difference",
     "sd_difference", "ci_low", "ci_high", "p_lower" (H0: mean <= -m), "p_upper"
     (H0: mean >= m), "p_tost" (max of both), "verdict", "pairs_needed" (seeds for 80%
     power at a true difference 0 with this sd; None for sd 0)}.
  Raises:
    ValueError: as `paired_t_interval`, or margin <= 0.
  """
  mean_d, low, high, sd = paired_t_interval(x, y, 1.0 - 2.0 * alpha)
  n = len(np.asarray(x))
  if sd > 0:
    se = sd / math.sqrt(n)
    p_lower = float(sp_stats.t.sf((mean_d + margin) / se, n - 1))
    p_upper = float(sp_stats.t.cdf((mean_d - margin) / se, n - 1))
  else:  # every pair differs by the same amount: the tests are decided by the point
    p_lower = 0.0 if mean_d > -margin else 1.0
    p_upper = 0.0 if mean_d < margin else 1.0
  return {"margin": float(margin), "alpha": alpha, "confidence": 1.0 - 2.0 * alpha,
          "interval": "paired t", "n": n, "mean_difference": mean_d, "sd_difference": sd,
          "ci_low": low, "ci_high": high, "p_lower": p_lower, "p_upper": p_upper,
          "p_tost": max(p_lower, p_upper), "verdict": verdict(low, high, margin),
          "pairs_needed": pairs_needed(sd, margin, alpha) if sd > 0 else None}


def tost_power(n: int, sd: float, margin: float, alpha: float = TOST_ALPHA,
               true_difference: float = 0.0) -> float:
  """Approximate power of the paired TOST with n pairs: the probability that the 90%
  interval falls inside (-m, m) when the mean difference is `true_difference` and the
  differences' sd is `sd` (Chow, Shao and Wang 2008, sec. 3.2):
  max(0, F(( m - d) / se - t) + F((m + d) / se - t) - 1), se = sd / sqrt(n),
  t = t_{1-alpha, n-1}, F the t_{n-1} cdf."""
  if n < 2:
    return 0.0
  se = sd / math.sqrt(n)
  t = sp_stats.t.ppf(1.0 - alpha, n - 1)
  d = abs(true_difference)
  power = (sp_stats.t.cdf((margin - d) / se - t, n - 1)
           + sp_stats.t.cdf((margin + d) / se - t, n - 1) - 1.0)
  return float(max(0.0, power))


def pairs_needed(sd: float, margin: float, alpha: float = TOST_ALPHA, power: float = 0.8,
                 true_difference: float = 0.0, max_pairs: int = 100_000) -> Optional[int]:
  """The fewest pairs whose TOST reaches `power` (`tost_power`); None if none up to
  `max_pairs` does (e.g. |true_difference| >= margin)."""
  if not sd > 0 or not margin > 0:
    raise ValueError(f"sd and margin must be > 0, got sd={sd}, margin={margin}")
  lo, hi = 2, max_pairs
  if tost_power(hi, sd, margin, alpha, true_difference) < power:
    return None
  while lo < hi:  # power grows with n
    mid = (lo + hi) // 2
    if tost_power(mid, sd, margin, alpha, true_difference) >= power:
      hi = mid
    else:
      lo = mid + 1
  return lo


# ---------------------------------------------------------------------------------
# Per-run figures and targets.
# ---------------------------------------------------------------------------------
def mean_of_last(returns: Sequence[float], n: int = LAST_EVALS) -> float:
  """Mean of the last `n` values (all of them if fewer); NaN for none."""
  tail = list(returns)[-n:]
  return float(sum(tail) / len(tail)) if tail else math.nan


def first_step_at(steps: Sequence[float], returns: Sequence[float],
                  target: Optional[float]) -> Optional[int]:
  """The first evaluation step whose return is >= `target`; None if none was (or no target)."""
  if target is None:
    return None
  for step, value in zip(steps, returns):
    if value >= target:
      return int(step)
  return None


def run_scores(steps: Sequence[float], returns: Sequence[float],
               target: Optional[float] = None) -> Dict[str, Any]:
  """One run's figures from its evaluations (actor steps, greedy returns; step order):
  final_return, last3_return (mean of the last `LAST_EVALS`), best_return and
  first_step_at_target (None: never reached, or no target)."""
  if not len(returns):
    raise ValueError("a run without evaluations has no scores")
  return {"final_return": float(returns[-1]), "last3_return": mean_of_last(returns),
          "best_return": float(max(returns)),
          "first_step_at_target": first_step_at(steps, returns, target)}


def censored_median(values: Iterable[Optional[float]]) -> float:
  """Median where None/NaN (an event that did not happen) counts as +inf: the result is
  inf ("not reached") unless more than half of the values are finite."""
  vals = [math.inf if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)
          for v in values]
  if not vals:
    return math.nan
  vals.sort()
  n = len(vals)
  if n % 2:
    return vals[n // 2]
  lo, hi = vals[n // 2 - 1], vals[n // 2]
  return math.inf if math.inf in (lo, hi) else (lo + hi) / 2.0


def target_summary(first_steps: Sequence[Optional[int]]) -> Dict[str, Any]:
  """Fraction of runs that reached the target, their count, and the median first step at
  the target (a run that never reached it counts as +inf; None when the median is inf)."""
  reached = sum(s is not None for s in first_steps)
  med = censored_median(first_steps)
  return {"fraction_reached": reached / len(first_steps) if first_steps else math.nan,
          "reached": reached, "runs": len(first_steps),
          "median_first_step": None if math.isinf(med) else med}


# ---------------------------------------------------------------------------------
# A sweep's aggregate.
# ---------------------------------------------------------------------------------
def _ci(triple: Tuple[float, float, float]) -> Dict[str, float]:
  estimate, low, high = triple
  return {"value": estimate, "ci_low": low, "ci_high": high}


def aggregate(rows: Iterable[Mapping[str, Any]], target: Optional[float] = None,
              reference: str = REFERENCE, reps: int = REPS, confidence: float = CONFIDENCE,
              seed: int = SEED, margin: Optional[float] = None,
              metrics: Sequence[str] = METRICS) -> Dict[str, Any]:
  """The statistics of a sweep from its per-run rows.

  Args:
    rows: one per run: precision, seed, final_return, last3_return and, with a target,
      first_step_at_target (None or NaN: not reached), e.g. the rows of seeds.csv.
    target: the target return (None: no target figures).
    reference: the precision the others are compared with, paired by seed.
    reps, confidence, seed: of every bootstrap interval.
    margin: the equivalence margin (return units) declared before the runs: each
      comparison's metrics then get a "tost" entry (`tost`) with its verdict (None: no
      verdicts; fewer than 2 paired seeds: verdict "inconclusive", no interval).
    metrics: the per-run scores aggregated (default: final_return and last3_return).
  Returns:
    {"bootstrap": {...}, "target", "reference",
     "precisions": {p: {"seeds", "n", <metric>: {<statistic>: {value, ci_low, ci_high}},
                        "target": {fraction_reached, reached, runs, median_first_step}}},
     "comparisons": {p: {"reference", "seeds", "n",
                         <metric>: {"difference": {...}, "probability_of_improvement": {...}}}}}
    where metric is final_return or last3_return, statistic median, iqm or mean; the
    difference is the mean over seeds of p's return minus the reference's; with a
    margin, "margin" at the top and each comparison metric's "tost".
  Raises:
    ValueError: a (precision, seed) given twice, or a non-finite return.
  """
  kw = {"reps": reps, "confidence": confidence, "seed": seed}
  by_precision: Dict[str, Dict[int, Mapping[str, Any]]] = {}
  for row in rows:
    runs = by_precision.setdefault(str(row["precision"]), {})
    s = int(row["seed"])
    if s in runs:
      raise ValueError(f"precision {row['precision']} seed {s} appears twice")
    runs[s] = row
  out: Dict[str, Any] = {
      "bootstrap": {"method": "stratified percentile bootstrap (Agarwal et al. 2021)",
                    "reps": reps, "confidence": confidence, "seed": seed},
      "target": target, "reference": reference, "precisions": {}, "comparisons": {}}
  if tuple(metrics) != METRICS:
    out["metrics"] = list(metrics)
  if margin is not None:
    out["margin"] = float(margin)
  for p, runs in by_precision.items():
    seeds = sorted(runs)
    entry: Dict[str, Any] = {"seeds": seeds, "n": len(seeds)}
    for metric in metrics:
      scores = [float(runs[s][metric]) for s in seeds]
      entry[metric] = {name: _ci(interval(scores, name, **kw)) for name in STATISTICS}
    if target is not None:
      entry["target"] = target_summary([_step(runs[s].get("first_step_at_target"))
                                        for s in seeds])
    out["precisions"][p] = entry
  ref = by_precision.get(reference)
  for p, runs in by_precision.items():
    if ref is None or p == reference:
      continue
    seeds = sorted(set(runs) & set(ref))
    if not seeds:
      continue
    entry = {"reference": reference, "seeds": seeds, "n": len(seeds)}
    for metric in metrics:
      x = [float(runs[s][metric]) for s in seeds]
      y = [float(ref[s][metric]) for s in seeds]
      entry[metric] = {"difference": _ci(paired_difference(x, y, **kw)),
                       "probability_of_improvement": _ci(probability_of_improvement(x, y, **kw))}
      if margin is not None:
        entry[metric]["tost"] = (tost(x, y, margin) if len(seeds) >= 2 else
                                 {"margin": float(margin), "n": len(seeds),
                                  "verdict": "inconclusive"})
    out["comparisons"][p] = entry
  return out


def _step(value) -> Optional[int]:
  """A first-step-at-target cell: None, NaN or '' -> None."""
  if value is None or value == "":
    return None
  value = float(value)
  return None if math.isnan(value) else int(value)


def flat_rows(result: Mapping[str, Any]) -> List[Dict[str, Any]]:
  """`aggregate()`'s result as rows of aggregate.csv: precision, vs (the reference, for
  paired comparisons), metric, statistic, value, ci_low, ci_high, n."""
  rows = []
  metrics = result.get("metrics", METRICS)
  for p, entry in result["precisions"].items():
    for metric in metrics:
      for name in STATISTICS:
        rows.append(dict(entry[metric][name], precision=p, vs="", metric=metric,
                         statistic=name, n=entry["n"]))
    if "target" in entry:
      t = entry["target"]
      for name in ("fraction_reached", "median_first_step"):
        rows.append({"precision": p, "vs": "", "metric": f"target_{result['target']:g}",
                     "statistic": name, "value": "" if t[name] is None else t[name],
                     "ci_low": "", "ci_high": "", "n": entry["n"]})
  for p, entry in result["comparisons"].items():
    for metric in metrics:
      for name in ("difference", "probability_of_improvement"):
        rows.append(dict(entry[metric][name], precision=p, vs=entry["reference"], metric=metric,
                         statistic=name, n=entry["n"]))
      t = entry[metric].get("tost")
      if t is not None:  # the verdict's 90% paired t interval, in the statistic's name
        rows.append({"precision": p, "vs": entry["reference"], "metric": metric,
                     "statistic": f"tost_margin_{t['margin']:g}_{t['verdict']}",
                     "value": t.get("mean_difference", ""), "ci_low": t.get("ci_low", ""),
                     "ci_high": t.get("ci_high", ""), "n": t["n"]})
  return rows


CSV_FIELDS = ("precision", "vs", "metric", "statistic", "value", "ci_low", "ci_high", "n")
