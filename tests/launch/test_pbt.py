"""`actorq pbt` (issue 43): an exploit copies a member exactly, a run is a function of its
seed (identical pbt.csv), the best member's directory is one `actorq eval` reads, and bad
input is one line, exit 2, nothing written."""
import csv
import dataclasses
import json
import os
import signal
import sys

import jax
import numpy as np
import pytest

from actorq import core
from actorq import launch
from actorq.agents import population as population_agent
from actorq.components import fault_points
from actorq.components import population as population_lib
from actorq.components.acting import variable_client as vc
from actorq.components import checkpointing
from actorq.launch import pbt
from actorq.quantization import bias_correction
from actorq.testing.cli import run_cli

SMALL = {"hidden_sizes": [16], "min_replay_size": 50, "batch_size": 16,
         "samples_per_insert": 16.0, "target_update_period": 20}
SMALL_SET = [a for k, v in SMALL.items()
             for a in ("--set", f"{k}={v}".replace(" ", "").replace("'", ""))]


def _settings(**kw):
  base = dict(agent="dqn", env_id="gym:CartPole-v1", population=4, steps=150,
              ready_every=150, seed=3, eval_episodes=1, config=dict(SMALL))
  base.update(kw)
  return pbt.population_spec(**base)


def _ready_round(run, member_1_return):
  """One synchronous ready round of 4 members (case B20): returns 5, 9, 7 for members 0, 2,
  3 first (no copy yet: member 1 has not been evaluated in that round), then member 1's;
  member 1 (the bottom) copies member 2 (the top, the only one for quantile 0.25)."""
  before = jax.device_get(run.learner.state)
  run.rounds.record([0, 2, 3], np.array([5.0, 9.0, 7.0]))
  assert all(r["copied_from"] == "" for r in run.rows)
  for a, b in zip(jax.tree_util.tree_leaves(before), jax.tree_util.tree_leaves(run.learner.state)):
    np.testing.assert_array_equal(a, b)
  run.rounds.record([1], np.array([member_1_return]))
  assert [r["copied_from"] for r in run.rows[-4:]] == ["", "", "", 2]


def test_exploit_copies_parameters_optimizer_state_and_hyperparameters_exactly():
  settings = _settings(mutate=(), steps=1000, ready_every=1000)
  run = population_agent.PopulationRun(settings, pbt.check(settings))
  calls = iter(range(10**6))
  # ~150 vector steps: learning has moved every member's parameters and Adam state.
  assert not run.run(should_stop=lambda: next(calls) >= 150)
  assert 100 < min(run.actor_steps) and max(run.actor_steps) < 1000
  run.learner.values[2].update(learning_rate=3e-3, discount=0.95, actor_precision="int8")
  run.apply_values(2)
  before = jax.device_get(run.learner.state)
  hyper_before = run.learner.members.as_dicts(run.learner.hyper)
  assert not np.array_equal(before.params["dense_0"]["w"][1], before.params["dense_0"]["w"][2])
  _ready_round(run, member_1_return=0.5)  # member 2 is the top, member 1 the bottom
  after = jax.device_get(run.learner.state)
  for leaf_before, leaf_after in zip(jax.tree_util.tree_leaves(before),
                                     jax.tree_util.tree_leaves(after), strict=True):
    np.testing.assert_array_equal(leaf_after[1], leaf_before[2])  # params, target, Adam, steps
    for m in (0, 2, 3):
      np.testing.assert_array_equal(leaf_after[m], leaf_before[m])
  hyper_after = run.learner.members.as_dicts(run.learner.hyper)
  assert hyper_after[1] == hyper_before[2]
  assert hyper_after[1]["learning_rate"] == 3e-3 and hyper_after[1]["discount"] == 0.95
  assert [hyper_after[m] for m in (0, 2, 3)] == [hyper_before[m] for m in (0, 2, 3)]
  values = run.learner.values
  assert values[1] == values[2] and values[1]["actor_precision"] == "int8"
  assert run.actor.adders[1].discount == pytest.approx(0.95)
  row = run.rows[-1]
  assert (row["member"], row["episode_return"], row["copied_from"]) == (1, 0.5, 2)
  assert row["learning_rate"] == hyper_before[1]["learning_rate"]  # its interval's values


