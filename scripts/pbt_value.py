"""PBT populations against independent seeds at the same actor steps (issue 43's value figure).

    .venv/bin/python scripts/pbt_value.py --pbt runs/pbt-s0 runs/pbt-s1 runs/pbt-s2 \
        --seeds runs/sweep/fp32-s0 ... runs/sweep/fp32-s9 --target 475 --out DIR

The command line is `actorq.cli.pbt_value` (flags parsed in cli/); the figures are
`actorq.studies.pbt_value`'s.
"""
import sys

from actorq.cli import pbt_value

if __name__ == "__main__":
  sys.exit(pbt_value.main())
