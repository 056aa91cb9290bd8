"""`python -m actorq.benchmarks.export_parity`:
the benchmark's flags, parsed here, and the calls of its functions with typed
arguments (argparse lives in cli/)."""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

from actorq.components import atomic
from actorq.benchmarks import export_parity as benchmark
from actorq.benchmarks.export_parity import export_argv, report_row, run_name, summarize, table
from actorq.cli import export as export_cli
from actorq.cli import main as cli
from actorq.cli import precision_arg
from actorq.studies import export as export_cmd


def main(argv=None) -> int:
  p = argparse.ArgumentParser(description=benchmark.__doc__.split("\n\n")[0])
  p.add_argument("--runs", nargs="+", required=True, help="run directories of 'actorq train'")
  p.add_argument("--precisions", default="int8,fp32",
                 help="export precisions (default: int8,fp32); per-layer policies as files or "
                      "mixed:<choice>,... names, the items then separated by ';' (e.g. "
                      "'int8;precision_policy.json')")
  export_cli.add_parity_flags(p, episodes=20)
  p.add_argument("--out", required=True, help="directory for parity.json and table.md")
  args = p.parse_args(argv)
  try:
    precisions = list(precision_arg.precision_items("--precisions", args.precisions))
    for precision in precisions:
      export_cmd.export_precision(precision, "--precisions")
  except cli.UsageError as e:
    p.error(str(e))
  rows, reports = [], []
  for run in args.runs:
    for precision in precisions:
      subprocess.run(export_argv(run, precision, args.episodes, args.seed), check=True)
      model = os.path.join(run, "export", export_cmd.default_file_name(precision))
      with open(export_cmd.report_path(model), encoding="utf-8") as f:
        report = json.load(f)
      report.pop("scales", None)
      src = report["source"]  # machine paths out: the run's folder name is what identifies it
      src["checkpoint"] = os.path.relpath(src["checkpoint"], src["run"])
      src["run"] = run_name(src["run"])
      reports.append(report)
      rows.append(report_row(report))
  summary = summarize(rows)
  os.makedirs(args.out, exist_ok=True)
  settings = {"runs": [run_name(r) for r in args.runs],
              "precisions": precisions, "episodes": args.episodes, "env_seed": args.seed}
  atomic.write_json(os.path.join(args.out, "parity.json"),
                 {"settings": settings, "rows": rows, "summary": summary, "reports": reports})
  text = table(rows, summary)
  with atomic.atomic_write(os.path.join(args.out, "table.md")) as f:
    f.write(text)
  print(text)
  return 0


if __name__ == "__main__":
  sys.exit(main())