def test_int8_members_act_with_payloads_bias_corrected_on_their_own_replay_sample():
  """As a train run's int8 actors (issue 39): member m's int8 payload has its biases
  corrected on the observations of m's newest replay sample, which its checkpoint keeps."""
  settings = _settings(mutate=(), steps=1000, ready_every=1000)
  run = population_agent.PopulationRun(settings, pbt.check(settings))
  calls = iter(range(10**6))
  assert not run.run(should_stop=lambda: next(calls) >= 60)
  assert sorted(run.learner.calibration) == [0, 1, 2, 3]
  assert run.learner.calibration[1].shape == (SMALL["batch_size"], 4)
  run.learner.values[1]["actor_precision"] = "int8"
  run.apply_values(1)
  got = run.actor.load_runtime(1)._payload  # pylint: disable=protected-access
  params = jax.device_get(jax.tree_util.tree_map(lambda x: x[1], run.learner.state.params))
  plain = vc.make_payload(params, run.networks.spec, "int8",
                          int(np.asarray(run.learner.state.steps)[1]))
  want = bias_correction.correct_payload(plain, params, run.networks.spec,
                                         run.learner.calibration[1])
  for name in plain.layers:
    np.testing.assert_array_equal(got.layers[name]["w"], plain.layers[name]["w"])
    np.testing.assert_allclose(got.layers[name]["b"], want.layers[name]["b"], rtol=1e-6)
  assert not np.array_equal(got.layers["dense_0"]["b"], plain.layers["dense_0"]["b"])
  restored = population_agent.PopulationRun(settings, pbt.check(settings))
  restored.restore(run.checkpoint())
  np.testing.assert_array_equal(restored.learner.calibration[1], run.learner.calibration[1])


def test_the_vmapped_step_compiles_once_whichever_member_comes_first():
  """Each member's table decodes batches into its own namedtuple classes; the stacked
  batch keeps one structure, so the jitted step is traced and compiled once even when the
  first member owing a step changes (CartPole's episodes end at different steps, so the
  members start learning at different actor steps)."""
  settings = _settings(steps=300, ready_every=300)
  run = population_agent.PopulationRun(settings, pbt.check(settings))
  step, firsts, structures = run.learner.members.step, set(), set()

  def recorded(state, data, probabilities, sizes, hyper, active):
    firsts.add(int(np.flatnonzero(active)[0]))
    structures.add(jax.tree_util.tree_structure(data))
    return step(state, data, probabilities, sizes, hyper, active)
  run.learner.members.step = recorded
  run.run()
  assert len(firsts) > 1 and len(structures) == 1
  assert step._cache_size() == 1  # pylint: disable=protected-access


def test_exploit_then_explore_perturbs_only_the_named_fields():
  settings = _settings(mutate=("learning_rate",), resample_probability=0.0)
  run = population_agent.PopulationRun(settings, pbt.check(settings))
  _ready_round(run, member_1_return=0.5)  # member 2 is the top, member 1 the bottom
  top, member = run.learner.values[2], run.learner.values[1]
  assert member["learning_rate"] in (pytest.approx(top["learning_rate"] * 0.8, rel=1e-6),
                                     pytest.approx(top["learning_rate"] * 1.2, rel=1e-6))
  assert {k: v for k, v in member.items() if k != "learning_rate"} == {
      k: v for k, v in top.items() if k != "learning_rate"}
  hyper = run.learner.members.as_dicts(run.learner.hyper)
  assert hyper[1]["learning_rate"] == member["learning_rate"]


def _argv(logdir, seed="5"):
  return ["pbt", "--agent", "dqn", "--env", "gym:CartPole-v1", "--population", "3",
          "--steps", "300", "--ready-every", "100", "--mutate", "learning_rate,discount",
          "--seed", seed, "--eval-episodes", "1", "--logdir", str(logdir), *SMALL_SET]


