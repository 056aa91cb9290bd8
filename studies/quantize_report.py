"""Files of `actorq quantize --sweep` / `--search`: CSVs, a markdown table and the PNG
(return against stored bytes and against latency, the Pareto front marked, simulated
settings drawn hollow)."""
from __future__ import annotations

import csv
import math
from typing import Any, Iterable, List, Mapping, Sequence

from actorq.components import atomic
from actorq.quantization import execution as qx
from actorq.studies import compression as cs


def _cell(value: Any) -> Any:
  if isinstance(value, float):
    return "" if math.isnan(value) else f"{value:.6g}"
  return value


def write_csv(path: str, rows: Iterable[Mapping[str, Any]], columns: Sequence[str]) -> None:
  """`rows` as CSV with `columns` (missing keys empty, NaN empty), atomically."""
  with atomic.atomic_write(path, newline="") as f:
    w = csv.writer(f)
    w.writerow(columns)
    for r in rows:
      w.writerow([_cell(r.get(c, "")) for c in columns])


def _fmt(value: Any, digits: int = 3) -> str:
  if isinstance(value, bool):
    return "yes" if value else ""
  if isinstance(value, float):
    if math.isnan(value):
      return "-"
    return f"{value:.{digits}f}"
  return str(value)


def table_lines(summary: Sequence[Mapping[str, Any]]) -> List[str]:
  """The summary as a markdown table (one row per setting)."""
  head = ("| setting | executed on | stored bytes | x fp32 | latency us | x fp32 | return "
          "| paired diff | agreement | KL | action dist | front (bytes/latency) |")
  lines = [head, "|" + "---|" * 12]
  for r in summary:
    exe = r["execution"] + (" (SIMULATED)" if r["simulated"] else "")
    front = "/".join(("B" if r["pareto_bytes"] else "-", "L" if r["pareto_latency"] else "-"))
    ret = _fmt(r["return_mean"], 1)
    if r.get("runs", 1) > 1:
      ret += f" +- {_fmt(r['return_std_over_runs'], 1)}"
    lines.append(
        f"| {r['setting']} | {exe} | {int(round(r['stored_bytes']))} | "
        f"{_fmt(r['stored_ratio'])} | {_fmt(r['latency_us'], 1)} | {_fmt(r['latency_ratio'])} "
        f"| {ret} | {_fmt(r['paired_diff_mean'], 1)} | {_fmt(r['agreement'])} | "
        f"{_fmt(r['kl'], 4)} | {_fmt(r['action_distance'], 4)} | {front} |")
  return lines


def sensitivity_lines(summary: Sequence[Mapping[str, Any]]) -> List[str]:
  """The sensitivity study's summary (`qx.sensitivity_settings`) as a markdown
  table: per setting the median [min, max] over runs of the greedy-action agreement with
  fp32, the mean KL and Q regret, the mean return and paired difference, and the latency
  ratio."""
  lines = ["| setting | executed on | agreement median [min, max] | KL | Q regret | return "
           "| paired diff | latency x fp32 |", "|" + "---|" * 8]
  for r in summary:
    exe = r["execution"] + (" (SIMULATED)" if r["simulated"] else "")
    lines.append(
        f"| {r['setting']} | {exe} | {_fmt(r['agreement_median'])} "
        f"[{_fmt(r['agreement_min'])}, {_fmt(r['agreement_max'])}] | {_fmt(r['kl'], 4)} | "
        f"{_fmt(r.get('q_regret', float('nan')), 4)} | {_fmt(r['return_mean'], 1)} | {_fmt(r['paired_diff_mean'], 1)} | "
        f"{_fmt(r['latency_ratio'])} |")
  return lines


