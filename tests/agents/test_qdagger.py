"""QDagger (agents/qdagger, issue 55): the distillation loss and weight against hand-computed
values, the offline phase moving the student's greedy actions to the teacher's, and a
student run with int8 actors from a teacher run directory."""
import csv
import math
import os

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from actorq.agents import qdagger
from actorq.cli import main as cli
from actorq.components.envs import environments
from actorq.components.replay import local_replay, reverb_replay
from actorq.components import run_dir
from actorq.components import checkpointing

TEACHER = ["--set", "hidden_sizes=[32,32]", "--set", "batch_size=16", "--set",
           "min_replay_size=100", "--set", "samples_per_insert=8.0", "--set",
           "epsilon_decay_steps=300", "--eval-episodes", "2", "--no-progress"]


def test_distillation_loss_hand_computed():
  # teacher softmax([0, ln 3]) = [1/4, 3/4]; student softmax([0, 0]) = [1/2, 1/2]:
  # L = -(1/4 ln 1/2 + 3/4 ln 1/2) = ln 2.
  q_teacher = jnp.array([[0.0, math.log(3.0)]])
  assert qdagger.distillation_loss(jnp.zeros((1, 2)), q_teacher) == pytest.approx(math.log(2.0))
  # student softmax([ln 3, 0]) = [3/4, 1/4]: L = -(1/4 ln 3/4 + 3/4 ln 1/4) = 1.1116...
  expected = -(0.25 * math.log(0.75) + 0.75 * math.log(0.25))
  assert qdagger.distillation_loss(jnp.array([[math.log(3.0), 0.0]]), q_teacher) == \
      pytest.approx(expected, rel=1e-6)
  # The mean over the batch; tau = 2 on doubled Q-values is tau = 1 on the values.
  batch = qdagger.distillation_loss(jnp.array([[0.0, 0.0], [2 * math.log(3.0), 0.0]]),
                                    jnp.array([[0.0, 2 * math.log(3.0)]] * 2), temperature=2.0)
  assert batch == pytest.approx((math.log(2.0) + expected) / 2, rel=1e-6)
  # No gradient reaches the teacher; the student's is softmax(student) - softmax(teacher).
  g_student, g_teacher = jax.grad(qdagger.distillation_loss, argnums=(0, 1))(
      jnp.zeros((1, 2)), q_teacher)
  np.testing.assert_allclose(g_teacher, 0.0)
  np.testing.assert_allclose(g_student, [[0.5 - 0.25, 0.5 - 0.75]], atol=1e-6)
  with pytest.raises(AssertionError):
    qdagger.distillation_loss(jnp.zeros((2,)), jnp.zeros((2,)))
  with pytest.raises(AssertionError):
    qdagger.distillation_loss(jnp.zeros((1, 2)), jnp.zeros((1, 3)))
  chex.assert_shape(qdagger.distillation_loss(jnp.zeros((4, 3)), jnp.ones((4, 3))), ())


def test_distillation_coefficient():
  assert qdagger.distillation_coefficient(0.0, 500.0) == 1.0
  assert qdagger.distillation_coefficient(125.0, 500.0) == 0.75
  assert qdagger.distillation_coefficient(500.0, 500.0) == 0.0
  assert qdagger.distillation_coefficient(600.0, 500.0) == 0.0
  assert qdagger.distillation_coefficient(-50.0, 100.0) == 1.5  # max(1 - s/t, 0), as written
  with pytest.raises(ValueError, match="teacher_return must be > 0, got 0"):
    qdagger.distillation_coefficient(1.0, 0.0)


@pytest.fixture(scope="module")
def teacher(tmp_path_factory):
  run = str(tmp_path_factory.mktemp("qdagger") / "teacher")
  assert cli.main(["train"] + TEACHER + ["--steps", "1500", "--eval-every", "1500",
                                         "--seed", "0", "--logdir", run]) == 0
  return run


