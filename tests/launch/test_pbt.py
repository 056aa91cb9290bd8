"""`actorq pbt` (issue 43): an exploit copies a member exactly, a run is a function of its
seed (identical pbt.csv), the best member's directory is one `actorq eval` reads, and bad
input is one line, exit 2, nothing written."""
import csv
import os

import jax
import numpy as np
import pytest

from actorq.components import population as pop
from actorq.launch import pbt
from actorq.testing.cli import run_cli

SMALL = {"hidden_sizes": [16], "min_replay_size": 50, "batch_size": 16,
         "samples_per_insert": 16.0, "target_update_period": 20}
SMALL_SET = [a for k, v in SMALL.items()
             for a in ("--set", f"{k}={v}".replace(" ", "").replace("'", ""))]


def _settings(**kw):
  base = dict(agent="dqn", env_id="gym:CartPole-v1", population=4, steps=150,
              ready_every=150, seed=3, eval_episodes=1, config=dict(SMALL))
  base.update(kw)
  return pbt.PBTSettings(**base)


def test_exploit_copies_parameters_optimizer_state_and_hyperparameters_exactly():
  settings = _settings(mutate=())
  run = pbt._Run(settings, pbt.check(settings))
  run.run()  # 150 steps each: learning has moved every member's parameters and Adam state
  run.hyper = run.learner.with_member(run.hyper, 2, {"learning_rate": 3e-3, "discount": 0.95})
  before = jax.device_get(run.state)
  hyper_before = run.learner.as_dicts(run.hyper)
  assert not np.array_equal(before.params["dense_0"]["w"][1], before.params["dense_0"]["w"][2])
  run.fitness[:] = [5.0, 1.0, 9.0, 7.0]  # member 2 is the top, member 1 the bottom
  run._ready([1], np.array([0.5]))
  after = jax.device_get(run.state)
  for leaf_before, leaf_after in zip(jax.tree_util.tree_leaves(before),
                                     jax.tree_util.tree_leaves(after), strict=True):
    np.testing.assert_array_equal(leaf_after[1], leaf_before[2])  # params, target, Adam, steps
    for m in (0, 2, 3):
      np.testing.assert_array_equal(leaf_after[m], leaf_before[m])
  hyper_after = run.learner.as_dicts(run.hyper)
  assert hyper_after[1] == hyper_before[2]
  assert hyper_after[1]["learning_rate"] == 3e-3 and hyper_after[1]["discount"] == 0.95
  assert [hyper_after[m] for m in (0, 2, 3)] == [hyper_before[m] for m in (0, 2, 3)]
  assert run.adders[1].discount == pytest.approx(0.95)
  row = run.rows[-1]
  assert (row["member"], row["episode_return"], row["copied_from"]) == (1, 0.5, 2)
  assert row["learning_rate"] == hyper_before[1]["learning_rate"]  # its interval's values


def test_exploit_then_explore_perturbs_only_the_named_fields():
  settings = _settings(mutate=("learning_rate",), resample_probability=0.0)
  run = pbt._Run(settings, pbt.check(settings))
  run.fitness[:] = [5.0, 1.0, 9.0, 7.0]
  run._ready([1], np.array([0.5]))
  top, member = run.learner.as_dicts(run.hyper)[2], run.learner.as_dicts(run.hyper)[1]
  assert member["learning_rate"] in (pytest.approx(top["learning_rate"] * 0.8),
                                     pytest.approx(top["learning_rate"] * 1.2))
  assert {k: v for k, v in member.items() if k != "learning_rate"} == {
      k: v for k, v in top.items() if k != "learning_rate"}


def _argv(logdir, seed="5"):
  return ["pbt", "--agent", "dqn", "--env", "gym:CartPole-v1", "--population", "3",
          "--steps", "300", "--ready-every", "100", "--mutate", "learning_rate,discount",
          "--seed", seed, "--eval-episodes", "1", "--logdir", str(logdir), *SMALL_SET]


def test_same_seed_writes_identical_pbt_csv_and_a_best_run_eval_reads(tmp_path, capsys):
  for name in ("a", "b"):
    code, out, err = run_cli(_argv(tmp_path / name), capsys)
    assert code == 0, err
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
