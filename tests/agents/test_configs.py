"""Every registered agent's config, across the shared config bases (issue 38): the same
defaults (run.json's "config"), field types, field checks and cross-field rules as before
the bases were introduced. `data/config_defaults.json` was written from the configs at
7a30947, before any of them changed; it is not regenerated."""
import dataclasses
import json
import os
import typing

import pytest

from actorq.components import config_checks
from actorq.launch import registry

HERE = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(HERE, "data", "config_defaults.json"), encoding="utf-8") as _f:
  BEFORE = json.load(_f)


def test_the_fixture_covers_every_registered_agent():
  assert sorted(BEFORE) == registry.names()


@pytest.mark.parametrize("agent", registry.names())
def test_defaults_types_checks_and_rules_are_unchanged(agent):
  config_cls, _ = registry.get(agent)
  before = BEFORE[agent]
  assert config_cls.__name__ == before["class"]
  # run.json stores config_io.to_dict(config): the JSON of dataclasses.asdict.
  assert json.loads(json.dumps(dataclasses.asdict(config_cls()))) == before["defaults"]
  hints = typing.get_type_hints(config_cls)
  assert {f.name: repr(hints[f.name]) for f in dataclasses.fields(config_cls)} == before["types"]
  assert {f.name: repr(config_checks.check_of(config_cls, f.name))
          for f in dataclasses.fields(config_cls)} == before["checks"]
  assert [r.text for r in config_checks.rules_of(config_cls)] == before["rules"]
