"""Agent config dataclasses to and from JSON / YAML files.

    config_io.save(DQNConfig(), "dqn.json")          # every field, resolved
    cfg = config_io.load(DQNConfig, "dqn.json")      # a file may hold only some fields
    cfg = config_io.from_dict(DQNConfig, {"batch_size": 32}, overrides={"learning_rate": 3e-4})

JSON is always available; YAML (``.yaml``/``.yml``) only when PyYAML is installed (a
clear `ValueError` otherwise). Values are checked against the field's annotation:
lists become tuples for tuple fields, ints are accepted for float fields, and a key the
dataclass does not have is an error naming the key and listing the allowed keys. The
dataclass's own `__post_init__` checks run as usual.
"""
from __future__ import annotations

import dataclasses
import json
import os
import typing
from typing import Any, Dict, Mapping, Optional, Type, TypeVar

T = TypeVar("T")

JSON_SUFFIXES = (".json",)
YAML_SUFFIXES = (".yaml", ".yml")


class ConfigError(ValueError):
  """A config file or value that does not fit the config dataclass."""


def to_dict(config: Any) -> Dict[str, Any]:
  """All fields of a config dataclass as JSON-compatible values (tuples -> lists)."""
  if not dataclasses.is_dataclass(config) or isinstance(config, type):
    raise TypeError(f"expected a config dataclass instance, got {type(config).__name__}")

  def plain(v):
    if isinstance(v, (tuple, list)):
      return [plain(x) for x in v]
    if isinstance(v, dict):
      return {k: plain(x) for k, x in v.items()}
    return v

  return {f.name: plain(getattr(config, f.name)) for f in dataclasses.fields(config)}


def _coerce(cls_name: str, name: str, annotation: Any, value: Any) -> Any:
  """`value` checked (and lists -> tuples) against a field annotation."""
  origin = typing.get_origin(annotation)
  args = typing.get_args(annotation)
  where = f"{cls_name}.{name}"
  if annotation is Any:
    return value
  if origin is typing.Union:
    if value is None and type(None) in args:
      return None
    errors = []
    for arg in args:
      if arg is type(None):
        continue
      try:
        return _coerce(cls_name, name, arg, value)
      except ConfigError as e:
        errors.append(str(e))
    raise ConfigError(f"{where}: {value!r} fits none of {annotation}")
  if origin in (tuple, typing.Tuple):
    if isinstance(value, str):
      value = [v.strip() for v in value.split(",") if v.strip()]
    if not isinstance(value, (list, tuple)):
      raise ConfigError(f"{where} must be a list, got {value!r}")
    if len(args) == 2 and args[1] is Ellipsis:
      return tuple(_coerce(cls_name, name, args[0], v) for v in value)
    if args and len(args) != len(value):
      raise ConfigError(f"{where} must have {len(args)} items, got {len(value)}")
    return tuple(_coerce(cls_name, name, a, v) for a, v in zip(args, value)) if args else tuple(value)
  if annotation is bool:
    if isinstance(value, bool):
      return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
      return value.lower() == "true"
    raise ConfigError(f"{where} must be true or false, got {value!r}")
  if annotation is int:
    if isinstance(value, bool):
      raise ConfigError(f"{where} must be an integer, got {value!r}")
    if isinstance(value, int):
      return value
    if isinstance(value, float) and value.is_integer():
      return int(value)
    if isinstance(value, str):
      try:
        return int(value.replace("_", ""))
      except ValueError:
        pass
    raise ConfigError(f"{where} must be an integer, got {value!r}")
  if annotation is float:
    if isinstance(value, bool):
      raise ConfigError(f"{where} must be a number, got {value!r}")
    if isinstance(value, (int, float)):
      return float(value)
    if isinstance(value, str):
      try:
        return float(value)
      except ValueError:
        pass
    raise ConfigError(f"{where} must be a number, got {value!r}")
  if annotation is str:
    if not isinstance(value, str):
      raise ConfigError(f"{where} must be a string, got {value!r}")
    return value
  return value  # other annotations (nested types): passed through unchecked


def from_dict(config_cls: Type[T], values: Mapping[str, Any],
              overrides: Optional[Mapping[str, Any]] = None) -> T:
  """`config_cls(**values, **overrides)` with every key and value checked.

  Args:
    config_cls: a config dataclass (e.g. `DQNConfig`).
    values: some or all of its fields (missing ones keep their defaults).
    overrides: applied after `values` (e.g. command-line flags).

  Raises:
    ConfigError: for an unknown key (naming it and the allowed keys) or a value of the
      wrong type; `ValueError` from the dataclass's own checks.
  """
  if not (dataclasses.is_dataclass(config_cls) and isinstance(config_cls, type)):
    raise TypeError(f"expected a config dataclass, got {config_cls!r}")
  if not isinstance(values, Mapping):
    raise ConfigError(f"a {config_cls.__name__} config must be a mapping of field -> value, "
                      f"got {type(values).__name__}")
  fields = {f.name: f for f in dataclasses.fields(config_cls) if f.init}
  hints = typing.get_type_hints(config_cls)
  merged = dict(values)
  merged.update(overrides or {})
  unknown = sorted(k for k in merged if k not in fields)
  if unknown:
    raise ConfigError(f"unknown {config_cls.__name__} key {unknown[0]!r}"
                      f"{' (and ' + ', '.join(map(repr, unknown[1:])) + ')' if unknown[1:] else ''}; "
                      f"allowed keys: {', '.join(sorted(fields))}")
  kwargs = {k: _coerce(config_cls.__name__, k, hints.get(k, Any), v) for k, v in merged.items()}
  return config_cls(**kwargs)


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
  tmp = f"{path}.tmp-{os.getpid()}"
  with open(tmp, "w", encoding="utf-8") as f:
    f.write(text)
  os.replace(tmp, path)


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
