"""Agent config dataclasses to and from JSON / YAML files and `--set KEY=VALUE` pairs.

    config_io.save(DQNConfig(), "dqn.json")          # every field, resolved
    cfg = config_io.load(DQNConfig, "dqn.json")      # a file may hold only some fields
    cfg = config_io.from_dict(DQNConfig, {"batch_size": 32}, overrides={"learning_rate": 3e-4})

JSON is always available; YAML (``.yaml``/``.yml``) only when PyYAML is installed (a
clear `ValueError` otherwise). Building the dataclass and checking each value against
its field's annotation is `dacite`'s (strict: lists become tuples for tuple fields);
this module adds what a command line needs on top: the one-line errors that name the
field and what it must be, an unknown key named with the allowed keys, ints accepted
for float fields, integral floats and ``1_000``-style strings for int fields,
``"true"``/``"false"`` for booleans and ``"64,64"`` for tuples. The dataclass's own
`__post_init__` checks run as usual.

`field_help(DQNConfig)` lists every field with its type, default and meaning, the meaning
read from the `Attributes:` section (Google style) of the class's docstring or, for an
inherited field, of the nearest base class that describes it; `actorq train --agent NAME
--help` prints it.
"""
from __future__ import annotations

import dataclasses
import inspect
import json
import os
import re
import typing
from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Type, TypeVar

import dacite

from actorq.components import atomic
from actorq.components import config_checks

T = TypeVar("T")

JSON_SUFFIXES = (".json",)
YAML_SUFFIXES = (".yaml", ".yml")


class ConfigError(ValueError):
  """A config file or value that does not fit the config dataclass."""


def to_dict(config: Any) -> Dict[str, Any]:
  """All fields of a config dataclass as JSON-compatible values (tuples -> lists)."""
  if not dataclasses.is_dataclass(config) or isinstance(config, type):
    raise TypeError(f"expected a config dataclass instance, got {type(config).__name__}")
  return json.loads(json.dumps(dataclasses.asdict(config)))


def field_names(config_cls: Type[Any]) -> set:
  """The names of a config dataclass's init fields."""
  return {f.name for f in dataclasses.fields(config_cls) if f.init}


def _int(value: Any) -> Any:
  if isinstance(value, float) and value.is_integer():
    return int(value)
  if isinstance(value, str):
    try:
      return int(value.replace("_", ""))
    except ValueError:
      pass
  return value


def _float(value: Any) -> Any:
  if isinstance(value, int) and not isinstance(value, bool):
    return float(value)
  if isinstance(value, str):
    try:
      return float(value)
    except ValueError:
      pass
  return value


def _bool(value: Any) -> Any:
  if isinstance(value, str) and value.lower() in ("true", "false"):
    return value.lower() == "true"
  return value


_DACITE = dacite.Config(strict=True, cast=[tuple],
                        type_hooks={int: _int, float: _float, bool: _bool})


_kind = config_checks.kind  # what a value of an annotation must be, in words


def _base(annotation: Any) -> Any:
  args = [a for a in typing.get_args(annotation) if a is not type(None)]
  return args[0] if typing.get_origin(annotation) is typing.Union and len(args) == 1 \
      else annotation


def _prepare(where: str, annotation: Any, value: Any) -> Any:
  """What dacite cannot say the way a command line needs: a bool is not an integer or a
  number, and a comma-separated string is a list."""
  base = _base(annotation)
  if value is None and base is not annotation:  # an Optional field takes null
    return value
  if isinstance(value, bool) and base in (int, float):
    raise ConfigError(f"{where} must be {_kind(annotation)}, got {value!r}")
  if typing.get_origin(base) is tuple:
    if isinstance(value, str):
      value = [v.strip() for v in value.split(",") if v.strip()]
    if not isinstance(value, (list, tuple)):
      raise ConfigError(f"{where} must be a list, got {value!r}")
  if base is bool and not isinstance(_bool(value), bool):
    raise ConfigError(f"{where} must be true or false, got {value!r}")
  return value


