"""What population-based training buys over independent seeds at the same actor steps (issue 43).

Population-based training (Jaderberg et al. 2017, "Population Based Training of Neural
Networks") spends N members' actor steps on one population; a sweep of N independent seeds
(`actorq sweep`, default hyperparameters) spends the same. This module compares the two from
their files, with the same figures for both, treating a sweep's seeds as the members of an
independent "population":

* ``best_final``: the best member's final greedy return (the member a user keeps);
* ``median_final``: the median over members of their final greedy returns;
* ``reached_final``: the fraction of members whose final return is >= the target;
* ``first_any``: the first per-member actor step at which any member's evaluation was >=
  the target (None: never), i.e. how soon the population holds one policy at the target;
* ``median_first``: the censored median over members of each member's first step at the
  target (a member that never reached it counts as +inf; None when the median is inf).

A PBT member is a slot: after an exploit it holds a copy of another member's parameters, so
its later evaluations continue another lineage; the figures above read the slots as they
are (what the population has at each step), which is what PBT's fitness and its ``best/``
run directory use too.

A sweep of M >= N seeds gives one independent population per N-subset of its seeds;
`subset_figures` computes the figures of every such subset (all C(M, N) of them) so the
expected figures of N independent seeds, and their spread, come from the M runs there are.

Everything here is pure: rows in, dicts and text out. Files are read by `load_pbt` (a PBT
run directory's ``pbt.csv``) and `load_sweep_run` (a train run directory's ``eval.csv``).
"""
from __future__ import annotations

import csv
import itertools
import math
import pathlib
import statistics
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from actorq.components import aggregate

Curve = List[Tuple[int, float]]  # (actor steps of the member, greedy return), step order
FIGURES = ("best_final", "median_final", "reached_final", "first_any", "median_first")


def load_pbt(run_dir) -> Dict[int, Curve]:
  """Each member's evaluations from ``<run_dir>/pbt.csv`` (columns member, actor_steps,
  episode_return; rows in the order they happened), sorted by actor steps.

  Raises:
    FileNotFoundError: no pbt.csv in `run_dir`.
    ValueError: pbt.csv lacks one of those columns.
  """
  path = pathlib.Path(run_dir) / "pbt.csv"
  with path.open(newline="") as f:
    rows = list(csv.DictReader(f))
  need = {"member", "actor_steps", "episode_return"}
  if rows and not need <= set(rows[0]):
    raise ValueError(f"{path}: columns {sorted(need - set(rows[0]))} missing")
  curves: Dict[int, Curve] = {}
  for r in rows:
    curves.setdefault(int(r["member"]), []).append(
        (int(r["actor_steps"]), float(r["episode_return"])))
  return {m: sorted(c) for m, c in sorted(curves.items())}


def load_sweep_run(run_dir) -> Curve:
  """One independent run's evaluations from ``<run_dir>/eval.csv`` (actor_steps,
  episode_return), sorted by actor steps.

  Raises:
    FileNotFoundError: no eval.csv in `run_dir`.
  """
  with (pathlib.Path(run_dir) / "eval.csv").open(newline="") as f:
    return sorted((int(r["actor_steps"]), float(r["episode_return"]))
                  for r in csv.DictReader(f))


def truncate(curve: Curve, max_steps: Optional[int]) -> Curve:
  """The evaluations of `curve` at or before `max_steps` actor steps (all if None): a longer
  run read at a shorter budget (its evaluations up to there do not depend on the budget
  for `actorq train`, nor for `actorq pbt`, which skips only the exploit at its last step).

  Raises:
    ValueError: no evaluation at or before `max_steps`.
  """
  if max_steps is None:
    return list(curve)
  out = [(s, r) for s, r in curve if s <= max_steps]
  if not out:
    raise ValueError(f"no evaluation at or before {max_steps} actor steps")
  return out


