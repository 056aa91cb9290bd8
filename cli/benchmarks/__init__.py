"""The command lines of the benchmarks in `actorq.benchmarks` (argparse lives in cli/):
one module per benchmark, `main(argv)` parsing its flags and calling the benchmark's
functions with typed arguments. `python -m actorq.benchmarks.<name>` runs the same."""

import argparse
from typing import Optional

from actorq.testing import netns


def child_parser(description: str, job_flag: str, helps: bool = True) -> argparse.ArgumentParser:
  """The parser of a benchmark's child process (started by the benchmark itself, one per
  measured run): `job_flag` JOB.json, the job to run, and --out RESULT.json, where its
  result goes; both required."""
  parser = argparse.ArgumentParser(description=description)
  parser.add_argument(job_flag, required=True, help="job JSON (internal)" if helps else None)
  parser.add_argument("--out", required=True, help="result JSON (internal)" if helps else None)
  return parser


def link_rate(text: str) -> Optional[str]:
  """argparse type: a tc link rate (``100mbit``, ``1gbit``: `netns.rate_bits`), or None for
  ``none`` (the bare link)."""
  if text == "none":
    return None
  try:
    netns.rate_bits(text)
  except ValueError as e:
    raise argparse.ArgumentTypeError(str(e)) from None
  return text