def from_dict(config_cls: Type[T], values: Mapping[str, Any],
              overrides: Optional[Mapping[str, Any]] = None) -> T:
  """`config_cls(**values, **overrides)` with every key and value checked.

  Args:
    config_cls: a config dataclass (e.g. `DQNConfig`).
    values: some or all of its fields (missing ones keep their defaults).
    overrides: applied after `values` (e.g. command-line flags).

  Raises:
    ConfigError: for an unknown key (naming it and the allowed keys) or a value of the
      wrong type (naming the field and what it must be); `ValueError` from the
      dataclass's own checks.
  """
  if not (dataclasses.is_dataclass(config_cls) and isinstance(config_cls, type)):
    raise TypeError(f"expected a config dataclass, got {config_cls!r}")
  if not isinstance(values, Mapping):
    raise ConfigError(f"a {config_cls.__name__} config must be a mapping of field -> value, "
                      f"got {type(values).__name__}")
  fields = field_names(config_cls)
  merged = dict(values)
  merged.update(overrides or {})
  unknown = sorted(k for k in merged if k not in fields)
  if unknown:
    raise ConfigError(f"unknown {config_cls.__name__} key {unknown[0]!r}"
                      f"{' (and ' + ', '.join(map(repr, unknown[1:])) + ')' if unknown[1:] else ''}; "
                      f"allowed keys: {', '.join(sorted(fields))}")
  hints = typing.get_type_hints(config_cls)
  name = config_cls.__name__
  merged = {k: _prepare(f"{name}.{k}", hints[k], v) for k, v in merged.items()}
  try:
    return dacite.from_dict(config_cls, merged, config=_DACITE)
  except dacite.WrongTypeError as e:
    field = e.field_path.split(".")[0]
    raise ConfigError(f"{name}.{field} must be {_kind(hints.get(field, e.field_type))}, "
                      f"got {config_checks.show(e.value)}") from None
  except dacite.DaciteError as e:
    raise ConfigError(f"{name}: {e}") from None


def _is_yaml(path: str) -> bool:
  suffix = os.path.splitext(path)[1].lower()
  if suffix in YAML_SUFFIXES:
    return True
  if suffix in JSON_SUFFIXES:
    return False
  raise ConfigError(f"config file {path!r} must end in .json, .yaml or .yml")


def _yaml():
  try:
    import yaml
  except ImportError:
    raise ConfigError("YAML config files need PyYAML, which is not installed "
                      "(pip install pyyaml); JSON files (.json) always work") from None
  return yaml


def read_file(path: str) -> Dict[str, Any]:
  """The mapping in a JSON or YAML config file.

  Raises:
    ConfigError: unreadable, unparsable, not a mapping, or YAML without PyYAML.
  """
  is_yaml = _is_yaml(path)
  try:
    with open(path, encoding="utf-8") as f:
      text = f.read()
  except OSError as e:
    raise ConfigError(f"cannot read config file {path}: {e.strerror}") from None
  try:
    data = _yaml().safe_load(text) if is_yaml else json.loads(text)
  except ConfigError:
    raise
  except Exception as e:  # json.JSONDecodeError, yaml.YAMLError
    raise ConfigError(f"cannot parse config file {path}: {e}") from None
  if data is None:
    data = {}
  if not isinstance(data, dict):
    raise ConfigError(f"config file {path} must hold a mapping of field -> value, "
                      f"got {type(data).__name__}")
  return data


def load(config_cls: Type[T], path: str, overrides: Optional[Mapping[str, Any]] = None) -> T:
  """A config read from a JSON/YAML file, then `overrides` (see `from_dict`)."""
  return from_dict(config_cls, read_file(path), overrides)


def save(config: Any, path: str) -> None:
  """Writes every field of `config` to a JSON or YAML file (by suffix)."""
  data = to_dict(config)
  if _is_yaml(path):
    text = _yaml().safe_dump(data, sort_keys=True)
  else:
    text = json.dumps(data, indent=2, sort_keys=True) + "\n"
  with atomic.atomic_write(path) as f:
    f.write(text)


