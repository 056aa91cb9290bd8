"""PBT populations against independent seeds at the same actor steps (issue 43's value figure):
the command line of `scripts/pbt_value.py`.

    .venv/bin/python scripts/pbt_value.py --pbt runs/pbt-s0 runs/pbt-s1 runs/pbt-s2 \
        --seeds runs/sweep/fp32-s0 ... runs/sweep/fp32-s9 --target 475 --out DIR

`--pbt`: `actorq pbt` run directories (their pbt.csv); `--seeds`: `actorq train`/`sweep` run
directories of independent seeds with the default hyperparameters (their eval.csv), at least
as many as a population has members: every subset of that size is one independent population
(`actorq.studies.pbt_value`). Prints the table and, with `--out`, writes `table.md` and
`value.json` there.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import sys

from actorq.components import atomic
from actorq.studies import pbt_value


def main(argv=None) -> int:
  p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  p.add_argument("--pbt", nargs="+", required=True, help="actorq pbt run directories")
  p.add_argument("--seeds", nargs="+", required=True, help="independent train run directories")
  p.add_argument("--target", type=float, required=True, help="target greedy return")
  p.add_argument("--max-steps", type=int, help="read every run up to this many actor steps "
                 "per member (default: all; the runs must all reach it)")
  p.add_argument("--out", help="folder for table.md and value.json")
  args = p.parse_args(argv)
  members = {pathlib.Path(d).name: [pbt_value.truncate(c, args.max_steps)
                                     for c in pbt_value.load_pbt(d).values()] for d in args.pbt}
  pbt = {name: pbt_value.population_figures(c, args.target) for name, c in members.items()}
  sizes = {f["members"] for f in pbt.values()}
  if len(sizes) != 1:
    p.error(f"the PBT runs have different population sizes {sorted(sizes)}; give runs of one size")
  size = sizes.pop()
  curves = [pbt_value.truncate(pbt_value.load_sweep_run(d), args.max_steps) for d in args.seeds]
  last = {c[-1][0] for c in curves} | {c[-1][0] for cs in members.values() for c in cs}
  if len(last) != 1:
    p.error(f"the runs end at different actor steps {sorted(last)}; pass --max-steps")
  if len(curves) < size:
    p.error(f"{len(curves)} independent runs given; a population has {size} members: "
            f"give >= {size}")
  sweep = pbt_value.subset_figures(curves, size, args.target)
  text = pbt_value.markdown(pbt, sweep, args.target)
  print(text)
  if args.out:
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with atomic.atomic_write(str(out / "table.md")) as f:
      f.write(text)
    with atomic.atomic_write(str(out / "value.json")) as f:
      f.write(json.dumps({
          "target": args.target, "max_steps": args.max_steps, "pbt": pbt,
          "independent_runs": [str(d) for d in args.seeds],
          "independent_subsets": sweep, "independent_summary": pbt_value.summarize(sweep)},
          indent=1) + "\n")
  return 0


if __name__ == "__main__":
  sys.exit(main())
