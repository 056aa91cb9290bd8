"""Tables and CSV files the studies and benchmarks write (one format for both)."""
from __future__ import annotations

import csv
from typing import Any, Sequence

from actorq.components import atomic

# One colour per actor precision, shared by the bench and sweep plots.
PRECISION_COLORS = {"fp32": "tab:blue", "fp16": "tab:orange", "bf16": "tab:purple",
                    "int8": "tab:green", "litert-fp32": "tab:red"}


def markdown_table(header: Sequence[Any], rows: Sequence[Sequence[Any]]) -> str:
  """A Markdown table, cells right-aligned to the widest of their column."""
  widths = [max(len(str(r[i])) for r in [header] + list(rows)) for i in range(len(header))]
  line = lambda r: "| " + " | ".join(str(c).rjust(w) for c, w in zip(r, widths)) + " |"
  return "\n".join([line(header), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
                   + [line(r) for r in rows])


def write_csv(path, fieldnames, rows):
  """`rows` (dicts; keys not in `fieldnames` ignored, None written empty) as a CSV file,
  written whole (`atomic.atomic_write`)."""
  with atomic.atomic_write(path, newline="") as f:
    w = csv.DictWriter(f, fieldnames=fieldnames, extrasaction="ignore")
    w.writeheader()
    for row in rows:
      w.writerow(row)
