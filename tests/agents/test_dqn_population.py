"""DQN's population learner (issue 43): the vmapped update of N members equals N separate
updates of the same members, a member with the config's hyperparameters follows
`DQNLearner` step for step, and an inactive member is left exactly as it was."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from actorq.agents.dqn import builder as builder_lib
from actorq.agents.dqn import population as population_lib
from actorq.components import population as pop
from actorq.testing import population as poptest

OBS, ACTIONS, BATCH = 4, 2, 8
SPEC = poptest.discrete_spec(OBS, ACTIONS)


def _population(**overrides):
  return poptest.make_population(
      population_lib.DQNPopulation, builder_lib.DQNBuilder, SPEC, hidden_sizes=(16,),
      batch_size=BATCH, target_update_period=2, learning_rate_decay_steps=4, **overrides)


@pytest.mark.parametrize("prioritized", [True, False])
def test_vmapped_update_equals_separate_member_updates(prioritized):
  population, _ = _population(prioritized_replay=prioritized)
  n = 3
  state = population.init(jax.random.split(jax.random.PRNGKey(7), n))
  hyper = population.hyperparameters(n)
  hyper = hyper._replace(learning_rate=jnp.array([1e-3, 3e-3, 1e-4], jnp.float32),
                         discount=jnp.array([0.99, 0.9, 0.95], jnp.float32),
                         huber_delta=jnp.array([1.0, 0.5, 2.0], jnp.float32),
                         importance_sampling_exponent=jnp.array([0.4, 0.0, 1.0], jnp.float32))
  # 5 rounds: past a target copy (period 2) and the lr decay's end (4 steps); member 1
  # active on rounds 0, 2, 4.
  inputs = poptest.alternating_inputs(
      np.random.default_rng(0), SPEC, BATCH, n, 5, table_size=50.0,
      probabilities=lambda rng, shape: rng.uniform(0.01, 0.2, size=shape))
  state, separate, rounds = poptest.step_population_and_members(population, state, hyper,
                                                                inputs)
  assert len(rounds) == 5
  poptest.assert_rounds_match_members(rounds, td=True, rtol=1e-5, atol=1e-6)
  for m in range(n):
    poptest.assert_trees_close(pop.member(state, m), separate[m])
  # The members really differ (different hyperparameters and keys), and the inactive
  # rounds were skipped exactly: member 1 took 3 of the 5 steps.
  assert np.asarray(state.steps).tolist() == [5, 3, 5]
  assert not np.allclose(np.asarray(jax.tree_util.tree_leaves(state.params)[0][0]),
                         np.asarray(jax.tree_util.tree_leaves(state.params)[0][2]))


def test_inactive_member_is_unchanged_bit_for_bit():
  population, _ = _population()
  state, new, td = poptest.step_with_member_0_inactive(population, SPEC, BATCH,
                                                       probability=0.1, table_size=10.0)
  poptest.assert_trees_equal(pop.member(state, 0), pop.member(new, 0))
  np.testing.assert_array_equal(np.asarray(td[0]), np.zeros(BATCH))
  assert int(new.steps[1]) == 1


def test_member_with_config_hyperparameters_follows_dqn_learner():
  """Uniform replay: the population member (same key, the config's values) and
  `DQNBuilder.make_learner`'s DQNLearner take the same 5 steps on the same batches."""
  population, builder = _population(prioritized_replay=False)
  rng = np.random.default_rng(3)
  batches = [poptest.transitions(rng, SPEC, BATCH) for _ in range(5)]
  learner, state = poptest.learner_and_member(population, builder, SPEC, batches,
                                              jax.random.PRNGKey(11))
  state = poptest.step_learner_and_member(population, learner, state, batches)
  expected = learner.save()
  poptest.assert_trees_close(pop.member(state.params, 0), expected.params)
  poptest.assert_trees_close(pop.member(state.target_params, 0), expected.target_params)
  assert int(state.steps[0]) == int(expected.steps) == 5


def test_a_td_operator_other_than_q_learning_is_refused_not_ignored():
  with pytest.raises(ValueError, match="td_operator='munchausen': the population learner "
                                       "trains with q_learning only"):
    _population(td_operator="munchausen")
