"""`studies.quantize` takes typed settings (issue 52): `StudySettings`, whose defaults are
`actorq quantize`'s flag defaults, so a study runs the same from Python and the CLI."""
import dataclasses

from actorq.cli import main as cli
from actorq.studies import quantize as quantize_study


def test_study_settings_defaults_are_the_flag_defaults():
  args = cli.build_parser("quantize").parse_args(["quantize", "--checkpoint", "run"])
  fields = dataclasses.fields(quantize_study.StudySettings)
  assert len(fields) == 25
  for f in fields:
    if f.name != "checkpoint":
      assert getattr(args, f.name) == f.default, f.name
  assert args.checkpoint == ["run"]


def test_two_studies_at_once_is_a_usage_error():
  settings = quantize_study.StudySettings(checkpoint=["run"], sweep="bits=8", search=True)
  try:
    quantize_study.run(settings)
  except cli.UsageError as e:
    assert str(e) == "--sweep and --search are separate studies; give one of them"
  else:
    raise AssertionError("no UsageError")
