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
  """`actorq sweep --precisions` as a tuple of precision strings, one per item.

  Items are separated by ``;`` when `text` has one, else by ``,`` (``fp32,int8``). An item is
  one of `runtimes.ACTING_PRECISIONS`, a family's name (``"mixed:<choice>,..."``) or a
  precision policy file, read as `actor_precision` reads it and returned as its ``mixed:``
  name (so the runs' run.json and the sweep's files name the policy itself, not the path). A
  single family name or policy file needs no ``;``: ``--precisions "fp32;mixed:fp16,int8,int8"``
  or ``--precisions policy.json``.

  Raises:
    core.UsageError: no items, an item `actor_precision` refuses, a family name cut by commas
      (the message says to separate with ``;``), or the same precision twice.
  """
  text = text.strip()
  family = lambda t: runtimes.family_of(t) is not None
  if ";" in text:
    items = [t.strip() for t in text.split(";")]
  elif family(text) or runtimes.is_policy_file(text):
    items = [text]
  else:
    items = [t.strip() for t in text.split(",")]
    if any(family(t) for t in items):
      raise core.UsageError(f"{flag} {text!r}: a mixed:<choice>,... name has commas of its "
                           "own; separate the precisions with ';' (e.g. "
                           "'fp32;mixed:fp16,int8,int8')")
  items = [t for t in items if t]
  if not items:
    raise core.UsageError(f"{flag} {text!r}: no precisions; allowed: {PRECISION_HELP}")
  names = []
  for item in items:
    if not (item in runtimes.ACTING_PRECISIONS or family(item)
            or runtimes.is_policy_file(item)):
      raise core.UsageError(f"{flag} {text!r}: allowed precisions are "
                           f"{', '.join(runtimes.ACTING_PRECISIONS)}, a precision policy file or "
                           "a mixed:<choice>,... name (separated by ';')"
                           f"{runtimes.uniform_hint(item)}")
    names.append(actor_precision(flag, item)[0])
  if len(set(names)) != len(names):
    raise core.UsageError(f"{flag} {text!r} repeats a precision")
  return tuple(names)