def test_same_seed_writes_identical_pbt_csv_and_a_best_run_eval_reads(tmp_path, capsys):
  checksums = []
  for name in ("a", "b"):
    code, out, err = run_cli(_argv(tmp_path / name), capsys)
    assert code == 0, err
    assert out.splitlines()[0] == (
        f"actorq pbt: training 3 dqn members on gym:CartPole-v1, 300 actor steps each, ready "
        f"every 100 (seed 5, mutating learning_rate,discount); logs in {tmp_path / name}")
    checksums.append(out.splitlines()[-1].split("learner parameters ")[1])
  # The learner checksum printed is the population's final parameters (its checkpoint's).
  _, saved = checkpointing.restore_latest(str(tmp_path / "a" / pbt.POPULATION_DIR))
  assert checksums[0] == checksums[1] == checkpointing.params_checksum(saved["state"].params)
  first = (tmp_path / "a" / "pbt.csv").read_bytes()
  assert first == (tmp_path / "b" / "pbt.csv").read_bytes()
  with open(tmp_path / "a" / "pbt.csv", newline="") as f:
    rows = list(csv.DictReader(f))
  assert len(rows) == 3 * 3  # 3 members x 3 intervals
  assert sorted((int(r["member"]), int(r["actor_steps"])) for r in rows) == [
      (m, s) for m in range(3) for s in (100, 200, 300)]
  assert {r["precision"] for r in rows} == {"fp32"}
  assert os.path.isfile(tmp_path / "a" / "pbt_member0.csv")
  code, out, err = run_cli(["eval", "--checkpoint", str(tmp_path / "a" / "best"),
                            "--episodes", "1"], capsys)
  assert code == 0, err
  assert "returns:" in out


@pytest.mark.parametrize("extra,fragment", [
    (["--population", "1"], "--population 1: a population needs at least 2 members "
                            "(allowed: an integer >= 2)"),
    (["--ready-every", "400"], "--ready-every 400 is above --steps 300: each member must be "
                               "ready at least once (allowed: 1 to 300)"),
    (["--mutate", "learning_rat"], "--mutate learning_rat: not a field of dqn's config; "
                                   "mutable fields: learning_rate, discount"),
    (["--mutate", "batch_size"], "--mutate batch_size: a fixed field of dqn (the members share "
                                 "it); mutable fields: learning_rate"),
    (["--agent", "ppo"], "--agent ppo has no population support (no jitted population "
                         "learner); agents with it: dqn"),
    (["--env", "gym:Pendulum-v1"], "DQN needs discrete actions"),
])
def test_bad_input_is_one_line_exit_2_nothing_written(tmp_path, capsys, extra, fragment):
  logdir = tmp_path / "run"
  code, _, err = run_cli(_argv(logdir) + extra, capsys)
  assert code == 2
  assert fragment in err and err.count("\n") == 1, err
  assert not logdir.exists()


def _rows(path):
  with open(path, newline="") as f:
    return list(csv.DictReader(f))


def test_sigterm_checkpoints_the_population_and_resume_finishes_it(tmp_path, monkeypatch,
                                                                    capsys):
  logdir = tmp_path / "run"
  monkeypatch.setattr(fault_points, "_PLAN", {"acting": [(160, signal.SIGTERM)]})
  monkeypatch.setattr(fault_points, "_SEEN", {})
  code, _, err = run_cli(_argv(logdir), capsys)
  assert code == 128 + signal.SIGTERM and "stopped by signal" in err, err
  newest = checkpointing.list_checkpoints(str(logdir / pbt.POPULATION_DIR))[-1]
  assert (f"actorq: checkpoint saved ({os.path.basename(newest)}); continue with: actorq pbt "
          f"--resume {logdir}\n") in err  # the stop names its checkpoint (case B18)
  _, saved = checkpointing.restore_latest(str(logdir / pbt.POPULATION_DIR))
  assert 100 <= min(saved["actor_steps"]) and max(saved["actor_steps"]) < 300
  before = _rows(logdir / "pbt.csv")
  assert len(before) == 3 and not (logdir / "best").exists()  # the 100-step round only
  # The checkpoint restores exactly: a fresh run restored from it checkpoints the same.
  settings = pbt.load_settings(str(logdir))
  restored = population_agent.PopulationRun(settings, pbt.check(settings))
  restored.restore(saved)
  again = restored.checkpoint()
  for key in ("actor_steps", "learner_steps", "start_step", "next_ready", "values", "rows",
              "items_written", "act_rng", "pbt_rng", "rounds"):
    assert again[key] == saved[key], key
  for a, b in zip(jax.tree_util.tree_leaves(again["state"]),
                  jax.tree_util.tree_leaves(saved["state"]), strict=True):
    np.testing.assert_array_equal(a, b)
  code, _, err = run_cli(["pbt", "--resume", str(logdir), "--population", "3"], capsys)
  assert code == 2 and "drop --population" in err
  monkeypatch.setattr(fault_points, "_PLAN", {})
  code, out, err = run_cli(["pbt", "--resume", str(logdir)], capsys)
  assert code == 0, err
  after = _rows(logdir / "pbt.csv")
  assert after[:3] == before and len(after) == 9
  assert sorted((int(r["member"]), int(r["actor_steps"])) for r in after) == [
      (m, s) for m in range(3) for s in (100, 200, 300)]
  assert (logdir / "best" / "run.json").is_file() and (logdir / "lineage.png").is_file()