def parse_assignment(text: str) -> tuple:
  """`"key=value"` -> `(key, value)`; the value is read as JSON when it parses
  (numbers, true/false, null, lists), else kept as a string.

  Raises:
    ConfigError: without an `=`.
  """
  if "=" not in text:
    raise ConfigError(f"--set expects KEY=VALUE, got {text!r}")
  key, raw = text.split("=", 1)
  key = key.strip()
  try:
    value = json.loads(raw)
  except json.JSONDecodeError:
    value = raw
  return key, value


class FieldHelp(NamedTuple):
  """One config field as `--help` shows it.

  Attributes:
    name: the field's name (the KEY of `--set KEY=VALUE`).
    type: its type in words: int, float, bool, str, "list of int", "float or null", ...
    default: its default value (a tuple field's as a tuple).
    meaning: what it means, its units and allowed values, from an `Attributes:` section
      ("" where no class of the config describes it).
  """
  name: str
  type: str
  default: Any
  meaning: str


_ENTRY = re.compile(r"^([A-Za-z_]\w*(?:\s*,\s*[A-Za-z_]\w*)*)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


def attribute_docs(cls: type) -> Dict[str, str]:
  """name -> meaning from the `Attributes:` section of `cls`'s own docstring (Google
  style: an entry `name: text` one level below the header, continued on deeper-indented
  lines; `a, b: text` describes both). Inherited docstrings are not read: see
  `field_help`."""
  doc = cls.__dict__.get("__doc__") or ""
  lines = inspect.cleandoc(doc).splitlines()
  docs: Dict[str, str] = {}
  header = next((i for i, line in enumerate(lines) if line.strip() == "Attributes:"), None)
  if header is None:
    return docs
  top = len(lines[header]) - len(lines[header].lstrip())
  entry_indent, names = None, []
  for line in lines[header + 1:]:
    if not line.strip():
      continue
    indent = len(line) - len(line.lstrip())
    if indent <= top:
      break
    if entry_indent is None:
      entry_indent = indent
    match = _ENTRY.match(line.strip()) if indent == entry_indent else None
    if match:
      names = [n.strip() for n in match.group(1).split(",")]
      for n in names:
        docs[n] = match.group(2).strip()
    elif indent > entry_indent:
      for n in names:
        docs[n] = (docs[n] + " " + line.strip()).strip()
  return docs


def type_name(annotation: Any) -> str:
  """A field annotation in words: int, float, bool, str, "list of int", "int or null"."""
  args = typing.get_args(annotation)
  if typing.get_origin(annotation) is typing.Union:
    inner = [type_name(a) for a in args if a is not type(None)]
    return " or ".join(inner) + (" or null" if type(None) in args else "")
  if typing.get_origin(annotation) in (tuple, list):
    return "list" + (f" of {type_name(args[0])}" if args else "")
  return getattr(annotation, "__name__", str(annotation))


def field_help(config_cls: Type[Any]) -> List[FieldHelp]:
  """Every init field of a config dataclass, in declaration order, as
  `FieldHelp(name, type, default, meaning)`; a field's meaning is the first one found in
  the `Attributes:` sections of `config_cls` and then its base classes (method
  resolution order), so a subclass may re-word an inherited field.

  Raises:
    TypeError: `config_cls` is not a dataclass.
  """
  if not (dataclasses.is_dataclass(config_cls) and isinstance(config_cls, type)):
    raise TypeError(f"expected a config dataclass, got {config_cls!r}")
  hints = typing.get_type_hints(config_cls)
  sections = [attribute_docs(klass) for klass in config_cls.__mro__]
  out = []
  for f in dataclasses.fields(config_cls):
    if not f.init:
      continue
    default = (f.default if f.default is not dataclasses.MISSING else
               f.default_factory() if f.default_factory is not dataclasses.MISSING else None)
    meaning = next((docs[f.name] for docs in sections if f.name in docs), "")
    out.append(FieldHelp(f.name, type_name(hints[f.name]), default, meaning))
  return out
