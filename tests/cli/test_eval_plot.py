"""`actorq eval` and `actorq plot` on a run produced by `actorq train`, and the
TensorBoard event files that run wrote beside its CSVs."""
import csv
import glob
import json
import os
import re

import numpy as np
import pytest

from actorq.cli import main as cli, plot as plot_cmd
from actorq.components.acting import loop as loop_lib
from actorq.components.envs import environments, seeding
from actorq.components import run_dir
from actorq.launch import spec as spec_lib
from actorq.studies import reward_parity as evaluation

SMALL = {"hidden_sizes": [32, 32], "batch_size": 32, "min_replay_size": 300,
         "samples_per_insert": 8.0, "epsilon_decay_steps": 1000}


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
  root = tmp_path_factory.mktemp("evalplot")
  config = root / "small.json"
  config.write_text(json.dumps(SMALL))
  logdir = str(root / "run")
  status = cli.main(["train", "--config", str(config), "--steps", "1500", "--seed", "1",
                     "--logdir", logdir, "--eval-every", "500", "--eval-episodes", "2",
                     "--no-progress"])
  assert status == 0
  return logdir


def _eval_rows(logdir):
  with open(os.path.join(logdir, "eval.csv")) as f:
    return list(csv.DictReader(f))


@pytest.mark.slow
def test_eval_prints_the_return_of_the_checkpointed_policy(trained, capsys):
  capsys.readouterr()
  assert cli.main(["eval", "--checkpoint", trained, "--episodes", "3", "--seed", "7"]) == 0
  out = capsys.readouterr().out
  m = re.search(r"episode return: mean (\S+), std (\S+),", out)
  lengths = re.search(r"episode length: mean (\S+), min (\d+), max (\d+) steps", out)
  assert m and lengths, out
  # The same policy evaluated directly on an identically seeded environment.
  spec, state, _ = spec_lib.load_run(trained)
  builder = spec.make_builder()
  env = environments.make_environment("gym:CartPole-v1", seed=7)
  spec = environments.environment_spec(env)
  networks = builder.make_networks(spec)
  policy = builder.make_policy(networks, spec, evaluation=True)
  actor = evaluation.fixed_policy_actor(state["policy_params"], networks.spec, "fp32",
                                        policy.selector, seed=7)
  expected = loop_lib.evaluate(env, actor, 3)
  assert float(m.group(1)) == pytest.approx(expected["episode_return"], abs=0.005)
  assert float(m.group(2)) == pytest.approx(expected["episode_return_std"], abs=0.005)
  assert float(lengths.group(1)) == pytest.approx(expected["episode_length"], abs=0.05)
  assert "learner step " + str(state["learner_steps"]) in out


@pytest.mark.slow
def test_eval_int8_and_capped_episodes(trained, capsys):
  capsys.readouterr()
  assert cli.main(["eval", "--checkpoint", trained, "--episodes", "2", "--precision", "int8",
                   "--max-episode-steps", "5"]) == 0
  out = capsys.readouterr().out
  assert "2 greedy episodes at int8" in out
  assert "episode length: mean 5.0, min 5, max 5 steps (capped at 5)" in out


@pytest.mark.slow
def test_eval_rejects_a_bad_video_suffix(trained, capsys):
  assert cli.main(["eval", "--checkpoint", trained, "--video", "x.avi"]) == 2
  assert "--video x.avi must end in .gif or .mp4" in capsys.readouterr().err


