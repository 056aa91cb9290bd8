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
              seed: int = SEED) -> Dict[str, Any]:
  """The statistics of a sweep from its per-run rows.

  Args:
    rows: one per run: precision, seed, final_return, last3_return and, with a target,
      first_step_at_target (None or NaN: not reached), e.g. the rows of seeds.csv.
    target: the target return (None: no target figures).
    reference: the precision the others are compared with, paired by seed.
    reps, confidence, seed: of every bootstrap interval.
  Returns:
    {"bootstrap": {...}, "target", "reference",
     "precisions": {p: {"seeds", "n", <metric>: {<statistic>: {value, ci_low, ci_high}},
                        "target": {fraction_reached, reached, runs, median_first_step}}},
     "comparisons": {p: {"reference", "seeds", "n",
                         <metric>: {"difference": {...}, "probability_of_improvement": {...}}}}}
    where metric is final_return or last3_return, statistic median, iqm or mean; the
    difference is the mean over seeds of p's return minus the reference's.
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
  for p, runs in by_precision.items():
    seeds = sorted(runs)
    entry: Dict[str, Any] = {"seeds": seeds, "n": len(seeds)}
    for metric in METRICS:
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
    for metric in METRICS:
      x = [float(runs[s][metric]) for s in seeds]
      y = [float(ref[s][metric]) for s in seeds]
      entry[metric] = {"difference": _ci(paired_difference(x, y, **kw)),
                       "probability_of_improvement": _ci(probability_of_improvement(x, y, **kw))}
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
  for p, entry in result["precisions"].items():
    for metric in METRICS:
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
    for metric in METRICS:
      for name in ("difference", "probability_of_improvement"):
        rows.append(dict(entry[metric][name], precision=p, vs=entry["reference"], metric=metric,
                         statistic=name, n=entry["n"]))
  return rows


CSV_FIELDS = ("precision", "vs", "metric", "statistic", "value", "ci_low", "ci_high", "n")
