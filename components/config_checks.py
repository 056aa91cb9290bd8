"""Declarative checks of an agent config's fields, run once at construction.

    @dataclasses.dataclass
    class MyConfig:
      hidden_sizes: Tuple[int, ...] = checks.field((64, 64), ge=1)    # each item >= 1
      discount: float = checks.field(0.99, ge=0.0, le=1.0)
      activation: str = checks.field("tanh", choices=("tanh", "relu"))
      qat_bits: Optional[int] = checks.field(None, ge=2, le=8)        # None passes
      min_replay_size: int = checks.field(1_000, ge=1)
      max_replay_size: int = checks.field(100_000, ge=1)

      RULES = (checks.Rule("need min_replay_size <= max_replay_size",
                           lambda c: c.min_replay_size <= c.max_replay_size),)

      def __post_init__(self):
        checks.validate(self)

`validate(config)` checks every field against its annotation (`int`, `float`, `bool`,
`str`, `Optional[...]` and `Tuple[X, ...]`; ints are accepted for float fields, never a
bool for a number), float values are finite (NaN and +-inf are refused everywhere), then
the field's bounds (`ge`, `gt`, `le`, `lt`: for a tuple, of each item) and allowed values
(`choices`), then the class's cross-field `RULES` (a subclass extends its parent's:
`RULES = Parent.RULES + (...)`). A subclass that re-declares a field with a plain default
(to change the default) keeps the checks its parent declared for it.

Every error is one line naming the field (or the fields of a rule), the value and what is
allowed, e.g. ``DQNConfig.n_step must be >= 1, got 0`` or ``DQNConfig: need
min_replay_size <= max_replay_size; got min_replay_size=1000, max_replay_size=500``.
"""
from __future__ import annotations

import dataclasses
import functools
import math
import numbers
import re
import typing
from typing import Any, Callable, Dict, Optional, Sequence, Tuple

import numpy as np

from actorq.quantization import runtimes

_KEY = "actorq.config_checks"


@dataclasses.dataclass(frozen=True)
class Check:
  """What a field's value must be besides its annotated type.

  Attributes:
    ge, gt, le, lt: bounds of a number (of each item of a tuple field).
    choices: the allowed strings of a `str` field.
    nonempty: a string or tuple must not be empty.
    mixed: a `str` field also takes the name of a family row of the precision table (a
      per-layer precision policy's ``"mixed:<choice>,..."``, `runtimes.family_of`) whose
      parameter parses (`runtimes.check_name`); see `precision_field`.
  """
  ge: Optional[float] = None
  gt: Optional[float] = None
  le: Optional[float] = None
  lt: Optional[float] = None
  choices: Optional[Tuple[str, ...]] = None
  nonempty: bool = False
  mixed: bool = False

  def bounds(self) -> str:
    """The bounds in words: '>= 1', '> 0', 'in [0, 1]', 'in (0, 1]' or ''."""
    low = (f"[{_num(self.ge)}" if self.ge is not None else
           f"({_num(self.gt)}" if self.gt is not None else None)
    high = (f"{_num(self.le)}]" if self.le is not None else
            f"{_num(self.lt)})" if self.lt is not None else None)
    if low and high:
      return f"in {low}, {high}"
    if low:
      return (">= " if low[0] == "[" else "> ") + low[1:]
    if high:
      return ("<= " if high[-1] == "]" else "< ") + high[:-1]
    return ""

  def within(self, value: float) -> bool:
    return ((self.ge is None or value >= self.ge) and (self.gt is None or value > self.gt)
            and (self.le is None or value <= self.le) and (self.lt is None or value < self.lt))


def _num(x: float) -> str:
  return f"{x:g}" if isinstance(x, float) else str(x)


def field(default: Any, **check: Any) -> Any:
  """A dataclass field with a default and a `Check` (see `Check` for the keywords)."""
  if "choices" in check and check["choices"] is not None:
    check["choices"] = tuple(check["choices"])
  return dataclasses.field(default=default, metadata={_KEY: Check(**check)})


def precision_field(default: Optional[str]) -> Any:
  """An actor/evaluation precision field of a feed-forward agent's config: one of
  `runtimes.ACTING_PRECISIONS` (`actorq.core.ACTOR_PRECISIONS` and the acting precisions
  registered since, read at each check) or a per-layer policy's ``"mixed:<choice>,..."``
  name (whose layer count is checked against the network when the actor's runtime is
  made)."""
  return dataclasses.field(default=default, metadata={
      _KEY: Check(choices=runtimes.ACTING_PRECISIONS, mixed=True)})


@dataclasses.dataclass(frozen=True)
class Rule:
  """A relation between fields that must hold (e.g. `min_replay_size <= max_replay_size`).

  Attributes:
    text: what must hold, in words that name the fields (the error message quotes it and
      then the value of every field it names).
    holds: `holds(config) -> bool`, called after every field passed its own checks.
  """
  text: str
  holds: Callable[[Any], bool]

  def fields(self, config: Any) -> Sequence[str]:
    names = {f.name for f in dataclasses.fields(config)}
    seen = []
    for word in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", self.text):
      if word in names and word not in seen:
        seen.append(word)
    return seen


