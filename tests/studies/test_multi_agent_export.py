"""`actorq export` of multi-agent runs (issue 44 item 4): one standalone model and JSON per
parameter group plus an index, on the scripted two-agent environment
(`fakes.ScriptedParallelEnv`: agents "a" and "b", observations float32 [t, i, seed])."""
import json
import os

import numpy as np
import pytest

from actorq.agents import ippo
from actorq.components.envs import multi_agent as ma_env
from actorq.components import checkpointing
from actorq.launch import experiment
from actorq.launch import local
from actorq.launch import spec as spec_lib
from actorq.quantization import bias_correction
from actorq.quantization import export as qe
from actorq.quantization import payload as pl
from actorq.quantization import runtimes
from actorq.studies import export as export_lib
from actorq.studies import multi_agent_eval
from actorq.testing import fakes


@pytest.fixture
def scripted_id(monkeypatch):
  return fakes.install_scripted_pz(monkeypatch)


def _train(env_id, logdir, share):
  config = ippo.IPPOConfig(rollout_length=5, batch_size=2, minibatch_size=5, num_epochs=2,
                           policy_hidden=(8,), value_hidden=(8,), share_parameters=share)
  local.run(experiment.ExperimentConfig(
      builder=ippo.IPPOBuilder(config), env_id=env_id, num_steps=40, eval_every=40,
      eval_episodes=1, seed=3, logdir=str(logdir), num_envs=2, checkpoint_every=None))
  return str(logdir)


def _observations(group):
  """Raw observations of the group's agents as the environment gives them ([t, i, seed]
  for t = 0..2) with the group's one-hot id appended: `[R, D + id_size]`."""
  rows, index = [], []
  for k, agent in enumerate(group.agents):
    i = ["a", "b"].index(agent)
    for t in range(3):
      rows.append([t, i, 12345.0])
      index.append(k)
  return group.observations(np.asarray(rows, np.float32), np.asarray(index))


@pytest.mark.parametrize("share,names", [(True, ["shared"]), (False, ["a", "b"])])
def test_a_multi_agent_export_writes_a_model_per_group_that_runs_the_groups_policy(
    scripted_id, tmp_path, share, names):
  run = _train(scripted_id, tmp_path / "run", share)
  run_spec, state, _ = spec_lib.load_run(run)
  builder = run_spec.make_builder()
  env = ma_env.make_multi_agent_environment(scripted_id, seed=0)
  groups, parts = multi_agent_eval.group_parts(builder, env)
  env.close()
  written = []
  for precision in ("fp32", "int8"):
    index_path, _, index = export_lib.export(run, precision, episodes=2)
    directory = os.path.join(run, "export")
    assert index_path == os.path.join(directory, f"policy-{precision}.json")
    with open(index_path, encoding="utf-8") as f:
      assert json.load(f) == index
    assert [g["group"] for g in index["groups"]] == names
    assert index["multi_agent"] and index["agents"] == ["a", "b"]
    written += [f"policy-{precision}.json"] + [
        f"policy-{precision}-{n}.{e}" for n in names for e in ("tflite", "json")]
    assert sorted(os.listdir(directory)) == sorted(written)
    calibrations = multi_agent_eval.calibrations_for(
        scripted_id, groups, parts, state["policy_params"], precision, 12345, 1000)
    for g, (group, networks, policy) in enumerate(parts):
      entry = index["groups"][g]
      assert entry["agents"] == list(group.agents)
      with open(os.path.join(directory, entry["json"]), encoding="utf-8") as f:
        meta = json.load(f)
      with open(os.path.join(directory, entry["model"]), "rb") as f:
        model = f.read()
      assert meta["model"]["bytes"] == len(model) == entry["bytes"]
      assert meta["model"]["precision"] == precision
      block = meta["parameter_group"]
      assert block["name"] == group.name and block["agents"] == list(group.agents)
      if share:  # [t, i, seed] then the one-hot id of a (0) or b (1)
        assert meta["input"]["shape"] == [-1, 5]
        assert block["input_layout"]["agent_id"] == dict(
            block["input_layout"]["agent_id"], offset=3, size=2,
            one_hot_index={"a": 0, "b": 1})
      else:
        assert meta["input"]["shape"] == [-1, 3] and "agent_id" not in block["input_layout"]
      p = meta["parity"]
      assert p["episodes"] == 2 and p["env_seed"] == 12345
      # The scripted episode: 2 steps of "a", 3 of "b" per episode.
      assert p["observations_compared"] == 2 * (2 * ("a" in group.agents)
                                                + 3 * ("b" in group.agents))
      assert 0.0 <= p["greedy_action_agreement"] <= 1.0
      if precision == "fp32":
        assert p["greedy_action_agreement"] == 1.0
        assert p["export_return_mean"] == p["fp32_return_mean"]
      # The model reproduces the group's policy at `precision` (the actors' runtime, an
      # int8 payload bias-corrected on the group's calibration observations).
      params = state["policy_params"][group.name]
      payload = pl.make_payload(params, networks.spec, precision, 0)
      if calibrations is not None:
        payload = bias_correction.correct_payload(payload, params, networks.spec,
                                                  calibrations[g])
      runtime = runtimes.make_runtime(precision, networks.spec)
      runtime.load(payload)
      obs = _observations(group)
      want, got = np.asarray(runtime(obs)), qe.ModelRuntime(model)(obs)
      tol = 1e-4 if precision == "fp32" else 1e-6  # fp32: LiteRT vs XLA summation order
      np.testing.assert_allclose(got, want, atol=tol * np.abs(want).max())
      assert np.array_equal(np.argmax(got, axis=1), np.argmax(want, axis=1))


