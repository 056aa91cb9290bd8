"""`launch.spec.RunSpec`: from parsed arguments, to run.json and back, to the argv that
reproduces it, and built into the ExperimentConfig; `local.run` writes run.json (issue 38)."""
import copy
import dataclasses
import json
import os
import re
import shutil

import pytest

from actorq import core
from actorq.agents.dqn.builder import DQNBuilder
from actorq.agents.dqn.config import DQNConfig
from actorq.cli import main as cli
from actorq.components import config_io
from actorq.launch import experiment, local
from actorq.launch import spec as spec_lib

FIXTURE = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures",
                       "run_7a30947_dqn")


def _parse(argv):
  return cli.build_parser().parse_args(["train"] + list(argv))


def _spec(argv):
  return spec_lib.RunSpec.from_args(_parse(argv))


@pytest.mark.parametrize("argv", [
    ["--steps", "3000", "--eval-every", "1000", "--seed", "4", "--logdir", "/tmp/a"],
    ["--set", "hidden_sizes=[16,8]", "--set", "batch_size=16", "--actor-precision", "int8",
     "--set", "replay_table_name=\"t1\"", "--set", "learning_rate_decay_steps=null",
     "--logdir", "r", "--checkpoint-every", "2.5", "--keep-checkpoints", "1"],
    ["--launch", "local_mp", "--num-actors", "3", "--num-envs", "4", "--logdir", "r",
     "--learner-device", "cpu"],
    ["--launch", "hosts", "--hosts", "10.0.0.1,10.0.0.2", "--start", "print",
     "--port-base", "31000", "--host-timeout", "7", "--logdir", "r"],
    ["--set", "actor_precision=mixed:fp16,int8,int8", "--logdir", "r"],
])
def test_to_argv_round_trips(argv):
  spec = _spec(argv)
  assert _spec(spec.to_argv()) == spec
  # The argv is one of `actorq train`'s: parsing it again gives it again.
  assert _spec(spec.to_argv()).to_argv() == spec.to_argv()


@pytest.mark.parametrize("argv", [
    ["--population", "4", "--steps", "6000", "--ready-every", "1500", "--logdir", "/tmp/p"],
    ["--agent", "td3", "--env", "gym:Pendulum-v1", "--population", "3", "--steps", "900",
     "--ready-every", "300", "--mutate", "critic_learning_rate,actor_precision", "--seed", "7",
     "--num-envs", "2", "--eval-episodes", "3", "--quantile", "0.5",
     "--resample-probability", "0.1", "--set", "batch_size=16", "--set",
     "policy_hidden_sizes=[16,8]", "--logdir", "r", "--checkpoint-every", "2.5"],
])
def test_to_argv_round_trips_a_population(argv):
  """`to_argv` carries the population section: `actorq pbt` parses it back to the spec."""
  from actorq.cli import pbt as pbt_cli  # pylint: disable=import-outside-toplevel

  def parse(args):
    return pbt_cli.spec_from_args(cli.build_parser().parse_args(["pbt"] + list(args)))
  spec = parse(argv)
  assert spec.command == "pbt" and spec.population["size"] == int(argv[argv.index(
      "--population") + 1])
  assert parse(spec.to_argv()) == spec
  assert parse(spec.to_argv()).to_argv() == spec.to_argv()
  assert spec_lib.RunSpec.from_json(spec.to_json(), logdir=spec.logdir,
                                    checkpoint_every=spec.checkpoint_every) == spec
  resumed = dataclasses.replace(spec, resume=True)
  assert resumed.to_argv()[:2] == ["--resume", spec.logdir]


def test_from_args_leaves_the_parsed_arguments_as_they_were():
  args = _parse(["--launch", "local_mt", "--actor-precision", "int8", "--logdir", "r"])
  before = copy.deepcopy(vars(args))
  spec = spec_lib.RunSpec.from_args(args)
  assert vars(args) == before
  assert (spec.num_actors, spec.steps, spec.eval_every, spec.eval_episodes) == (2, 100_000,
                                                                                 5_000, 10)
  assert spec.config == config_io.to_dict(DQNConfig(actor_precision="int8"))
  with pytest.raises(dataclasses.FrozenInstanceError):
    spec.seed = 3


def test_from_args_without_logdir_names_the_run_and_a_dry_run_has_none():
  assert re.fullmatch(r"runs/dqn-gym_CartPole-v1-s2-local_mp-\d{8}-\d{6}",
                      _spec(["--seed", "2", "--launch", "local_mp"]).logdir)
  assert _spec(["--dry-run"]).logdir is None


@pytest.mark.parametrize("argv,message", [
    (["--num-actors", "3"], "--num-actors needs --launch local_mt, local_mp or hosts"),
    (["--hosts", "a,b"], "--hosts needs --launch hosts"),
    (["--agent", "nope"], "unknown agent 'nope'; allowed: a2c, d4pg"),
    (["--set", "batch_sise=3"], "'batch_sise'"),
    (["--env", "gym:Pendulum-v1"], "agent 'dqn' cannot run on gym:Pendulum-v1"),
    (["--resume", "/nonexistent/x"], "--resume /nonexistent/x is not a run directory"),
])
def test_from_args_refuses_bad_input_in_one_line(argv, message):
  with pytest.raises(cli.UsageError, match=re.escape(message)):
    _spec(argv)


