"""Actors acting with a per-layer precision policy (issue 17): `actorq train
--actor-precision precision_policy.json` (or ``mixed:<choice>,...``), single-process and
distributed, and `actorq eval --precision` of the same policy."""
import csv
import json

import pytest

from actorq.agents.dqn import builder as dqn_builder
from actorq.agents.dqn import config as dqn_config
from actorq.launch import distributed
from actorq.launch import experiment
from actorq.quantization import mixed
from actorq.quantization import network_spec as ns
from actorq.testing.cli import run_cli

pytestmark = pytest.mark.slow  # training runs

NAME = "mixed:fp16,int4+p0.5"
# DQN (dueling) on CartPole with hidden_sizes [32]: obs [4] -> 32 -> [V, A_1, A_2].
SPEC = ns.mlp(4, [32], 3)


def _rows(path):
  with open(path, encoding="utf-8") as f:
    return list(csv.DictReader(f))


def _policy_file(path, spec=SPEC):
  policy = mixed.policy_of(NAME, spec)
  mixed.save(str(path), policy, spec, search={"method": "by hand, for the test"})
  return str(path)


def test_train_and_eval_with_a_precision_policy_file(capsys, tmp_path):
  policy = _policy_file(tmp_path / "precision_policy.json")
  run = tmp_path / "run"
  code, out, err = run_cli(
      ["train", "--steps", "1200", "--eval-every", "600", "--eval-episodes", "2", "--seed", "3",
       "--set", "hidden_sizes=[32]", "--set", "min_replay_size=200", "--logdir", str(run),
       "--no-progress", "--actor-precision", policy], capsys)
  assert code == 0, err
  assert f"actors {NAME}" in out
  info = json.loads((run / "run.json").read_text())
  assert info["config"]["actor_precision"] == NAME  # a resumed run needs no file
  evals = _rows(run / "eval.csv")
  assert [int(r["actor_steps"]) for r in evals] == [600, 1200]
  assert {r["actor_precision"] for r in evals} == {NAME}
  assert int(evals[-1]["policy_version"]) > 0
  # What was pulled is the policy's payload: dense_0 (fp16 values) as float32 4x32 + 32,
  # dense_1 as int8 32x3 with 3 scales and 3 float32 biases.
  assert int(evals[-1]["payload_bytes"]) == (4 * 32 + 32) * 4 + 32 * 3 + 3 * 4 + 3 * 4
  # The evaluator acted at the policy too (evaluation_precision None: the actors').
  code, by_file, err = run_cli(["eval", "--checkpoint", str(run), "--episodes", "2",
                                "--precision", policy], capsys)
  assert code == 0, err
  assert f"greedy episodes at {NAME}" in by_file
  code, by_name, err = run_cli(["eval", "--checkpoint", str(run), "--episodes", "2",
                                "--precision", NAME], capsys)
  assert code == 0, err
  assert by_name.splitlines()[1:] == by_file.splitlines()[1:]  # the same returns


def test_a_policy_file_for_another_network_is_refused(capsys, tmp_path):
  """Same layer count, other shapes: the file's w_shape says it was made for another
  network; exit 2, one line, nothing written."""
  policy = _policy_file(tmp_path / "p.json", ns.mlp(4, [64], 3))
  run = tmp_path / "run"
  code, _, err = run_cli(["train", "--set", "hidden_sizes=[32]", "--actor-precision", policy,
                          "--logdir", str(run)], capsys)
  assert code == 2
  assert "precision policy layer 'dense_0': w_shape [4, 64] does not match the network's [4, 32]" \
      in err and err.strip().count("\n") == 0
  assert not run.exists()


@pytest.mark.isolated  # Launchpad nodes as threads of the test process: run in a child
def test_distributed_actors_pull_the_policy_by_name(tmp_path):
  """Launchpad (test_mt): two actors and the evaluator act with the per-layer policy
  the learner node publishes under its name."""
  config = dqn_config.DQNConfig(hidden_sizes=(32,), min_replay_size=100,
                                variable_update_period=5)
  exp = experiment.ExperimentConfig(dqn_builder.DQNBuilder(config), "gym:CartPole-v1",
                                    num_steps=1_000, logdir=str(tmp_path), eval_every=500,
                                    eval_episodes=1, actor_precision=NAME)
  result = distributed.launch(distributed.make_program(exp, num_actors=2), "test_mt")
  assert (result.exit_code, result.reason) == (0, "finished")
  for i in range(2):
    rows = _rows(tmp_path / f"actor_{i}.csv")
    assert rows and {r["actor_precision"] for r in rows} == {NAME}
    assert max(int(r["policy_version"]) for r in rows) > 0
  assert result.evaluations and result.evaluations[-1]["actor_precision"] == NAME