@pytest.mark.slow
def test_plot_overlays_runs_and_reports_their_curves(trained, tmp_path, capsys):
  # A second "run": the same CSV with an interrupted-and-resumed duplicate step.
  other = tmp_path / "resumed"
  other.mkdir()
  rows = _eval_rows(trained)
  with open(other / "eval.csv", "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=list(rows[0]))
    w.writeheader()
    w.writerows(rows)
    w.writeheader()  # a resumed run's appended header
    w.writerow(dict(rows[-1], episode_return="7.5"))  # the step evaluated again: it wins
  cols = run_dir.read_eval_columns(str(other))
  assert cols["actor_steps"] == [500.0, 1000.0, 1500.0]
  assert cols["episode_return"][-1] == 7.5
  out_png = str(tmp_path / "curves.png")
  capsys.readouterr()
  assert cli.main(["plot", trained, str(other), "--out", out_png, "--wall-time"]) == 0
  out = capsys.readouterr().out
  final = float(rows[-1]["episode_return"])
  assert f"3 evaluations to step 1500; final {final:.1f}" in out
  assert "final 7.5" in out
  from PIL import Image
  with Image.open(out_png) as im:
    assert im.size == (1408, 462)  # two panels of 6.4 x 4.2 in at 110 dpi
    assert len(np.unique(np.asarray(im.convert("L")))) > 10  # drawn, not blank


def test_plot_names_a_directory_without_eval_csv(tmp_path, capsys):
  assert cli.main(["plot", str(tmp_path)]) == 2
  assert "has no eval.csv" in capsys.readouterr().err


@pytest.mark.slow
def test_tensorboard_event_files_hold_the_csv_metrics(trained):
  import tensorflow as tf

  def scalars(label):
    out = {}
    for path in glob.glob(os.path.join(trained, "tensorboard", label, "events.out.tfevents.*")):
      for event in tf.compat.v1.train.summary_iterator(path):
        for v in event.summary.value:
          out.setdefault(v.tag, []).append((event.step, float(tf.make_ndarray(v.tensor))))
    return out

  ev = scalars("eval")
  rows = _eval_rows(trained)
  assert [s for s, _ in ev["episode_return"]] == [500, 1000, 1500]
  np.testing.assert_allclose([v for _, v in ev["episode_return"]],
                             [float(r["episode_return"]) for r in rows], rtol=1e-6)
  numeric = {k for k, v in rows[0].items() if re.fullmatch(r"-?[\d.eE+-]+", v)}
  assert numeric <= set(ev)  # every numeric CSV column, same name
  assert "actor_precision" not in ev
  train = scalars("train")
  assert {"episode_return", "episode_length", "episodes"} <= set(train)
  learner = scalars("learner")
  assert {"loss", "gradient_norm"} <= set(learner)
  assert all(np.isfinite(v) for _, v in learner["loss"])


@pytest.fixture(scope="module")
def trained_r2d2(tmp_path_factory):
  logdir = str(tmp_path_factory.mktemp("evalr2d2") / "run")
  status = cli.main(["train", "--agent", "r2d2", "--env", "gym:CartPole-v1-po", "--steps",
                     "1200", "--seed", "3", "--actor-precision", "int8", "--logdir", logdir,
                     "--eval-every", "600", "--eval-episodes", "3", "--no-progress",
                     "--set", "min_replay_size=20", "--set", "lstm_size=16",
                     "--set", "torso_sizes=[16]", "--set", "epsilon_decay_steps=500"])
  assert status == 0
  return logdir


def _printed_returns(out):
  m = re.search(r"^returns: (.+)$", out, re.M)
  assert m, out
  return [float(x) for x in m.group(1).split(", ")]


@pytest.mark.slow
def test_eval_runs_a_recurrent_policy_and_repeats_its_runs_final_evaluation(
    trained_r2d2, capsys):
  # The run's final evaluation: the same parameters (the checkpoint at its last step),
  # greedy, at its actor precision, on the environment seeded seed + EVAL_SEED_OFFSET,
  # the LSTM state zeroed at each episode's start; `actorq eval` must repeat it exactly.
  final = _eval_rows(trained_r2d2)[-1]
  assert final["actor_precision"] == "int8" and int(final["actor_steps"]) == 1200
  capsys.readouterr()
  seed = str(3 + seeding.EVAL_SEED_OFFSET)
  assert cli.main(["eval", "--checkpoint", trained_r2d2, "--episodes", "3", "--seed", seed,
                   "--precision", "int8"]) == 0
  out = capsys.readouterr().out
  assert "r2d2 on gym:CartPole-v1-po" in out and "3 greedy episodes at int8" in out
  returns = _printed_returns(out)
  assert len(returns) == 3
  assert float(np.mean(returns)) == pytest.approx(float(final["episode_return"]), abs=0.05)
  # fp32 runs the same parameters in the JAX runtime: the same number of episodes, and
  # every return a whole number of CartPole steps within its limit.
  assert cli.main(["eval", "--checkpoint", trained_r2d2, "--episodes", "3", "--seed", seed,
                   "--precision", "fp32"]) == 0
  fp32 = _printed_returns(capsys.readouterr().out)
  assert len(fp32) == 3 and all(1 <= r <= 500 and r == int(r) for r in fp32), fp32