def test_an_int8_member_acts_through_its_int8_runtime_and_is_charged_its_cost():
  settings = _settings(population=2, mutate=("actor_precision",))
  run = population_agent.PopulationRun(settings, pbt.check(settings))
  run.learner.values[0]["actor_precision"] = "fp32"
  run.learner.values[1]["actor_precision"] = "int8"
  run.apply_values(0)
  run.apply_values(1)
  obs = np.random.default_rng(0).normal(size=(2, 8, 4)).astype(np.float32)
  costs = np.zeros(2)
  q = run.actor.values_of(range(2), obs, run.actor.runtime, costs)
  fp32 = run.learner.members.policy_values(run.learner.state.params, obs)
  np.testing.assert_array_equal(q[0], fp32[0])  # the batched fp32 inference, as is
  assert run.actor.runtimes[1][0] == "int8" and 0 not in run.actor.runtimes  # fp32: no runtime
  assert not np.array_equal(q[1], fp32[1])  # int8 weights and activations ...
  np.testing.assert_allclose(q[1], fp32[1], atol=0.05 * np.abs(fp32[1]).max())  # ... close
  assert (costs > 0).all()
  # The best member's run.json records the precision it acted with.
  assert run.learner.members.member_config(run.learner.values[1]).actor_precision == "int8"


# --- TD3 members (continuous actions) ------------------------------------------------------
TD3_SMALL = {"policy_hidden_sizes": [16], "critic_hidden_sizes": [16], "min_replay_size": 50,
             "batch_size": 16, "samples_per_insert": 16.0, "random_warmup_steps": 60}


def _td3_settings(**kw):
  base = dict(agent="td3", env_id="gym:Pendulum-v1", population=4, steps=1000,
              ready_every=1000, seed=3, eval_episodes=1, config=dict(TD3_SMALL))
  base.update(kw)
  return pbt.population_spec(**base)


def test_td3_exploit_copies_both_networks_targets_adam_states_and_hyperparameters_exactly():
  settings = _td3_settings()
  run = population_agent.PopulationRun(settings, pbt.check(settings))
  calls = iter(range(10**6))
  assert not run.run(should_stop=lambda: next(calls) >= 120)  # 60 warm-up, 60 noisy steps
  # One learner step per actor step once the 3-step adder's 50th item is in (actor step
  # 52): 120 - 52 = 68.
  assert run.actor_steps.tolist() == [120] * 4 and run.learner.learner_steps.tolist() == [68] * 4
  run.learner.values[2].update(policy_learning_rate=2e-3, discount=0.95, sigma=0.3,
                       actor_precision="int8")
  run.apply_values(2)
  before = jax.device_get(run.learner.state)
  hyper_before = run.learner.members.as_dicts(run.learner.hyper)
  w = jax.tree_util.tree_leaves(before.policy_params)[0]
  assert not np.array_equal(w[1], w[2])
  _ready_round(run, member_1_return=-900.0)  # member 2 is the top, member 1 the bottom
  after = jax.device_get(run.learner.state)
  for leaf_before, leaf_after in zip(jax.tree_util.tree_leaves(before),
                                     jax.tree_util.tree_leaves(after), strict=True):
    np.testing.assert_array_equal(leaf_after[1], leaf_before[2])  # nets, targets, Adams, steps
    for m in (0, 2, 3):
      np.testing.assert_array_equal(leaf_after[m], leaf_before[m])
  hyper_after = run.learner.members.as_dicts(run.learner.hyper)
  assert hyper_after[1] == hyper_before[2] and hyper_after[1]["sigma"] == 0.3
  assert [hyper_after[m] for m in (0, 2, 3)] == [hyper_before[m] for m in (0, 2, 3)]
  values = run.learner.values
  assert values[1] == values[2] and values[1]["actor_precision"] == "int8"
  assert run.actor.adders[1].discount == pytest.approx(0.95)
  assert run.rows[-1]["copied_from"] == 2
  # The int8 members act through their int8 runtimes on the deterministic policy: their
  # outputs are the fp32 ones up to int8 rounding, and the actions stay in the box.
  obs = np.random.default_rng(0).normal(size=(4, 1, 3)).astype(np.float32)
  u = run.actor.values_of(range(4), obs, run.actor.runtime)
  fp32 = run.learner.members.policy_values(run.learner.state.policy_params, obs)
  np.testing.assert_array_equal(u[[0, 3]], fp32[[0, 3]])
  assert run.actor.runtimes[1][0] == run.actor.runtimes[2][0] == "int8"
  np.testing.assert_allclose(u[[1, 2]], fp32[[1, 2]], atol=0.05)
  assert not run.run(should_stop=lambda: next(calls) >= 161)  # 40 more steps, int8 included
  assert run.actor_steps.tolist() == [160] * 4


