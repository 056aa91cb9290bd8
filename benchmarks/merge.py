"""Combine finished `actorq bench` runs into one report.

A benchmark of ActorQ's setting on a 2-core machine takes ~30 min per (precision, seed)
run, so more seeds are collected over several invocations, e.g.::

    actorq bench --preset actorq --seeds 0 --logdir runs/a
    actorq bench --preset actorq --seeds 1 2 --logdir runs/b
    actorq bench --merge runs/a runs/b --logdir runs/ab

The merged report is the same as one invocation's (medians over all seeds, the peer
column over all peer measurements) and records where each run came from. Runs are
only merged when they measured the same thing on the same kind of machine.
"""
from __future__ import annotations

import os
from typing import Any, Dict, List, Sequence, Tuple

from actorq.benchmarks import actorq_bench as ab

# Settings that must be equal for runs to be comparable.
SAME_SETTINGS = ("agent", "env", "steps", "eval_every", "eval_episodes", "target", "overrides",
                 "acting_steps", "watts_per_core", "watts_per_gpu")
SAME_MACHINE = ("nproc", "cpu_model")


class IncompatibleBenchError(ValueError):
  """The benchmark directories measured different settings, machines or the same run twice."""


def combine(benches: Sequence[Tuple[str, Dict[str, Any]]]) -> Dict[str, Any]:
  """Merges `[(run_dir, bench.json contents), ...]` into one bench.json-shaped dict.

  Raises:
    IncompatibleBenchError: fewer than two benchmarks, a setting in `SAME_SETTINGS` or a
      machine field in `SAME_MACHINE` differs (naming it and both values), or a
      (precision, seed) run appears twice.
  """
  if len(benches) < 2:
    raise IncompatibleBenchError(f"--merge needs at least two benchmark directories, got "
                                 f"{len(benches)}")
  first_dir, first = benches[0]
  meta0 = first["meta"]
  runs: List[Dict[str, Any]] = []
  peers: List[Dict[str, Any]] = []
  precisions: List[str] = []
  seen = {}
  sources = []
  for run_dir, data in benches:
    meta = data["meta"]
    for key in SAME_SETTINGS:
      if meta.get(key) != meta0.get(key):
        raise IncompatibleBenchError(
            f"{run_dir} differs from {first_dir} in {key}: {meta.get(key)!r} vs "
            f"{meta0.get(key)!r}; only benchmarks of the same settings can be merged")
    for key in SAME_MACHINE:
      if meta["machine"].get(key) != meta0["machine"].get(key):
        raise IncompatibleBenchError(
            f"{run_dir} ran on another machine than {first_dir} ({key}: "
            f"{meta['machine'].get(key)!r} vs {meta0['machine'].get(key)!r})")
    for run in data["runs"]:
      key = (run["precision"], run["seed"])
      if key in seen:
        raise IncompatibleBenchError(
            f"{run['precision']} seed {run['seed']} is in both {seen[key]} and {run_dir}; "
            "merge benchmarks of different seeds")
      seen[key] = run_dir
      runs.append(dict(run, source=run_dir))
    peers.extend(dict(p, source=run_dir) for p in data["peers"])
    precisions.extend(p for p in meta["precisions"] if p not in precisions)
    sources.append({"dir": run_dir, "started": meta.get("started"),
                    "seeds": meta.get("seeds"),
                    "loadavg_1_5_15": meta["machine"].get("loadavg_1_5_15")})
  meta = dict(meta0, precisions=precisions,
              seeds=sorted({r["seed"] for r in runs}), merged_from=sources)
  return {"meta": meta, "runs": runs, "peers": peers}


def merge(run_dirs: Sequence[str], outdir: str):
  """Writes the merged CSVs, plots, table.md and bench.json into `outdir`; returns
  (summary, table) as `actorq_bench.report` does.

  Raises:
    FileNotFoundError: a directory has no bench.json (`actorq_bench.load_bench`).
    IncompatibleBenchError: see `combine`.
  """
  data = combine([(d, ab.load_bench(d)) for d in run_dirs])
  os.makedirs(outdir, exist_ok=True)
  return report(outdir, data)


def report(outdir: str, data: Dict[str, Any]):
  """`actorq_bench.report` of a `combine` result."""
  return ab.report(outdir, data["runs"], data["peers"], data["meta"])
