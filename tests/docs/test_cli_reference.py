"""docs/reference/cli.md is what scripts/cli_reference.py writes from today's parsers."""
import importlib.util
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _generator():
  spec = importlib.util.spec_from_file_location("cli_reference", ROOT / "scripts" / "cli_reference.py")
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def test_committed_cli_reference_is_current():
  generator = _generator()
  committed = (ROOT / "docs" / "reference" / "cli.md").read_text(encoding="utf-8")
  assert committed == generator.render(), (
      "docs/reference/cli.md is stale: run .venv/bin/python scripts/cli_reference.py")


def test_reference_holds_every_command_help():
  generator = _generator()
  helps = dict(generator.command_helps())
  from actorq.cli import main as cli
  assert list(helps) == ["actorq", *cli.COMMANDS]
  page = generator.render()
  for name in cli.COMMANDS:
    assert f"## `actorq {name}`" in page
    assert helps[name].startswith(f"usage: actorq {name} ")
  # A flag's own help text reaches the page (not just the usage line).
  assert "--actor-precision PRECISION" in helps["train"]
  assert "precision the actors act with" in page