def _td3_argv(logdir, seed="5"):
  return ["pbt", "--agent", "td3", "--env", "gym:Pendulum-v1", "--population", "2",
          "--steps", "200", "--ready-every", "100", "--mutate", "sigma,critic_learning_rate",
          "--seed", seed, "--eval-episodes", "1", "--logdir", str(logdir),
          *[a for k, v in TD3_SMALL.items()
            for a in ("--set", f"{k}={v}".replace(" ", ""))]]


def test_td3_same_seed_writes_identical_pbt_csv_and_a_best_run_eval_reads(tmp_path, capsys):
  for name in ("a", "b"):
    code, _, err = run_cli(_td3_argv(tmp_path / name), capsys)
    assert code == 0, err
  assert (tmp_path / "a" / "pbt.csv").read_bytes() == (tmp_path / "b" / "pbt.csv").read_bytes()
  rows = _rows(tmp_path / "a" / "pbt.csv")
  assert sorted((int(r["member"]), int(r["actor_steps"])) for r in rows) == [
      (m, s) for m in range(2) for s in (100, 200)]
  assert {"sigma", "critic_learning_rate", "target_noise_sigma"} <= set(rows[0])
  code, out, err = run_cli(["eval", "--checkpoint", str(tmp_path / "a" / "best"),
                            "--episodes", "1"], capsys)
  assert code == 0, err
  assert "returns:" in out


@pytest.mark.parametrize("extra,fragment", [
    (["--mutate", "learning_rate"],
     "--mutate learning_rate: not a field of td3's config; mutable fields: "
     "policy_learning_rate, critic_learning_rate, discount, target_noise_sigma, sigma, "
     "actor_precision"),
    (["--mutate", "policy_delay"], "--mutate policy_delay: a fixed field of td3 (the members "
                                   "share it); mutable fields: policy_learning_rate"),
    (["--env", "gym:CartPole-v1"], "--agent td3 --env gym:CartPole-v1: "),
])
def test_td3_bad_input_is_one_line_exit_2_nothing_written(tmp_path, capsys, extra, fragment):
  logdir = tmp_path / "run"
  code, _, err = run_cli(_td3_argv(logdir) + extra, capsys)
  assert code == 2
  assert fragment in err and err.count("\n") == 1, err
  assert not logdir.exists()


# --- SAC members (continuous actions, stochastic policy, learned temperature) ---------------
SAC_SMALL = {"policy_hidden_sizes": [16], "critic_hidden_sizes": [16], "min_replay_size": 50,
             "batch_size": 16, "samples_per_insert": 16.0, "random_warmup_steps": 60}


