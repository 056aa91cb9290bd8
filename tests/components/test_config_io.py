"""Config dataclasses <-> JSON/YAML files; unknown keys and bad values are errors."""
import dataclasses
import json
import os
import typing

import pytest

from actorq.agents.dqn.config import DQNConfig
from actorq.cli import main as cli
from actorq.components import config_io
from actorq.agents import registry


@pytest.mark.parametrize("agent", registry.names())
def test_every_agent_config_round_trips_through_json(tmp_path, agent):
  config_cls, _ = registry.get(agent)
  config = config_cls()
  path = str(tmp_path / f"{agent}.json")
  config_io.save(config, path)
  with open(path) as f:
    on_disk = json.load(f)
  assert set(on_disk) == {f.name for f in dataclasses.fields(config_cls)}
  assert config_io.load(config_cls, path) == config


def test_yaml_round_trip_or_a_clear_error_without_pyyaml(tmp_path):
  path = str(tmp_path / "dqn.yaml")
  try:
    import yaml  # noqa: F401
  except ImportError:
    with pytest.raises(config_io.ConfigError, match="PyYAML.*JSON"):
      config_io.save(DQNConfig(), path)
    (tmp_path / "x.yml").write_text("batch_size: 32\n")
    with pytest.raises(config_io.ConfigError, match="PyYAML"):
      config_io.read_file(str(tmp_path / "x.yml"))
  else:
    config_io.save(DQNConfig(batch_size=32), path)
    assert config_io.load(DQNConfig, path) == DQNConfig(batch_size=32)


def test_partial_file_lists_become_tuples_and_overrides_win(tmp_path):
  path = tmp_path / "c.json"
  path.write_text(json.dumps({"hidden_sizes": [64, 32], "batch_size": 16, "learning_rate": 1,
                              "evaluation_precision": "int8"}))
  config = config_io.load(DQNConfig, str(path), overrides={"batch_size": 8})
  assert config.hidden_sizes == (64, 32)
  assert config.batch_size == 8
  assert config.learning_rate == 1.0 and isinstance(config.learning_rate, float)
  assert config.evaluation_precision == "int8"
  assert config.n_step == DQNConfig().n_step  # not in the file: default


def test_unknown_key_names_it_and_lists_the_allowed_keys():
  with pytest.raises(config_io.ConfigError) as e:
    config_io.from_dict(DQNConfig, {"batch_sise": 32})
  message = str(e.value)
  assert "'batch_sise'" in message
  assert "allowed keys:" in message and "batch_size" in message and "n_step" in message


@pytest.mark.parametrize("key,value,match", [
    ("batch_size", "many", "DQNConfig.batch_size must be an integer"),
    ("batch_size", 2.5, "DQNConfig.batch_size must be an integer"),
    ("double_q", 1, "DQNConfig.double_q must be true or false"),
    ("hidden_sizes", 64, "DQNConfig.hidden_sizes must be a list"),
    ("learning_rate", "fast", "DQNConfig.learning_rate must be a number"),
])
def test_bad_values_are_named(key, value, match):
  with pytest.raises(config_io.ConfigError, match=match):
    config_io.from_dict(DQNConfig, {key: value})


def test_dataclass_checks_still_run():
  with pytest.raises(ValueError, match="n_step must be >= 1"):
    config_io.from_dict(DQNConfig, {"n_step": 0})


def test_set_assignments_parse_json_values():
  assert config_io.parse_assignment("batch_size=32") == ("batch_size", 32)
  assert config_io.parse_assignment("hidden_sizes=[64,64]") == ("hidden_sizes", [64, 64])
  assert config_io.parse_assignment("actor_precision=int8") == ("actor_precision", "int8")
  with pytest.raises(config_io.ConfigError, match="KEY=VALUE"):
    config_io.parse_assignment("batch_size")


def test_train_cli_rejects_an_unknown_key_before_writing_anything(tmp_path, capsys):
  bad = tmp_path / "bad.json"
  bad.write_text(json.dumps({"batch_size": 32, "learning_rat": 0.1}))
  logdir = tmp_path / "run"
  status = cli.main(["train", "--config", str(bad), "--logdir", str(logdir), "--steps", "10"])
  err = capsys.readouterr().err.strip().splitlines()
  assert status == 2
  assert len(err) == 1 and "'learning_rat'" in err[0] and "learning_rate" in err[0]
  assert not os.path.exists(logdir)


def test_train_resolves_file_then_set_then_flag():
  from actorq.launch import spec as spec_lib
  resumed = spec_lib.RunSpec(config={"batch_size": 16, "actor_precision": "fp16"})
  config, _ = spec_lib.resolve_config("dqn", resumed, sets=["batch_size=8"],
                                      actor_precision="int8")
  assert isinstance(config, DQNConfig)
  assert (config.batch_size, config.actor_precision) == (8, "int8")


@dataclasses.dataclass
class _Base:
  """A base.

  Attributes:
    rate: steps per second; > 0.
    sizes: widths of the layers,
      each >= 1.

  Raises:
    Nothing: a section after Attributes ends it.
  """
  rate: float = 1.0
  sizes: tuple = (4,)


@dataclasses.dataclass
class _Child(_Base):
  """A child that re-words one inherited field and adds two.

  Attributes:
    rate: items per second (re-worded).
    lo, hi (float): the bounds.
  """
  lo: typing.Optional[float] = None
  hi: typing.Tuple[int, ...] = (1, 2)
  undocumented: bool = False


def test_attribute_docs_reads_only_the_classs_own_attributes_section():
  assert config_io.attribute_docs(_Base) == {
      "rate": "steps per second; > 0.", "sizes": "widths of the layers, each >= 1."}
  assert config_io.attribute_docs(_Child) == {
      "rate": "items per second (re-worded).", "lo": "the bounds.", "hi": "the bounds."}


def test_field_help_takes_the_nearest_meaning_the_type_and_the_default():
  assert config_io.field_help(_Child) == [
      ("rate", "float", 1.0, "items per second (re-worded)."),
      ("sizes", "tuple", (4,), "widths of the layers, each >= 1."),
      ("lo", "float or null", None, "the bounds."),
      ("hi", "list of int", (1, 2), "the bounds."),
      ("undocumented", "bool", False, ""),
  ]
  help_ = {h.name: h for h in config_io.field_help(DQNConfig)}
  assert help_["samples_per_insert"].default == 32.0
  assert help_["samples_per_insert"].type == "float"
  assert help_["samples_per_insert"].meaning.startswith("sampled transitions per inserted")
  # inherited from components.agent_config.ActorSettings
  assert help_["actor_precision"].meaning.startswith("precision the actors act with: fp32")
  with pytest.raises(TypeError, match="config dataclass"):
    config_io.field_help(DQNConfig())
