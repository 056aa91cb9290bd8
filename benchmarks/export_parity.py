"""`actorq export` over several trained runs: the exported policy's greedy return beside
the fp32 JAX policy's, paired by run (one run per seed), with its interval.

    .venv/bin/actorq sweep --agent dqn --steps 20000 --seeds 0-4 --precisions fp32 \\
        --eval-every 5000 --eval-episodes 5 --logdir runs/export-dqn
    .venv/bin/python -m actorq.benchmarks.export_parity --runs runs/export-dqn/fp32-s* \\
        --episodes 20 --out docs/results/export_parity

Each run is exported at each `--precisions` (default int8 and fp32; per-layer policies as
policy files or `mixed:` names, the list then `;`-separated: `"int8;precision_policy.json"`)
with `actorq export --checkpoint RUN --precision P --episodes N --seed S` in a child process
(the model and its JSON go to RUN/export/ as `actorq export` writes them). `actorq export`'s
parity report plays `episodes` greedy episodes with the exported `.tflite` and with the fp32
JAX policy on environments seeded alike, and counts the greedy-action agreement on every
observation of the fp32 episodes. This script collects those reports and writes

  parity.json   settings, every run's report (without the scales; paths relative to the
                run), the summary
  table.md      one row per (run, precision) and the aggregate rows

The summary, per precision: the mean over runs of the exported return and of the fp32
JAX return, their paired difference (exported - fp32, mean over runs, 95% percentile
bootstrap interval over runs: `aggregate.paired_difference`), the median and lowest
greedy-action agreement, and the model bytes.
"""
from __future__ import annotations

import os
import statistics
import sys
from typing import Any, Dict, List, Sequence

from actorq.components import aggregate


def export_argv(run: str, precision: str, episodes: int, seed: int) -> List[str]:
  """The child's command line: `actorq export` of one run at one precision."""
  return [sys.executable, "-m", "actorq.cli.main", "export", "--checkpoint", run,
          "--precision", precision, "--episodes", str(episodes), "--seed", str(seed)]


def run_name(path: str) -> str:
  """A run directory's folder name (what identifies a run of a sweep, e.g. "fp32-s0")."""
  return os.path.basename(os.path.normpath(path))


def report_row(report: Dict[str, Any]) -> Dict[str, Any]:
  """The figures of one `actorq export` JSON report that the table shows."""
  p, src = report["parity"], report["source"]
  return {"run": run_name(src["run"]), "seed": src.get("seed"),
          "precision": report["model"]["precision"], "actor_steps": src["actor_steps"],
          "tflite_bytes": p["tflite_bytes"], "payload_bytes": p["export_payload_bytes"],
          "export_return": p["export_return_mean"], "fp32_return": p["fp32_return_mean"],
          "agreement": p["greedy_action_agreement"],
          "observations": p["observations_compared"]}


def summarize(rows: Sequence[Dict[str, Any]]) -> Dict[str, Dict[str, Any]]:
  """Precision -> its aggregate over runs (see the module docstring).

  Raises:
    ValueError: no rows, or a precision whose runs are not the same as another's.
  """
  if not rows:
    raise ValueError("no export reports to summarize")
  by_precision: Dict[str, List[Dict[str, Any]]] = {}
  for row in rows:
    by_precision.setdefault(row["precision"], []).append(row)
  runs = {p: sorted(r["run"] for r in rs) for p, rs in by_precision.items()}
  if len({tuple(v) for v in runs.values()}) != 1:
    raise ValueError(f"every precision must export the same runs; got {runs}")
  out = {}
  for precision, rs in by_precision.items():
    rs = sorted(rs, key=lambda r: r["run"])
    exported = [r["export_return"] for r in rs]
    fp32 = [r["fp32_return"] for r in rs]
    diff, low, high = aggregate.paired_difference(exported, fp32)
    out[precision] = {
        "runs": len(rs), "export_return_mean": statistics.fmean(exported),
        "fp32_return_mean": statistics.fmean(fp32),
        "paired_difference": diff, "paired_difference_ci": [low, high],
        "median_agreement": statistics.median(r["agreement"] for r in rs),
        "lowest_agreement": min(r["agreement"] for r in rs),
        "median_tflite_bytes": statistics.median(r["tflite_bytes"] for r in rs)}
  return out


def table(rows: Sequence[Dict[str, Any]], summary: Dict[str, Dict[str, Any]]) -> str:
  """A markdown table: one row per (run, precision), then one aggregate row per precision."""
  lines = ["| run | seed | export | .tflite bytes | return (exported) | return (fp32 JAX) | "
           "greedy-action agreement |", "|---|---|---|---|---|---|---|"]
  for r in sorted(rows, key=lambda r: (r["precision"] != "int8", r["run"])):
    lines.append(f"| {r['run']} | {r['seed']} | {r['precision']} | {r['tflite_bytes']:,} | "
                 f"{r['export_return']:.1f} | {r['fp32_return']:.1f} | {r['agreement']:.3f} of "
                 f"{r['observations']:,} |")
  for precision in sorted(summary, key=lambda p: p != "int8"):
    s = summary[precision]
    low, high = s["paired_difference_ci"]
    lines.append(f"| **mean of {s['runs']}** | | {precision} | {s['median_tflite_bytes']:,.0f} "
                 f"(median) | {s['export_return_mean']:.1f} | {s['fp32_return_mean']:.1f} | "
                 f"median {s['median_agreement']:.3f}, lowest {s['lowest_agreement']:.3f} |")
    lines.append(f"| paired exported - fp32 | | {precision} | | **{s['paired_difference']:+.1f} "
                 f"[{low:+.1f}, {high:+.1f}]** | | |")
  return "\n".join(lines) + "\n"


if __name__ == "__main__":
  from actorq.cli.benchmarks import export_parity as command_line  # its flags: cli/
  sys.exit(command_line.main())