def test_sac_exploit_copies_networks_temperature_adam_states_and_hyperparameters_exactly():
  settings = pbt.population_spec(agent="sac", env_id="gym:Pendulum-v1", population=4, steps=1000,
                             ready_every=1000, seed=3, eval_episodes=1, config=dict(SAC_SMALL))
  run = population_agent.PopulationRun(settings, pbt.check(settings))
  calls = iter(range(10**6))
  assert not run.run(should_stop=lambda: next(calls) >= 120)  # 60 warm-up, 60 sampled steps
  # One learner step per actor step once the 1-step adder's 50th item is in (actor step
  # 50: each actor step completes one transition): 120 - 50 = 70.
  assert run.actor_steps.tolist() == [120] * 4 and run.learner.learner_steps.tolist() == [70] * 4
  run.learner.values[2].update(temperature_learning_rate=2e-3, discount=0.95,
                       target_entropy_per_dimension=-2.0, actor_precision="int8")
  run.apply_values(2)
  before = jax.device_get(run.learner.state)
  hyper_before = run.learner.members.as_dicts(run.learner.hyper)
  assert len(set(np.asarray(before.log_alpha).tolist())) == 4  # each member's own alpha
  _ready_round(run, member_1_return=-900.0)  # member 2 is the top, member 1 the bottom
  after = jax.device_get(run.learner.state)
  for leaf_before, leaf_after in zip(jax.tree_util.tree_leaves(before),
                                     jax.tree_util.tree_leaves(after), strict=True):
    # nets, target critic, log alpha, the three Adams, steps, sample key
    np.testing.assert_array_equal(leaf_after[1], leaf_before[2])
    for m in (0, 2, 3):
      np.testing.assert_array_equal(leaf_after[m], leaf_before[m])
  hyper_after = run.learner.members.as_dicts(run.learner.hyper)
  assert hyper_after[1] == hyper_before[2]
  assert hyper_after[1]["target_entropy_per_dimension"] == -2.0
  assert [hyper_after[m] for m in (0, 2, 3)] == [hyper_before[m] for m in (0, 2, 3)]
  values = run.learner.values
  assert values[1] == values[2] and values[1]["actor_precision"] == "int8"
  assert run.actor.adders[1].discount == pytest.approx(0.95)
  assert run.rows[-1]["copied_from"] == 2
  # The int8 members' runtimes give the Gaussian heads [mean, log_std] up to int8
  # rounding; the actions sampled from them stay in the box.
  obs = np.random.default_rng(0).normal(size=(4, 1, 3)).astype(np.float32)
  heads = run.actor.values_of(range(4), obs, run.actor.runtime)
  fp32 = run.learner.members.policy_values(run.learner.state.policy_params, obs)
  assert heads.shape == fp32.shape == (4, 1, 2)
  np.testing.assert_array_equal(heads[[0, 3]], fp32[[0, 3]])
  assert run.actor.runtimes[1][0] == run.actor.runtimes[2][0] == "int8"
  np.testing.assert_allclose(heads[[1, 2]], fp32[[1, 2]], atol=0.05)
  assert not run.run(should_stop=lambda: next(calls) >= 161)  # 40 more steps, int8 included
  assert run.actor_steps.tolist() == [160] * 4


def _sac_argv(logdir, seed="5"):
  return ["pbt", "--agent", "sac", "--env", "gym:Pendulum-v1", "--population", "2",
          "--steps", "200", "--ready-every", "100", "--mutate",
          "temperature_learning_rate,target_entropy_per_dimension,actor_precision",
          "--seed", seed, "--eval-episodes", "1", "--logdir", str(logdir),
          *[a for k, v in SAC_SMALL.items()
            for a in ("--set", f"{k}={v}".replace(" ", ""))]]


def test_sac_same_seed_writes_identical_pbt_csv_and_a_best_run_eval_reads(tmp_path, capsys):
  for name in ("a", "b"):
    code, _, err = run_cli(_sac_argv(tmp_path / name), capsys)
    assert code == 0, err
  assert (tmp_path / "a" / "pbt.csv").read_bytes() == (tmp_path / "b" / "pbt.csv").read_bytes()
  rows = _rows(tmp_path / "a" / "pbt.csv")
  assert sorted((int(r["member"]), int(r["actor_steps"])) for r in rows) == [
      (m, s) for m in range(2) for s in (100, 200)]
  assert {"temperature_learning_rate", "target_entropy_per_dimension", "discount",
          "precision"} <= set(rows[0])
  code, out, err = run_cli(["eval", "--checkpoint", str(tmp_path / "a" / "best"),
                            "--episodes", "1"], capsys)
  assert code == 0, err
  assert "returns:" in out


@pytest.mark.parametrize("extra,fragment", [
    (["--mutate", "sigma"],
     "--mutate sigma: not a field of sac's config; mutable fields: policy_learning_rate, "
     "critic_learning_rate, temperature_learning_rate, discount, "
     "target_entropy_per_dimension, actor_precision"),
    (["--mutate", "initial_temperature"], "--mutate initial_temperature: a fixed field of sac "
                                          "(the members share it); mutable fields: "),
    (["--env", "gym:CartPole-v1"], "--agent sac --env gym:CartPole-v1: "),
])
def test_sac_bad_input_is_one_line_exit_2_nothing_written(tmp_path, capsys, extra, fragment):
  logdir = tmp_path / "run"
  code, _, err = run_cli(_sac_argv(logdir) + extra, capsys)
  assert code == 2
  assert fragment in err and err.count("\n") == 1, err
  assert not logdir.exists()


