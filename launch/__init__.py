"""Launching runs. `actorq.launch.run(spec)` launches a `spec.RunSpec` with its launch
mode (`launch/engine.py`, the table `launch/modes.py`)."""
import importlib


def __getattr__(name: str):
  """`actorq.launch.run` is `engine.run` (PEP 562: resolved when first read, so importing
  one `actorq.launch.<module>` does not import the whole engine)."""
  if name == "run":
    return importlib.import_module("actorq.launch.engine").run
  raise AttributeError(f"module 'actorq.launch' has no attribute {name!r}")
