"""Every registered agent's config, across the shared config bases (issue 38): the same
defaults (run.json's "config"), field types, field checks and cross-field rules as before
the bases were introduced. `data/config_defaults.json` was written from the configs at
7a30947, before any of them changed; it is not regenerated. Edited by hand since, for
deliberate additions only: DQN's (and so IDQN's) td_operator, td_operator_alpha and
munchausen_temperature (issue 53), and the acting precision litert-fp32 (int8's placebo,
issue 53) in every actor_precision/evaluation_precision check's choices."""
import dataclasses
import json
import os
import typing

import pytest

from actorq.components import config_checks, config_io
from actorq.agents import registry

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


@pytest.mark.parametrize("agent", registry.names())
def test_every_field_has_a_meaning_and_every_meaning_a_field(agent):
  config_cls, _ = registry.get(agent)
  help_ = config_io.field_help(config_cls)
  assert [h.name for h in help_] == [f.name for f in dataclasses.fields(config_cls)]
  assert [h.name for h in help_ if len(h.meaning) < 10] == []
  # An Attributes entry of any class of the config names one of its fields (no stale or
  # misspelt entry).
  names = {f.name for f in dataclasses.fields(config_cls)}
  for klass in config_cls.__mro__:
    assert set(config_io.attribute_docs(klass)) <= names, klass.__name__


def test_inherited_fields_keep_their_shared_meaning_unless_re_worded():
  dqn, r2d2, sac, ppo = (dict((h.name, h.meaning) for h in config_io.field_help(registry.get(a)[0]))
                         for a in ("dqn", "r2d2", "sac", "ppo"))
  assert dqn["actor_precision"] == sac["actor_precision"] == ppo["actor_precision"]
  assert "ActorQ" in sac["actor_precision"]
  assert r2d2["actor_precision"] != dqn["actor_precision"]  # names its layer order
  assert r2d2["min_replay_size"].startswith("sequences")
  assert dqn["min_replay_size"] == sac["min_replay_size"]