def kind(annotation: Any) -> str:
  """What a value of `annotation` must be, in words ('an integer', 'a list of numbers',
  'a number (or null)', ...)."""
  args = [a for a in typing.get_args(annotation) if a is not type(None)]
  if typing.get_origin(annotation) is typing.Union:
    kinds = " or ".join(kind(a) for a in args)
    return kinds + (" (or null)" if type(None) in typing.get_args(annotation) else "")
  if typing.get_origin(annotation) in (tuple, list):
    items = {int: "integers", float: "numbers", str: "strings", bool: "booleans"}
    return "a list" + (f" of {items[args[0]]}" if args and args[0] in items else "")
  return {int: "an integer", float: "a number", bool: "true or false",
          str: "a string"}.get(annotation, getattr(annotation, "__name__", str(annotation)))


@functools.lru_cache(maxsize=None)
def _hints(cls: type) -> Dict[str, Any]:
  return typing.get_type_hints(cls)


@functools.lru_cache(maxsize=None)
def check_of(cls: type, name: str) -> Optional[Check]:
  """The `Check` declared for field `name` by `cls` or, if `cls` re-declares the field
  without one, by the nearest base class that declares one; None if none does."""
  for klass in cls.__mro__:
    fields = klass.__dict__.get("__dataclass_fields__", {})
    if name in fields and _KEY in fields[name].metadata:
      return fields[name].metadata[_KEY]
  return None


def rules_of(cls: type) -> Tuple[Rule, ...]:
  """The cross-field rules of a config class (its `RULES`, which include its parents')."""
  return tuple(getattr(cls, "RULES", ()))


def _is_int(value: Any) -> bool:
  return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _is_number(value: Any) -> bool:
  return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


def _check_item(where: str, annotation: Any, check: Optional[Check], value: Any,
                described: str, null: str) -> None:
  """One scalar value against its type and check. `described` is what the message says
  the field must be (the type in words); `null` is appended to what is allowed
  (" (or null)" for an Optional field)."""
  if annotation is bool:
    ok = isinstance(value, (bool, np.bool_))
  elif annotation is int:
    ok = _is_int(value)
  elif annotation is float:
    ok = _is_number(value)
  elif annotation is str:
    ok = isinstance(value, str)
  else:
    raise TypeError(f"{where}: config_checks cannot check a field of type {annotation!r}")
  if not ok:
    raise ValueError(f"{where} must be {described}{null}, got {value!r}")
  bounds = check.bounds() if check is not None else ""
  if annotation is float and not math.isfinite(float(value)):
    raise ValueError(f"{where} must be a finite number{' ' + bounds if bounds else ''}{null}, "
                     f"got {value!r}")
  if check is None:
    return
  if annotation in (int, float) and not check.within(value):
    raise ValueError(f"{where} must be {bounds}{null}, got {value!r}")
  if annotation is str:
    if check.mixed and runtimes.family_of(value) is not None:
      try:
        runtimes.check_name(value)
      except ValueError as e:
        raise ValueError(f"{where}: {e}") from None
      return
    if check.choices is not None and value not in check.choices:
      also = "".join(f" or {form}" for form in runtimes.family_forms()) if check.mixed else ""
      raise ValueError(f"{where} must be one of {', '.join(check.choices)}{also}{null}; "
                       f"got {value!r}")
    if check.nonempty and not value:
      raise ValueError(f"{where} must be a non-empty string{null}, got {value!r}")


def check_value(where: str, annotation: Any, check: Optional[Check], value: Any) -> None:
  """Checks `value` against a field's `annotation` and `check`.

  Raises:
    ValueError: one line naming `where`, the value and what is allowed.
    TypeError: an annotation this module cannot check (a bug in the config class).
  """
  null = ""
  args = typing.get_args(annotation)
  if typing.get_origin(annotation) is typing.Union and type(None) in args:
    if value is None:
      return
    inner = [a for a in args if a is not type(None)]
    if len(inner) != 1:
      raise TypeError(f"{where}: config_checks cannot check a field of type {annotation!r}")
    annotation, args, null = inner[0], typing.get_args(inner[0]), " (or null)"
  if annotation is tuple or typing.get_origin(annotation) is tuple:
    item = args[0] if args and (len(args) == 1 or args[1] is Ellipsis) else None
    if item is None:
      raise TypeError(f"{where}: config_checks checks Tuple[X, ...] fields, got {annotation!r}")
    bounds = check.bounds() if check is not None else ""
    described = kind(annotation) + (f" {bounds}" if bounds else "") + null
    if not isinstance(value, (tuple, list)):
      raise ValueError(f"{where} must be {described}, got {value!r}")
    if check is not None and check.nonempty and not value:
      raise ValueError(f"{where} must be a non-empty list{null}, got {show(value)}")
    for v in value:
      try:
        _check_item(where, item, check, v, described, "")
      except ValueError:
        raise ValueError(f"{where} must be {described}, got {show(value)}") from None
    return
  _check_item(where, annotation, check, value, kind(annotation), null)


def show(value: Any) -> str:
  """repr of a value as a command line writes it (a tuple as a list)."""
  return repr(list(value)) if isinstance(value, tuple) else repr(value)


def validate(config: Any) -> None:
  """Checks every field of a config dataclass, then its `RULES` (see the module doc).

  Raises:
    ValueError: one line naming the field(s), the value(s) and what is allowed.
  """
  cls = type(config)
  hints = _hints(cls)
  for f in dataclasses.fields(config):
    check_value(f"{cls.__name__}.{f.name}", hints[f.name], check_of(cls, f.name),
                getattr(config, f.name))
  for rule in rules_of(cls):
    if not rule.holds(config):
      got = ", ".join(f"{n}={show(getattr(config, n))}" for n in rule.fields(config))
      raise ValueError(f"{cls.__name__}: {rule.text}; got {got}")
