"""The `--actor-precision` (`actorq train`) and `--precision` (`actorq eval`) value: a
uniform precision, a per-layer precision policy file or its ``mixed:<choice>,...`` name.

Kept out of `cli/main.py`, which imports numpy only (this reads policy files with
`actorq.quantization.mixed`, which loads JAX).
"""
from __future__ import annotations

import os
from typing import Optional

from actorq import core
from actorq.quantization import mixed
from actorq.quantization import runtimes


PRECISION_HELP = (f"{', '.join(core.ACTOR_PRECISIONS)}, a per-layer precision policy file "
                  "(precision_policy.json of 'actorq quantize --search', format in "
                  "docs/precision_policy.md) or its labels as mixed:<choice>,... "
                  "(one per layer, e.g. mixed:fp16,int8,int8; feed-forward agents only)")


def actor_precision(flag: str, text: Optional[str]):
  """A `--actor-precision`/`--precision` value as `(precision, policy_file)`.

  `text` is one of `runtimes.ACTING_PRECISIONS` (policy_file None), a ``"mixed:<choice>,..."``
  name (its labels checked), or the path of a precision policy file (read with
  `actorq.quantization.mixed.load`; the precision is its `mixed.precision_name`, the file
  is returned so the caller can check its layer shapes against the network). None gives
  `(None, None)`.

  Raises:
    core.UsageError: anything else, or a policy file that cannot be read or is not one; the
      message names the flag, the value and what is allowed.
  """
  if text is None or text in runtimes.ACTING_PRECISIONS:
    return text, None
  if core.is_mixed(text):
    try:
      mixed.parse_precision_name(text)
    except ValueError as e:
      raise core.UsageError(f"{flag}: {e}") from None
    return text, None
  if text.endswith(".json") or os.path.isfile(text):
    try:
      return mixed.precision_name(mixed.load(text)), text
    except ValueError as e:
      raise core.UsageError(f"{flag} {text}: {e}") from None
  raise core.UsageError(f"{flag} {text!r} not allowed; allowed: {PRECISION_HELP}"
                       f"{uniform_hint(text)}")


def uniform_hint(text: str) -> str:
  """For a layer choice that is not a uniform actor precision (``int4``, ``int8+p0.5``):
  how to ask for it on every layer (a ``mixed:`` name with one label per layer, since the
  layer count is the network's); else ''."""
  try:
    label = mixed.parse_choice(text).label
  except ValueError:
    return ""
  return (f" ({label} on every layer is the per-layer policy mixed:{label},{label},...: "
          "one label per parameter layer of the policy network)")


def check_policy_file(flag: str, precision: Optional[str], policy_file: Optional[str],
                      spec) -> None:
  """Checks a ``"mixed:..."`` precision (and the file it came from, whose `w_shape`s are
  compared) against the policy network `spec`; other precisions pass.

  Raises:
    core.UsageError: a layer count or shape that does not fit, or a recurrent network.
  """
  if not core.is_mixed(precision):
    return
  try:
    mixed.policy_of(precision, spec)
    if policy_file is not None:
      mixed.load(policy_file, spec)
  except ValueError as e:
    raise core.UsageError(f"{flag} {policy_file or precision}: {e}") from None


def precision_items(flag: str, text: str) -> tuple:
  """`actorq sweep --precisions` as a tuple of precision strings, one per item.

  Items are separated by ``;`` when `text` has one, else by ``,`` (``fp32,int8``). An item is
  one of `runtimes.ACTING_PRECISIONS`, a ``"mixed:<choice>,..."`` name or a precision policy
  file, read as `actor_precision` reads it and returned as its ``mixed:`` name (so the runs'
  run.json and the sweep's files name the policy itself, not the path). A single mixed name
  or policy file needs no ``;``: ``--precisions "fp32;mixed:fp16,int8,int8"`` or
  ``--precisions policy.json``.

  Raises:
    core.UsageError: no items, an item `actor_precision` refuses, a mixed name cut by commas
      (the message says to separate with ``;``), or the same precision twice.
  """
  text = text.strip()
  if ";" in text:
    items = [t.strip() for t in text.split(";")]
  elif core.is_mixed(text) or text.endswith(".json") or os.path.isfile(text):
    items = [text]
  else:
    items = [t.strip() for t in text.split(",")]
    if any(core.is_mixed(t) for t in items):
      raise core.UsageError(f"{flag} {text!r}: a mixed:<choice>,... name has commas of its "
                           "own; separate the precisions with ';' (e.g. "
                           "'fp32;mixed:fp16,int8,int8')")
  items = [t for t in items if t]
  if not items:
    raise core.UsageError(f"{flag} {text!r}: no precisions; allowed: {PRECISION_HELP}")
  names = []
  for item in items:
    if not (item in runtimes.ACTING_PRECISIONS or core.is_mixed(item) or item.endswith(".json")
            or os.path.isfile(item)):
      raise core.UsageError(f"{flag} {text!r}: allowed precisions are "
                           f"{', '.join(runtimes.ACTING_PRECISIONS)}, a precision policy file or "
                           "a mixed:<choice>,... name (separated by ';')"
                           f"{uniform_hint(item)}")
    names.append(actor_precision(flag, item)[0])
  if len(set(names)) != len(names):
    raise core.UsageError(f"{flag} {text!r} repeats a precision")
  return tuple(names)
