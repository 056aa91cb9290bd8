"""Environment arguments in the id: ``gym:CartPole-v1?length=0.8&masscart=1.2``.

The part after ``?`` sets numeric parameters of the task (a task variant: a longer pole, a
heavier cart, another gravity), ``name=value`` pairs joined by ``&``; an action-repeat
suffix comes last (``gymnax:CartPole-v1?length=0.8@repeat=2``). Which names a task takes
is the backend's: the numeric physical attributes of a Gymnasium env's unwrapped instance
(``gym:``) or the fields of a gymnax task's ``EnvParams`` (``gymnax:``), less the derived
constants of `DERIVED`, which are recomputed from the others (CartPole's ``total_mass =
masscart + masspole`` and ``polemass_length = masspole * length``), so a variant stays
physically consistent.

    parse("length=0.8&masscart=1.2")          # (("length", 0.8), ("masscart", 1.2))
    resolve("gym:CartPole-v1", args, defaults)  # one-line error naming an unknown argument
    derived("CartPole-v1", values)             # {"total_mass": ..., "polemass_length": ...}
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Mapping, Tuple

from actorq import core

SEPARATOR = "?"

# A parsed argument list: ((name, value), ...) in the id's order (hashable: it keys caches).
Arguments = Tuple[Tuple[str, float], ...]


def _cartpole(values: Mapping[str, Any]) -> Dict[str, Any]:
  # Barto, Sutton and Anderson 1983's cart-pole as Gymnasium and gymnax write it: the
  # equations use the total mass and the pole's mass times its half-length.
  return {"total_mass": values["masscart"] + values["masspole"],
          "polemass_length": values["masspole"] * values["length"]}


# Task name (without prefix) -> the constants derived from its parameters: fn(all parameter
# values) -> {derived name: value}. They are not arguments themselves.
DERIVED: Dict[str, Callable[[Mapping[str, Any]], Dict[str, Any]]] = {
    "CartPole-v1": _cartpole,
    "CartPole-v1-po": _cartpole,
}
DERIVED_NAMES: Dict[str, Tuple[str, ...]] = {
    "CartPole-v1": ("total_mass", "polemass_length"),
    "CartPole-v1-po": ("total_mass", "polemass_length"),
}

# Numeric attributes of Gymnasium's classic-control envs that size the renderer's window
# (pixels), not the task: never arguments.
RENDERER_NAMES = frozenset({"screen_width", "screen_height", "screen_dim"})


def split(name: str) -> Tuple[str, str]:
  """``"CartPole-v1?length=0.8"`` -> ``("CartPole-v1", "length=0.8")``; no ``?`` -> ``(name, "")``."""
  base, _, query = name.partition(SEPARATOR)
  return base, query


def parse(query: str, env_id: str = "") -> Arguments:
  """``"length=0.8&masscart=1.2"`` -> ``(("length", 0.8), ("masscart", 1.2))``.

  Raises:
    core.UnknownEnvironmentError: a pair that is not ``name=number``, or a name given twice
      (one line naming the id and the pair).
  """
  if not query:
    return ()
  parsed, seen = [], set()
  for pair in query.split("&"):
    key, sep, value = pair.partition("=")
    try:
      number = float(value)
    except ValueError:
      number = None
    if not sep or not key.isidentifier() or number is None:
      raise core.UnknownEnvironmentError(
          f"environment id {env_id!r}: argument {pair!r} is not name=number; write "
          "arguments as ?name=value&name=value, e.g. gym:CartPole-v1?length=0.8&masscart=1.2")
    if key in seen:
      raise core.UnknownEnvironmentError(f"environment id {env_id!r}: argument {key!r} "
                                         "is given twice")
    seen.add(key)
    parsed.append((key, number))
  return tuple(parsed)


def parameters(name: str, values: Mapping[str, Any]) -> Dict[str, Any]:
  """The arguments task `name` takes, with their defaults: the numeric entries of `values`
  (its parameters as the backend holds them; booleans are not numbers here) less
  `DERIVED`'s and the renderer's window size (`RENDERER_NAMES`)."""
  derived_names = set(DERIVED_NAMES.get(name, ())) | RENDERER_NAMES
  return {k: v for k, v in sorted(values.items())
          if k not in derived_names and isinstance(v, (int, float)) and not isinstance(v, bool)}


def resolve(env_id: str, arguments: Arguments, defaults: Mapping[str, Any]) -> Dict[str, Any]:
  """`arguments` as a dict, each value of its default's type (an integer parameter takes
  an integral value only).

  Raises:
    core.UnknownEnvironmentError: an argument outside `defaults` (one line naming the id,
      the argument and the allowed ones), or a fractional value of an integer parameter.
  """
  resolved = {}
  for key, value in arguments:
    if key not in defaults:
      allowed = ", ".join(defaults) if defaults else "none (this task takes no arguments)"
      raise core.UnknownEnvironmentError(
          f"environment id {env_id!r}: unknown argument {key!r}; allowed: {allowed}")
    if isinstance(defaults[key], int):
      if not float(value).is_integer():
        raise core.UnknownEnvironmentError(
            f"environment id {env_id!r}: argument {key!r} is an integer, got {value}")
      value = int(value)
    resolved[key] = value
  return resolved


def derived(name: str, values: Mapping[str, Any]) -> Dict[str, Any]:
  """The derived constants of task `name` (`DERIVED`) from all its parameter values
  (Python floats or JAX arrays); {} for a task without any."""
  fn = DERIVED.get(name)
  return {} if fn is None else fn(values)