def test_sac_population_checkpoint_restores_exactly(tmp_path):
  """A SAC population's checkpoint (log alphas, three Adam states, sample keys included)
  written to disk and restored into a fresh run checkpoints the same again."""
  settings = pbt.population_spec(agent="sac", env_id="gym:Pendulum-v1", population=2, steps=200,
                             ready_every=100, seed=4, eval_episodes=1, config=dict(SAC_SMALL))
  run = population_agent.PopulationRun(settings, pbt.check(settings))
  calls = iter(range(10**6))
  assert not run.run(should_stop=lambda: next(calls) >= 70)  # 20 learner steps each
  assert run.learner.learner_steps.tolist() == [20, 20]
  checkpointing.save(str(tmp_path), run.checkpoint(), step=70, keep=1)
  _, saved = checkpointing.restore_latest(str(tmp_path))
  restored = population_agent.PopulationRun(settings, pbt.check(settings))
  restored.restore(saved)
  assert isinstance(restored.learner.state, type(run.learner.state))
  again = restored.checkpoint()
  for key in ("actor_steps", "learner_steps", "values", "act_rng", "pbt_rng", "rounds"):
    assert again[key] == saved[key], key
  for a, b in zip(jax.tree_util.tree_leaves(again["state"]),
                  jax.tree_util.tree_leaves(jax.device_get(run.learner.state)), strict=True):
    np.testing.assert_array_equal(a, b)



def test_the_worst_member_evaluated_first_in_a_round_is_still_replaced():
  """Case B20: members reach a ready point at different vector steps (an episode's reset
  is no actor step). Ranked alone against the others' older returns, the worst member of
  a round, evaluated first, escaped (the others were not yet evaluated) and so did the
  rest: a population of 4 never exploited. In synchronous ready rounds the round's
  exploit waits for all 4 evaluations."""
  settings = _settings(mutate=())
  run = population_agent.PopulationRun(settings, pbt.check(settings))
  before = jax.device_get(run.learner.state)
  run.rounds.record([1], np.array([0.5]))  # member 1 first, and the worst of the round
  run.rounds.record([0, 2], np.array([5.0, 9.0]))
  assert [r["copied_from"] for r in run.rows] == ["", "", ""]
  run.rounds.record([3], np.array([7.0]))
  assert [(r["member"], r["copied_from"]) for r in run.rows] == [(1, 2), (0, ""), (2, ""),
                                                                 (3, "")]
  after = jax.device_get(run.learner.state)
  for a, b in zip(jax.tree_util.tree_leaves(before), jax.tree_util.tree_leaves(after)):
    np.testing.assert_array_equal(b[1], a[2])
  # Round 2: member 3 is the worst; members evaluated in any order.
  run.rounds.record([3, 2], np.array([1.0, 8.0]))
  run.rounds.record([1, 0], np.array([9.5, 4.0]))
  assert [(r["member"], r["copied_from"]) for r in run.rows[4:]] == [(3, 1), (2, ""), (1, ""),
                                                                     (0, "")]


def test_a_population_of_4_exploits_once_per_synchronous_ready_round():
  """A small real run (4 members, 2 rounds of 100 steps): the bottom member of round 1
  (quantile 0.25 of 4: one) copies the top one; none after the last round."""
  result = pbt.run(_settings(population=4, steps=200, ready_every=100, seed=0))
  rounds = {}
  for row in result.rows:
    rounds.setdefault(int(row["actor_steps"]), []).append(row)
  assert sorted(rounds) == [100, 200] and all(len(r) == 4 for r in rounds.values())
  for step, rows in sorted(rounds.items()):
    by_member = {r["member"]: r for r in rows}
    order = population_lib.ranking([by_member[m]["episode_return"] for m in range(4)])
    copies = [(r["member"], r["copied_from"]) for r in rows if r["copied_from"] != ""]
    assert copies == ([] if step == 200 else [(order[-1], order[0])]), (step, rows)


def test_b18_sigterm_at_start_up_leaves_a_directory_overwrite_starts_again(tmp_path, monkeypatch,
                                                                          capsys):
  """Case B18: a stop before the population's first checkpoint (here right after pbt.json
  is written) says there is nothing to resume and how to start again; `--resume` says the
  same in one line, and the same flags with --overwrite are accepted."""
  logdir = tmp_path / "run"
  argv = _argv(logdir)
  monkeypatch.setattr(fault_points, "_PLAN", {"startup": [(1, signal.SIGTERM)]})
  monkeypatch.setattr(fault_points, "_SEEN", {})
  code, _, err = run_cli(argv, capsys)
  assert code == 128 + signal.SIGTERM, err
  assert err == (f"actorq: stopped before the first checkpoint, nothing to resume; start again "
                 f"with the same flags and --overwrite (--logdir {logdir})\n"
                 "actorq: stopped by signal 15\n")
  code, _, err = run_cli(["pbt", "--resume", str(logdir)], capsys)
  assert code == 2 and err.count("\n") == 1 and "nothing to resume" in err, err
  code, _, err = run_cli(argv, capsys)
  assert code == 2 and "add --overwrite" in err and "actorq pbt --resume" in err, err
  monkeypatch.setattr(fault_points, "_SEEN", {})  # the same fault again, once the dir is taken
  code, _, err = run_cli(argv + ["--overwrite"], capsys)
  assert code == 128 + signal.SIGTERM and "nothing to resume" in err, err
  assert sorted(os.listdir(logdir)) == ["pbt.json"]