def test_group_file_names_keep_only_safe_characters():
  assert export_lib.group_file_name("/x/policy-int8.tflite", "agent_0") == (
      "/x/policy-int8-agent_0.tflite")
  assert export_lib.group_file_name("p.tflite", "a/b c") == "p-a_b_c.tflite"


def test_a_checkpoint_without_multi_agent_policies_is_one_line(scripted_id, tmp_path):
  run = _train(scripted_id, tmp_path / "run", True)
  path, state = checkpointing.restore_latest(os.path.join(run, "checkpoints"))
  run_spec = spec_lib.load_run(run)[0]
  state = dict(state, multi_agent=False)
  with pytest.raises(export_lib.core.UsageError, match="holds no multi-agent policies"):
    export_lib.export_multi_agent(run_spec, state, path, "int8")
  state = dict(state, multi_agent=True, policy_params={"a": {}, "b": {}})
  with pytest.raises(export_lib.core.UsageError,
                     match="holds the parameter groups a, b, the run's config makes shared"):
    export_lib.export_multi_agent(run_spec, state, path, "int8")
  assert not os.path.exists(os.path.join(run, "export"))


@pytest.mark.isolated  # Launchpad nodes as threads of the test process: run in a child
@pytest.mark.slow  # a Launchpad program (threads)
def test_export_of_a_launchpad_runs_checkpoint(scripted_id, tmp_path, capsys):
  """A Launchpad program's checkpoint (no in-process replay, the groups' policies written
  by the learner node) exports as a single-process one does."""
  from actorq.launch import distributed  # pylint: disable=g-import-not-at-top
  from actorq.testing.cli import run_cli  # pylint: disable=g-import-not-at-top
  config = ippo.IPPOConfig(rollout_length=5, batch_size=2, minibatch_size=5, num_epochs=1,
                           policy_hidden=(8,), value_hidden=(8,), share_parameters=False)
  experiment_config = experiment.ExperimentConfig(
      builder=ippo.IPPOBuilder(config), env_id=scripted_id, num_steps=40, eval_every=40,
      eval_episodes=1, seed=3, logdir=str(tmp_path), checkpoint_every=None)
  result = distributed.launch(distributed.make_program(experiment_config, num_actors=1),
                              "test_mt")
  assert (result.exit_code, result.reason) == (0, "finished"), result.detail
  _, saved = checkpointing.restore_latest(str(tmp_path / "checkpoints"))
  assert saved["multi_agent"] and saved.get("replay_state") is None
  spec_lib.RunSpec.from_config(experiment_config).save(str(tmp_path))  # as `actorq train`
  out_path = tmp_path / "deploy" / "team.tflite"
  code, out, err = run_cli(["export", "--checkpoint", str(tmp_path), "--precision", "fp32",
                            "--out", str(out_path), "--episodes", "1"], capsys)
  assert code == 0, err
  assert sorted(os.listdir(tmp_path / "deploy")) == [
      "team-a.json", "team-a.tflite", "team-b.json", "team-b.tflite", "team.json"]
  index = json.loads((tmp_path / "deploy" / "team.json").read_text())
  assert [(g["group"], g["agents"], g["model"]) for g in index["groups"]] == [
      ("a", ["a"], "team-a.tflite"), ("b", ["b"], "team-b.tflite")]
  assert index["source"]["checkpoint"].startswith(str(tmp_path / "checkpoints"))
  for name in ("a", "b"):
    meta = json.loads((tmp_path / "deploy" / f"team-{name}.json").read_text())
    assert meta["parity"]["greedy_action_agreement"] == 1.0  # fp32: the same greedy actions
    assert f"group {name} (agents {name}): {tmp_path / 'deploy' / f'team-{name}.tflite'}" in out


def test_group_exports_one_parameter_group_and_an_unknown_one_is_one_line(
    scripted_id, tmp_path, capsys):
  from actorq.testing.cli import run_cli  # pylint: disable=g-import-not-at-top
  run = _train(scripted_id, tmp_path / "run", False)
  export_dir = os.path.join(run, "export")
  code, out, err = run_cli(["export", "--checkpoint", run, "--group", "nope"], capsys)
  assert (code, out) == (2, "")
  assert err == ("actorq: error: --group 'nope' is not a parameter group of this run; "
                 "allowed: a, b\n")
  assert not os.path.exists(export_dir)
  code, out, err = run_cli(["export", "--checkpoint", run, "--group", "b", "--precision",
                            "fp32", "--episodes", "1"], capsys)
  assert code == 0, err
  assert sorted(os.listdir(export_dir)) == [
      "policy-fp32-b.json", "policy-fp32-b.tflite", "policy-fp32.json"]
  with open(os.path.join(export_dir, "policy-fp32.json"), encoding="utf-8") as f:
    assert [g["group"] for g in json.load(f)["groups"]] == ["b"]
  assert [l for l in out.splitlines() if l.startswith("group ")] == [
      l for l in out.splitlines() if l.startswith("group b (agents b): ")]
