"""The `actorq` command line: `actorq {train,...} ...`.

Each command lives in its own module with `add_parser(subparsers)` and `run(args) -> int`
(listed in `COMMANDS`). Bad input (unknown agent or environment, a count that is not a
positive integer, an unwritable directory, an agent that cannot act in the environment)
prints one line naming what is wrong and what is allowed, and exits with status 2
before anything is written. A fault part-way through a run (`actorq.core.RunFailure`)
prints one line naming the cause (`actorq: stopped: ...`) and exits with status 1.
"""
from __future__ import annotations

import argparse
import importlib
import math
import os
import sys
import warnings
from typing import List, Optional, Sequence, Tuple

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# dm_control imports GLFW for on-screen rendering, which warns on headless machines.
warnings.filterwarnings("ignore", message=".*DISPLAY environment variable is missing.*")

# After the environment above (numpy only; `components.stops`, imported by every run, is
# looked up in `main`, not imported: the light commands, `actorq node` included, skip it).
from actorq import core  # pylint: disable=wrong-import-position

# Command name -> module with `add_parser(subparsers)` and `run(args) -> int`, imported by
# name when the command is built: a command's module loads what it needs (JAX, TF,
# Reverb), and `actorq node`, the light host runner, must not pay for the others.
COMMANDS = {
    "train": "actorq.cli.train",
    "quantize": "actorq.cli.quantize",
    "eval": "actorq.cli.eval",
    "export": "actorq.cli.export",
    "plot": "actorq.cli.plot",
    "bench": "actorq.cli.bench",
    "sweep": "actorq.cli.sweep",
    "pbt": "actorq.cli.pbt",
    "node": "actorq.cli.node",
}


# A run stopped by a fault (`actorq.core.RunFailure`: the environment raised, a learner
# step was not finite, the run directory cannot be written); bad input is 2.
EXIT_RUN_FAILED = 1


# Bad input, raised by every layer (`actorq.core.UsageError`); the name here is kept for
# the commands, which say `cli.UsageError`.
UsageError = core.UsageError


def _argument_type(name: str, convert, ok, allowed: str):
  """An argparse type: `convert(text)` if that works and `ok(value)`, else the one-line
  error `<name> must be <allowed>, got '<text>'`."""
  def parse(text):
    try:
      value = convert(text)
    except ValueError:
      value = None
    if value is None or not ok(value):
      raise argparse.ArgumentTypeError(f"{name} must be {allowed}, got {text!r}")
    return value
  return parse


def positive_int(name):
  """argparse type: an integer > 0 (underscores allowed)."""
  return _argument_type(name, lambda t: int(t.replace("_", "")), lambda v: v > 0,
                        "a positive integer")


def positive_float(name):
  """argparse type: a number > 0."""
  return _argument_type(name, float, lambda v: v > 0, "a positive number")


def number(name):
  """argparse type: any finite number (a target return may be negative)."""
  return _argument_type(name, float, math.isfinite, "a number (finite)")


def nonnegative_int(name):
  """argparse type: an integer >= 0."""
  return _argument_type(name, int, lambda v: v >= 0, "an integer >= 0")


def seed(name):
  """argparse type: a seed, an integer in [0, core.MAX_SEED] (`core.check_seed`; a larger
  one would be cut to 32 bits and repeat another seed's run, case B15)."""
  return _argument_type(name, lambda t: int(t.replace("_", "")),
                        lambda v: 0 <= v <= core.MAX_SEED,
                        f"an integer from 0 to {core.MAX_SEED} (2**31 - 1)")


def parse_seeds(tokens: Sequence[str]) -> Tuple[int, ...]:
  """Seeds from `0-9`, `0,1,2`, `0 1 2` (one token or several) or a mix (`0-4,7`).

  Raises:
    ValueError: not an integer >= 0, a descending range, a repeated seed, or none.
  """
  seeds: List[int] = []
  for token in tokens:
    for part in token.replace(",", " ").split():
      lo, sep, hi = part.partition("-")
      try:
        first, last = (int(lo), int(hi)) if sep else (int(part), int(part))
      except ValueError:
        raise ValueError(f"{part!r} is not a seed (an integer >= 0) or a range like 0-9") from None
      if last < first:
        raise ValueError(f"range {part!r} goes down; write it as {last}-{first}")
      if last > core.MAX_SEED:
        raise ValueError(f"seed {last} is above {core.MAX_SEED} (2**31 - 1: seeds are 32-bit "
                         "where jax, numpy and EnvPool use them)")
      seeds.extend(range(first, last + 1))
  if not seeds:
    raise ValueError("no seeds given")
  repeated = sorted({s for s in seeds if seeds.count(s) > 1})
  if repeated:
    raise ValueError(f"seed {repeated[0]} is given twice")
  return tuple(seeds)