def _env_spec():
  env = environments.make_environment("gym:CartPole-v1", seed=0)
  try:
    return environments.environment_spec(env)
  finally:
    env.close()


TAU = 0.1  # the short teacher's Q-values are close: a sharp softmax makes its policy visible


def test_the_offline_phase_moves_the_students_greedy_actions_to_the_teachers(teacher):
  spec = _env_spec()
  t = qdagger.load_teacher(teacher, spec)
  assert t.env_id == "gym:CartPole-v1" and t.config.hidden_sizes == (32, 32)
  assert t.final_return == run_dir.read_eval_columns(teacher)["episode_return"][-1]
  config = qdagger.QDaggerConfig(teacher=teacher, hidden_sizes=(8, 8), offline_steps=300,
                                 teacher_return=1e6, temperature=TAU, batch_size=32, prioritized_replay=False)
  builder = qdagger.QDaggerBuilder(config)
  networks = builder.make_networks(spec)
  learner = builder.make_learner(jax.random.PRNGKey(1), networks, iter(()),
                                 lambda label: None, spec)
  client = local_replay.LocalReplayClient(
      qdagger.QDaggerBuilder(t.config).make_replay_tables(spec), seed=3)
  client.restore(t.replay_state)  # the teacher's replay: what the offline phase trains on
  obs = next(reverb_replay.make_iterator(client, "priority_table", 500)).data.observation
  q_teacher = t.network.apply(t.params, obs)

  def kl():  # KL(teacher || student) of the softmax policies = CE - H(teacher)
    q_student = networks.network.apply(learner.get_variables(["policy"])[0], obs)
    return float(qdagger.distillation_loss(q_student, q_teacher, TAU)
                 - qdagger.distillation_loss(q_teacher, q_teacher, TAU))

  before = kl()
  learner._offline_phase()  # pylint: disable=protected-access
  after = kl()
  assert learner.step_count == 0  # the offline updates are not the run's learner steps
  assert learner.coefficient == pytest.approx(1.0, abs=1e-3)  # teacher_return 1e6
  assert after < 0.2 * before, (before, after)


def test_a_student_run_with_int8_actors(teacher, tmp_path):
  run = str(tmp_path / "student")
  assert cli.main(["train", "--agent", "qdagger", "--set", f"teacher={teacher}",
                   "--set", "hidden_sizes=[8,8]", "--actor-precision", "int8",
                   "--set", "offline_steps=50", "--set", "coefficient_every=20",
                   "--set", "min_replay_size=100", "--set", "batch_size=16",
                   "--set", "samples_per_insert=8.0", "--steps", "300", "--eval-every", "300",
                   "--eval-episodes", "1", "--no-progress", "--logdir", run]) == 0
  evals = run_dir.read_evaluations(run)
  assert evals[-1]["actor_precision"] == "int8"
  state = checkpointing.load(checkpointing.list_checkpoints(os.path.join(run, "checkpoints"))[-1])
  assert np.shape(state["policy_params"]["dense_0"]["w"]) == (4, 8)
  with open(os.path.join(run, "learner.csv"), newline="", encoding="utf-8") as f:
    learner = list(csv.DictReader(f))
  coefficients = [float(r["distillation_coefficient"]) for r in learner]
  assert coefficients and all(0.0 <= c <= 1.0 for c in coefficients)
  assert all(float(r["distillation_loss"]) > 0 for r in learner)


def test_a_missing_teacher_is_refused_in_one_line(capsys, tmp_path):
  assert cli.main(["train", "--agent", "qdagger", "--logdir", str(tmp_path / "x")]) == 2
  assert capsys.readouterr().err == (
      "actorq: error: agent 'qdagger' cannot run on gym:CartPole-v1: qdagger needs a "
      "teacher: --set teacher=RUN_DIR (a dqn run of this environment)\n")
  assert not (tmp_path / "x").exists()
