"""`actors.on_shared_schedule`: a distributed actor's exploration schedule counts the run's
summed actor steps (its own steps times the number of actors), epsilon decay and the
random warm-up alike."""
import numpy as np
import pytest
from dm_env import specs

from actorq.agents.dqn import builder as dqn_builder
from actorq.agents.dqn import config as dqn_config
from actorq.components.acting import actors
from actorq.components.acting import continuous
from actorq.launch import distributed
from actorq.launch import experiment


def _recording():
  seen = []

  def select(outputs, rng, step):
    seen.append(step)
    return np.int32(0), ()

  return select, seen


def test_the_step_is_the_actors_own_times_the_number_of_actors():
  select, seen = _recording()
  shared = actors.on_shared_schedule(select, 3)
  rng = np.random.default_rng(0)
  for step in (0, 1, 7, 1000):
    shared(np.zeros(2, np.float32), rng, step)
  assert seen == [0, 3, 21, 3000]
  assert actors.on_shared_schedule(select, 1) is select


@pytest.mark.parametrize("bad", [0, -2, 1.5, True, "2"])
def test_a_bad_number_of_actors_is_refused(bad):
  with pytest.raises(ValueError, match=f"num_actors must be an integer >= 1, got {bad!r}"):
    actors.on_shared_schedule(actors.greedy, bad)


def test_two_actors_reach_epsilon_end_at_half_their_own_decay_steps():
  """epsilon 1 -> 0 over 100 steps: one of two actors at its own step 50 acts as the
  single-process actor at step 100 (greedy: epsilon 0), at 25 as at 50 (epsilon 0.5)."""
  q = np.array([0.0, 1.0], np.float32)
  select = actors.on_shared_schedule(
      actors.epsilon_greedy(actors.linear_schedule(1.0, 0.0, 100)), 2)
  rng = np.random.default_rng(0)
  assert all(select(q, rng, 50)[0] == 1 for _ in range(200))  # always greedy
  random_share = np.mean([select(q, rng, 25)[0] == 0 for _ in range(4000)])
  assert random_share == pytest.approx(0.25, abs=0.03)  # epsilon 0.5, half of it action 0


def test_four_actors_share_a_random_warm_up():
  spec = specs.BoundedArray((1,), np.float32, -1.0, 1.0)
  policy_action = lambda outputs, rng, step: (np.full((1,), 0.5, np.float32), ())
  select = actors.on_shared_schedule(continuous.uniform_warmup(policy_action, spec, 1000), 4)
  rng = np.random.default_rng(0)
  assert select(np.zeros(1), rng, 249)[0][0] != 0.5  # 996 < 1000: still random
  assert select(np.zeros(1), rng, 250)[0][0] == 0.5  # 1000: the policy


def test_the_program_gives_every_actor_node_the_number_of_actors():
  config = experiment.ExperimentConfig(dqn_builder.DQNBuilder(dqn_config.DQNConfig()),
                                       "gym:CartPole-v1", num_steps=1_000)
  dp = distributed.make_program(config, num_actors=3)
  assert [node._kwargs["num_actors"] for node in dp.program.groups["actor"]] == [3, 3, 3]