def seed_list(name):
  """argparse type: seeds in one token, `0-9`, `0,1,2` or a mix (`parse_seeds`), as a list;
  a bad token is the one-line error `<name> <token>: <what is wrong>`."""
  def parse(text):
    try:
      return list(parse_seeds([text]))
    except ValueError as e:
      raise argparse.ArgumentTypeError(f"{name} {text}: {e}") from None
  return parse


def precision_list(flag: str, text: str, allowed, default=None) -> tuple:
  """`--precisions fp32,int8` as a tuple (`default` when `text` is None).

  Raises:
    UsageError: an unknown or repeated precision, or none.
  """
  if text is None:
    return tuple(default or ())
  precisions = tuple(p.strip() for p in text.split(",") if p.strip())
  if not precisions or any(p not in allowed for p in precisions):
    raise UsageError(f"{flag} {text!r}: allowed precisions are {', '.join(allowed)}")
  if len(set(precisions)) != len(precisions):
    raise UsageError(f"{flag} {text!r} repeats a precision")
  return precisions


def print_report(render, directory: str) -> int:
  """`--render DIR` of a benchmark command: prints `render(directory)`'s table.

  Raises:
    UsageError: DIR holds no finished report (`render` raised FileNotFoundError).
  """
  try:
    _, table = render(directory)
  except FileNotFoundError as e:
    raise UsageError(f"--render: {e}") from None
  print(table)
  return 0


class Parser(argparse.ArgumentParser):
  """argparse, but errors are one line (`actorq: error: ...`) and exit status 2."""

  def error(self, message):
    self.exit(2, f"actorq: error: {message}\n")


def _module(name):
  return importlib.import_module(COMMANDS[name])


def build_parser(only: Optional[str] = None) -> argparse.ArgumentParser:
  """The parser of every command, or of command `only` alone (which then imports
  only that command's module: `actorq node` starts a host runner without TF or JAX)."""
  parser = Parser(prog="actorq", description="Acme-style RL with quantized (ActorQ) actors.")
  sub = parser.add_subparsers(dest="command", metavar="{" + ",".join(COMMANDS) + "}",
                              parser_class=Parser)
  sub.required = True
  for name in COMMANDS if only is None else (only,):
    _module(name).add_parser(sub)
  return parser


# Commands that run jax computations in this process without a learner (`train` chooses its
# learner's device itself; the others compute nothing or start `train` children).
_COMPUTE_IN_PROCESS = ("eval", "quantize", "bench", "export")


def main(argv: Optional[List[str]] = None) -> int:
  argv = sys.argv[1:] if argv is None else list(argv)
  args = build_parser(argv[0] if argv and argv[0] in COMMANDS else None).parse_args(argv)
  if args.command in _COMPUTE_IN_PROCESS:  # train places its learner itself
    # Looked up by name (loads JAX), like `_module`: a CUDA plugin without a GPU would
    # otherwise stop jax from starting at all (components/placement.py).
    importlib.import_module("actorq.components.placement").cpu_unless_gpu()
  try:
    return int(_module(args.command).run(args))
  except UsageError as e:
    print(f"actorq: error: {e}", file=sys.stderr)
    return 2
  except KeyboardInterrupt as e:
    stops = sys.modules.get("actorq.components.stops")  # (imported by every run)
    if stops is not None and isinstance(e, stops.Preempted):
      print(f"actorq: stopped by signal {e.signum}", file=sys.stderr)
      return 128 + e.signum
    print("actorq: interrupted", file=sys.stderr)
    return 130
  except core.RunFailure as e:  # a fault part-way through a run (experiment.RunError too)
    print(f"actorq: stopped: {e}", file=sys.stderr)
    return EXIT_RUN_FAILED


if __name__ == "__main__":
  # `python -m actorq.cli.main` (kept for scripts; `python -m actorq.cli` is the short
  # form): `UsageError` lives in core, so this __main__ copy catches it as the imported
  # module does.
  sys.exit(main())
