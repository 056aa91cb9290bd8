"""The `--actor-precision` (`actorq train`), `--precision` (`actorq eval`) and `--precisions`
(`actorq sweep`) values: the flags' side of the precision table's parsing
(`actorq.quantization.runtimes.parse_precision`, `check_fits`), which turns its one-line
ValueError into the flag's usage error (exit status 2).

Kept out of `cli/main.py`, which imports numpy only (the table reads policy files with
`actorq.quantization.mixed`, which loads JAX).
"""
from __future__ import annotations

from typing import Optional

from actorq import core
from actorq.quantization import runtimes


# What an acting-precision flag takes, in words (its --help and its usage errors).
PRECISION_HELP = runtimes.precision_help()


def actor_precision(flag: str, text: Optional[str]):
  """A `--actor-precision`/`--precision` value as `(precision, policy_file)`
  (`runtimes.parse_precision`: a uniform acting precision, a family's name such as
  ``"mixed:<choice>,..."``, or a precision policy file). None gives `(None, None)`.

  Raises:
    core.UsageError: the table's refusal, naming the flag, the value and what is allowed.
  """
  try:
    return runtimes.parse_precision(text, flag)
  except ValueError as e:
    raise core.UsageError(str(e)) from None


def check_policy_file(flag: str, precision: Optional[str], policy_file: Optional[str],
                      spec) -> None:
  """Checks `precision` (and the policy file it came from) against the policy network
  `spec` (`runtimes.check_fits`); a uniform precision passes.

  Raises:
    core.UsageError: a layer count or shape that does not fit.
  """
  if precision is None:
    return
  try:
    runtimes.check_fits(precision, spec, policy_file, flag)
  except ValueError as e:
    raise core.UsageError(str(e)) from None


def precision_items(flag: str, text: str) -> tuple:
  """`actorq sweep --precisions` as a tuple of precision strings, one per item
  (`runtimes.parse_precisions`: ``;``- or ``,``-separated; a policy file is returned as its
  ``mixed:`` name).

  Raises:
    core.UsageError: the table's refusal, naming the flag, the value and what is allowed.
  """
  try:
    return runtimes.parse_precisions(text, flag)
  except ValueError as e:
    raise core.UsageError(str(e)) from None
