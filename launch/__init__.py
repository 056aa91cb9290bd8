"""Launching runs. `actorq.launch.run(spec)` launches a `spec.RunSpec` with its launch
mode (`launch/engine.py`, the table `launch/modes.py`)."""


def run(spec, **kwargs):
  """`engine.run(spec, **kwargs)` (imported when called: `actorq.launch.<module>` imports
  stay light)."""
  from actorq.launch import engine  # pylint: disable=g-import-not-at-top
  return engine.run(spec, **kwargs)