def population_figures(curves: Sequence[Curve], target: float) -> Dict[str, Any]:
  """The module docstring's figures of one population (PBT members or independent seeds).

  Args:
    curves: one evaluation curve per member, each non-empty.
    target: the target greedy return (e.g. 475 for CartPole-v1).
  Returns:
    {best_final, median_final (floats), reached_final (fraction in [0, 1]), first_any,
     median_first (actor steps per member, or None), members (int)}.
  Raises:
    ValueError: no curves, or an empty curve.
  """
  if not curves or any(not c for c in curves):
    raise ValueError("every member needs at least one evaluation")
  finals = [c[-1][1] for c in curves]
  firsts = [aggregate.first_step_at([s for s, _ in c], [r for _, r in c], target) for c in curves]
  reached_steps = [f for f in firsts if f is not None]
  med = aggregate.censored_median(firsts)
  return {"members": len(curves), "best_final": max(finals),
          "median_final": float(statistics.median(finals)),
          "reached_final": sum(f >= target for f in finals) / len(finals),
          "first_any": min(reached_steps) if reached_steps else None,
          "median_first": None if math.isinf(med) else med}


def subset_figures(curves: Sequence[Curve], size: int, target: float) -> List[Dict[str, Any]]:
  """`population_figures` of every `size`-subset of independent runs' `curves` (C(M, size)
  populations, in itertools.combinations order), each with its ``runs`` (indices).

  Raises:
    ValueError: `size` not in [1, len(curves)].
  """
  if not 1 <= size <= len(curves):
    raise ValueError(f"subset size {size} must be in [1, {len(curves)}] (the runs given)")
  out = []
  for idx in itertools.combinations(range(len(curves)), size):
    fig = population_figures([curves[i] for i in idx], target)
    fig["runs"] = list(idx)
    out.append(fig)
  return out


def summarize(populations: Sequence[Mapping[str, Any]]) -> Dict[str, Dict[str, Any]]:
  """Per figure over several populations: mean, min, max of the values, and for the step
  figures how many populations reached the target at all (``reached``; mean/min/max are
  over those). None where no population has a value."""
  out: Dict[str, Dict[str, Any]] = {}
  for name in FIGURES:
    vals = [p[name] for p in populations if p[name] is not None]
    out[name] = {"mean": (sum(vals) / len(vals)) if vals else None,
                 "min": min(vals) if vals else None, "max": max(vals) if vals else None,
                 "reached": len(vals), "populations": len(populations)}
  return out


def _fmt(v: Optional[float], steps: bool) -> str:
  if v is None:
    return "never"
  return f"{v:,.0f}" if steps else f"{v:.3g}" if abs(v) < 1 and v != 0 else f"{v:.1f}"


def markdown(pbt: Mapping[str, Mapping[str, Any]], sweep: Sequence[Mapping[str, Any]],
             target: float) -> str:
  """A table: one row per PBT population (by name) and, for the independent seeds, the
  mean [min, max] over their subsets; columns are FIGURES."""
  head = ("| population | best final | median final | members >= target at the end | "
          "first step any >= target | median member's first step |\n|---|---|---|---|---|---|")
  lines = [head]
  steps = {"first_any", "median_first"}
  for name, fig in pbt.items():
    lines.append(f"| {name} | " + " | ".join(
        _fmt(fig[k], k in steps) if k != "reached_final" else f"{fig[k]:.2f}" for k in FIGURES)
        + " |")
  s = summarize(sweep)
  cells = []
  for k in FIGURES:
    d = s[k]
    if d["mean"] is None:
      cells.append("never")
      continue
    isstep = k in steps
    fmt = (lambda v: f"{v:.2f}") if k == "reached_final" else (lambda v: _fmt(v, isstep))
    cell = f"{fmt(d['mean'])} [{fmt(d['min'])}, {fmt(d['max'])}]"
    if isstep and d["reached"] < d["populations"]:
      cell += f" ({d['reached']}/{d['populations']} reached)"
    cells.append(cell)
  n = sweep[0]["members"] if sweep else 0
  lines.append(f"| independent seeds, mean [min, max] over {len(sweep)} subsets of {n} | "
               + " | ".join(cells) + " |")
  return "\n".join(lines) + f"\n\nTarget: greedy return >= {target:g}.\n"