def test_the_old_run_json_is_the_specs_json_and_builds():
  with open(os.path.join(FIXTURE, "run.json")) as f:
    info = json.load(f)
  spec = spec_lib.RunSpec.load(FIXTURE)
  assert spec.to_json() == info
  assert (spec.agent, spec.env, spec.seed, spec.steps, spec.eval_every, spec.eval_episodes,
          spec.launch, spec.num_actors, spec.num_envs) == (
              "dqn", "gym:CartPole-v1", 0, 400, 200, 2, "local", None, 1)
  config = dataclasses.replace(spec, logdir="/tmp/x").build()
  assert isinstance(config.builder, DQNBuilder)
  assert config.builder.config.hidden_sizes == (16,)
  assert (config.num_steps, config.eval_every, config.eval_episodes, config.seed,
          config.env_id, config.logdir) == (400, 200, 2, 0, "gym:CartPole-v1", "/tmp/x")


def test_load_drops_unknown_keys_with_one_warning_each_kind_and_defaults_missing(tmp_path):
  with open(os.path.join(FIXTURE, "run.json")) as f:
    info = json.load(f)
  info["config"]["legacy_option"] = 1
  del info["config"]["batch_size"]
  info["notes"] = "x"
  info["train"]["pbt"] = True
  del info["train"]["eval_episodes"]
  (tmp_path / "run.json").write_text(json.dumps(info))
  with pytest.warns(UserWarning) as record:
    spec = spec_lib.RunSpec.load(str(tmp_path))
  assert sorted(str(w.message) for w in record) == [
      "run.json: ignoring DQNConfig key(s) this version does not know: legacy_option",
      "run.json: ignoring key(s) this version does not know: notes, train.pbt"]
  assert "legacy_option" not in spec.config and spec.eval_episodes == 10
  assert spec.make_builder().config.batch_size == DQNConfig().batch_size


def test_load_refuses_a_file_that_is_not_a_run_json(tmp_path):
  (tmp_path / "run.json").write_text(json.dumps({"agent": "dqn", "seed": 1}))
  with pytest.raises(cli.UsageError, match=r"run.json is not a run.json of 'actorq train' "
                                           r"\(missing env, config\)"):
    spec_lib.RunSpec.load(str(tmp_path))


def test_distributed_run_json_keys_are_as_train_wrote_them():
  spec = _spec(["--launch", "hosts", "--hosts", "h1,h2", "--start", "print", "--logdir", "r",
                "--num-envs", "2"])
  assert spec.to_json()["train"] == {
      "steps": 100_000, "eval_every": 5_000, "eval_episodes": 10, "launch": "hosts",
      "num_actors": 2, "hosts": ["h1", "h2"], "port_base": 29150, "start": "print",
      "num_envs": 2}
  loaded = spec_lib.RunSpec.from_json(spec.to_json(), logdir="r", launch_options={
      k: spec.launch_options[k] for k in ("node_python", "host_timeout")})
  assert loaded.to_json() == spec.to_json()


@pytest.mark.slow
def test_a_python_api_run_has_a_run_json_the_cli_evaluates(tmp_path, capsys):
  logdir = str(tmp_path / "api")
  config = experiment.ExperimentConfig(
      DQNBuilder(DQNConfig(hidden_sizes=(16,), min_replay_size=100, batch_size=16)),
      "gym:CartPole-v1", num_steps=300, seed=1, eval_every=300, eval_episodes=1,
      logdir=logdir, checkpoint_every=None)
  result = local.run(config)
  spec = spec_lib.RunSpec.load(logdir)
  assert spec.to_json() == {
      "agent": "dqn", "env": "gym:CartPole-v1", "seed": 1,
      "config": config_io.to_dict(config.builder.config),
      "train": {"steps": 300, "eval_every": 300, "eval_episodes": 1}}
  # The CLI's run.json for the same run is the same file.
  cli_spec = _spec(["--steps", "300", "--seed", "1", "--eval-every", "300",
                    "--eval-episodes", "1", "--set", "hidden_sizes=[16]",
                    "--set", "min_replay_size=100", "--set", "batch_size=16"])
  assert cli_spec.to_json() == spec.to_json()
  capsys.readouterr()
  assert cli.main(["eval", "--checkpoint", logdir, "--episodes", "2", "--seed", "7"]) == 0
  out = capsys.readouterr().out
  assert (f"actorq: dqn on gym:CartPole-v1, checkpoint {logdir}/checkpoints/"
          f"ckpt-000000000300.pkl (actor step 300, learner step {result.learner_steps})") in out
  assert re.search(r"episode return: mean \d", out)
  # And train --resume continues it, from the same run.json.
  run = str(tmp_path / "copy")
  shutil.copytree(logdir, run)
  # --steps is the run's total: below the newest checkpoint's 300 nothing would run.
  for steps in ("10", "299"):
    with pytest.raises(core.UsageError) as e:
      _spec(["--resume", run, "--steps", steps])
    assert str(e.value) == (f"--steps {steps}: the run's newest checkpoint is at 300 actor steps "
                            "and --steps is the run's total; give at least 300, or leave it "
                            "out to keep the run's 300")
  assert _spec(["--resume", run, "--steps", "300"]).steps == 300
  assert cli.main(["train", "--resume", run, "--steps", "400", "--no-progress"]) == 0
  assert "resumed from" in capsys.readouterr().out