DEFINITIONS = """\
Definitions (see actorq/studies/compression.py):
- stored bytes: weights bit-packed at their width (a pruned layer as a presence bitmask + packed
  non-zero values when smaller), float32 scales (per channel or per tensor), biases (fp32; fp16
  for fp16 layers). The runtimes hold integer weights as int8 (1 byte each).
- latency: median batch-1 call of the runtime that executed the setting; SIMULATED settings ran
  dequantized weights on fp32 JAX kernels, so their latency is fp32's, not a b-bit kernel's.
  Pruning never lowers latency here (dense kernels).
- return: one greedy episode per evaluation seed, the same seeds (fresh environments) for every
  setting; paired diff = mean over seeds of (return - fp32 return on that seed).
- agreement: fraction of fp32-visited observations with the fp32 greedy action (continuous:
  1 - action dist); KL = mean KL(softmax(z_fp32 / T) || softmax(z / T)), z = Q-values (T given)
  or logits (T = 1); action dist = mean |a - a_fp32| / (max - min) (continuous actions).
- front: on the Pareto front of return vs stored bytes (B) / vs latency (L).
"""


def write_table(path: str, title: str, summary: Sequence[Mapping[str, Any]],
                extra: Sequence[str] = ()) -> None:
  with atomic.atomic_write(path) as f:
    f.write(f"# {title}\n\n")
    for line in extra:
      f.write(line + "\n")
    if extra:
      f.write("\n")
    f.write("\n".join(table_lines(summary)) + "\n\n" + DEFINITIONS)


_COLORS = {qx.JAX_FP32: "black", qx.JAX_FP16: "tab:purple", qx.JAX_BF16: "tab:pink",
           qx.LITERT_INT8: "tab:blue", qx.LITERT_MIXED: "tab:green", qx.SIMULATED: "tab:orange"}


def plot(path: str, summary: Sequence[Mapping[str, Any]], title: str,
         clock: str = "wall") -> None:
  """Two panels: mean return vs stored bytes (log x) and vs latency; the Pareto front
  of each panel joined and ringed; simulated settings hollow; error bars: std over
  runs (several checkpoints) else none."""
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top

  fig, axes = plt.subplots(1, 2, figsize=(13, 5.2))
  for ax, col, flag, xlabel in (
      (axes[0], "stored_bytes", "pareto_bytes", "stored weight bytes (log scale)"),
      (axes[1], "latency_us", "pareto_latency",
       f"batch-1 latency of the executing runtime (us, median {clock} time per call)")):
    for exe, color in _COLORS.items():
      pts = [r for r in summary if r["execution"] == exe]
      if not pts:
        continue
      xs = [r[col] for r in pts]
      ys = [r["return_mean"] for r in pts]
      err = [r.get("return_std_over_runs", 0.0) if r.get("runs", 1) > 1 else 0.0 for r in pts]
      label = "SIMULATED (dequantized, fp32 JAX kernels)" if exe == qx.SIMULATED else exe
      ax.errorbar(xs, ys, yerr=err, fmt="o", ms=7, color=color, capsize=2,
                  mfc="none" if exe == qx.SIMULATED else color, label=label)
      for r in pts:  # labels on the front and the reference; the table has every setting
        if r[flag] or r["setting"] == cs.REFERENCE:
          ax.annotate(r["setting"], (r[col], r["return_mean"]), fontsize=7,
                      xytext=(4, 4), textcoords="offset points")
    front = sorted((r for r in summary if r[flag]), key=lambda r: r[col])
    if front:
      ax.plot([r[col] for r in front], [r["return_mean"] for r in front], "-", color="red",
              lw=1.2, zorder=0, label="Pareto front")
      ax.scatter([r[col] for r in front], [r["return_mean"] for r in front], s=160,
                 facecolors="none", edgecolors="red", lw=1.2)
    if col == "stored_bytes":
      ax.set_xscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("mean greedy return (paired eval seeds)")
    ax.grid(alpha=0.3)
  axes[0].legend(fontsize=8, loc="lower right")
  fig.suptitle(title, fontsize=10)
  fig.tight_layout()
  with atomic.atomic_write(path, "wb") as f:
    fig.savefig(f, dpi=110, format="png")
  plt.close(fig)