def test_b18_an_environment_that_raises_is_one_line_and_a_checkpoint_to_resume(
    tmp_path, monkeypatch, capsys):
  here = os.path.dirname(__file__)
  if here not in sys.path:
    sys.path.insert(0, here)
  import faulty_envs  # pylint: disable=import-outside-toplevel
  logdir = tmp_path / "run"
  argv = ["pbt", "--agent", "dqn", "--env", faulty_envs.ENV_ID, "--population", "2",
          "--steps", "200", "--ready-every", "100", "--seed", "1", "--eval-episodes", "1",
          "--logdir", str(logdir), *SMALL_SET]
  monkeypatch.setenv("ACTORQ_FAULT", "step:150")  # each instance's 150th step()
  code, _, err = run_cli(argv, capsys)
  assert code == 1 and err.count("\n") == 1, err
  newest = checkpointing.list_checkpoints(str(logdir / pbt.POPULATION_DIR))[-1]
  assert err.startswith(f"actorq: stopped: {faulty_envs.ENV_ID}: the environment's step() "
                        "raised RuntimeError: injected fault during training, at "), err
  assert err.endswith(f"; continue from the checkpoint ({os.path.basename(newest)}) with: "
                      f"actorq pbt --resume {logdir}\n"), err
  assert len(_rows(logdir / "pbt.csv")) == 2  # round 1 (100 steps) of both members
  monkeypatch.setenv("ACTORQ_FAULT", "")
  code, _, err = run_cli(["pbt", "--resume", str(logdir)], capsys)
  assert code == 0, err
  assert sorted((int(r["member"]), int(r["actor_steps"])) for r in _rows(logdir / "pbt.csv")) \
      == [(0, 100), (0, 200), (1, 100), (1, 200)]


def test_a_population_is_a_run_spec_built_into_a_population_builder(tmp_path):
  """Issue 52: the population's settings are the spec's `population` section; pbt.json is
  the spec (written by the engine: `RunSpec.save`), read back by --resume, as is a pbt.json
  of the settings' fields written before; the engine runs a population on the rows that
  say so (`populations`) and refuses another launch row before anything is written."""
  spec = pbt.population_spec("dqn", "gym:CartPole-v1", 3, 300, 100, mutate=("learning_rate",),
                             seed=5, eval_episodes=1, config=dict(SMALL),
                             logdir=str(tmp_path / "run"))
  config = spec.build()
  assert isinstance(config.builder, population_agent.PopulationBuilder)
  assert config.builder.config == population_agent.PopulationConfig(3, ("learning_rate",))
  assert config.builder.member.config.batch_size == SMALL["batch_size"]
  spec.save(str(tmp_path / "a"))
  assert sorted(os.listdir(tmp_path / "a")) == ["pbt.json"]
  loaded = pbt.load_settings(str(tmp_path / "a"))
  assert dataclasses.replace(loaded, logdir=spec.logdir) == spec
  (tmp_path / "old").mkdir()
  (tmp_path / "old" / "pbt.json").write_text(json.dumps({
      "agent": "dqn", "env_id": "gym:CartPole-v1", "population": 3, "steps": 300,
      "ready_every": 100, "mutate": ["learning_rate"], "seed": 5, "num_envs": 1,
      "eval_episodes": 1, "quantile": 0.25, "resample_probability": 0.25,
      "config": dict(SMALL), "max_episode_steps": 27000}))
  old = pbt.load_settings(str(tmp_path / "old"))
  assert old.to_json() == spec.to_json()
  with pytest.raises(core.UsageError, match=r"--launch anakin: a population does not run "
                                            r"there \(allowed: local, local_mt, local_mp\)"):
    launch.run(dataclasses.replace(spec, launch="anakin"))
  assert not (tmp_path / "run").exists()
