"""Writes docs/reference/cli.md: every `actorq` command's `--help`, from the parsers themselves.

    .venv/bin/python scripts/cli_reference.py            # rewrite docs/reference/cli.md
    .venv/bin/python scripts/cli_reference.py --check    # exit 1 if the committed page is stale

The generator is `actorq.cli.reference` (the parsers' introspection lives in cli/).
"""
import sys

from actorq.cli.reference import PAGE, WIDTH, command_helps, main, render  # noqa: F401

if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))
