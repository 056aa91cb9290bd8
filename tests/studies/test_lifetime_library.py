"""The lifetime policy library study (`studies.lifetime_library`, issue 55 item 3): the
UCB1 selection rule by hand, the settings' one-line refusals, the CLI's exit 2, and (slow)
a tiny compiled sequence whose numbers are consistent across the three methods."""
import json

import numpy as np
import pytest

from actorq import core
from actorq.cli.studies import lifetime_library as command_line
from actorq.studies import lifetime_library as ll


def test_untrained_policies_are_tried_first_in_index_order():
  observed = np.array([0.9, 0.2, 0.1])
  assert ll.select(observed, np.array([0, 0, 0]), 0, 0.1) == 0
  assert ll.select(observed, np.array([1, 0, 0]), 1, 0.1) == 1
  assert ll.select(observed, np.array([1, 1, 0]), 2, 0.1) == 2


def test_without_exploration_the_best_observed_return_is_selected():
  trained = np.array([3, 1, 2])
  assert ll.select(np.array([0.3, 0.95, 0.5]), trained, 6, 0.0) == 1
  assert ll.select(np.array([0.7, 0.7, 0.2]), trained, 6, 0.0) == 0  # tie: lowest index


def test_the_bonus_is_ucb1s_and_favours_the_less_trained_policy():
  trained = np.array([4, 1])
  scores = ll.ucb_scores(np.array([0.8, 0.7]), trained, 5, 0.2)
  expected = np.array([0.8, 0.7]) + 0.2 * np.sqrt(2 * np.log(6) / trained)
  np.testing.assert_allclose(scores, expected)
  assert ll.select(np.array([0.8, 0.7]), trained, 5, 0.2) == 1  # 0.7 + 0.38 > 0.8 + 0.19
  assert ll.select(np.array([0.8, 0.7]), trained, 5, 0.01) == 0


def test_task_physics_are_the_defaults_with_the_id_arguments():
  physics = ll.task_physics("gymnax:CartPole-v1?length=1.0&gravity=15")
  assert physics["length"] == 1.0 and physics["gravity"] == 15.0
  assert physics["masscart"] == 1.0 and "max_steps_in_episode" not in physics
  assert "total_mass" not in physics  # derived in the program


@pytest.mark.parametrize("settings, words", [
    (ll.LibrarySettings(tasks=("gymnax:CartPole-v1",)), "at least 2 tasks"),
    (ll.LibrarySettings(steps_per_task=1000, eval_every=300), "multiple of --eval-every"),
    (ll.LibrarySettings(capacity=0), "--capacity must be >= 1"),
    (ll.LibrarySettings(tasks=("gymnax:CartPole-v1", "gymnax:Acrobot-v1")),
     "variants of one gymnax task"),
    (ll.LibrarySettings(tasks=("gymnax:CartPole-v1", "gym:CartPole-v1?length=1")),
     "compiles gymnax tasks"),
])
def test_bad_settings_are_one_line_usage_errors(settings, words):
  with pytest.raises(core.UsageError, match=words) as e:
    ll.run(settings)
  assert "\n" not in str(e.value)


def test_cli_exits_2_naming_an_unknown_argument(tmp_path, capsys):
  rc = command_line.main(["--out", str(tmp_path), "--tasks",
                          "gymnax:CartPole-v1,gymnax:CartPole-v1?lenght=1"])
  assert rc == 2
  err = capsys.readouterr().err
  assert "unknown argument 'lenght'" in err and "length" in err
  assert not list(tmp_path.iterdir())  # nothing written


@pytest.mark.slow
def test_tiny_sequence_runs_every_method(tmp_path):
  out = tmp_path / "report"
  rc = command_line.main([
      "--out", str(out), "--seeds", "0-1", "--capacity", "2", "--steps-per-task", "1024",
      "--eval-every", "512", "--eval-episodes", "2", "--probe-episodes", "2", "--tasks",
      "gymnax:CartPole-v1,gymnax:CartPole-v1?length=1.0,gymnax:CartPole-v1?gravity=15"])
  assert rc == 0
  result = json.loads((out / "results.json").read_text())
  methods = result["methods"]
  assert set(methods) == {"library", "single", "scratch"}
  curves = {m: np.asarray(r["per_seed"]["curves"]) for m, r in methods.items()}
  assert curves["library"].shape == (2, 3, 3)  # seeds, tasks, evaluations at 0/512/1024
  # Task 1 is the same run in all three methods: one initialisation, policy 0 first.
  np.testing.assert_array_equal(curves["library"][:, 0], curves["single"][:, 0])
  np.testing.assert_array_equal(curves["library"][:, 0], curves["scratch"][:, 0])
  # The library tries each untrained policy first, then follows the rule on its probes.
  selected = np.asarray(methods["library"]["per_seed"]["selected"])
  np.testing.assert_array_equal(selected[:, :2], [[0, 1], [0, 1]])
  observed = np.asarray(methods["library"]["per_seed"]["observed"], np.float64)
  for seed in range(2):
    expect = ll.select(observed[seed, 2], np.array([1, 1]), 2, 0.1)
    assert selected[seed, 2] == expect
  # The sequence's mean return is the mean of the per-task end returns.
  end = curves["single"][:, :, -1]
  assert methods["single"]["mean_return"]["mean"] == pytest.approx(end.mean(), rel=1e-6)
  assert (out / "table.md").read_text().count("\n") > 5 and (out / "returns.png").exists()
