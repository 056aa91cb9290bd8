"""SAC's population learner (issue 43): the vmapped update of N members equals N separate
updates of the same members, a member with the config's hyperparameters follows the
builder's `SACLearner` step for step, an inactive member is left exactly as it was, and
the members' actions (warm-up, tanh-Gaussian samples, greedy) on hand-computed values."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from actorq.agents.sac import builder as builder_lib
from actorq.agents.sac import population as population_lib
from actorq.components import population as pop
from actorq.testing import population as poptest

OBS, ACT, BATCH = 3, 2, 8
SPEC = poptest.box_spec(OBS, ACT, -2.0, 2.0)


def _population(**overrides):
  return poptest.make_population(
      population_lib.SACPopulation, builder_lib.SACBuilder, SPEC,
      **{"policy_hidden_sizes": (16,), "critic_hidden_sizes": (16,), "batch_size": BATCH,
         **overrides})


def test_vmapped_update_equals_separate_member_updates():
  population, _ = _population()
  n = 3
  state = population.init(jax.random.split(jax.random.PRNGKey(7), n))
  hyper = population.hyperparameters(n)._replace(
      policy_learning_rate=jnp.array([1e-3, 3e-3, 1e-4], jnp.float32),
      critic_learning_rate=jnp.array([3e-4, 1e-3, 2e-3], jnp.float32),
      temperature_learning_rate=jnp.array([3e-4, 1e-2, 1e-3], jnp.float32),
      discount=jnp.array([0.99, 0.9, 0.95], jnp.float32),
      target_entropy_per_dimension=jnp.array([-1.0, 0.5, -2.0], jnp.float32))
  state, separate, rounds = poptest.step_population_and_members(
      population, state, hyper,
      poptest.alternating_inputs(np.random.default_rng(0), SPEC, BATCH, n, 5))
  assert len(rounds) == 5
  poptest.assert_rounds_match_members(rounds, metrics=population.LOSS_METRICS, rtol=1e-5,
                                      atol=1e-6)
  for r in rounds:
    np.testing.assert_array_equal(np.asarray(r.td), np.zeros((n, BATCH)))
  for m in range(n):
    poptest.assert_trees_close(pop.member(state, m), separate[m])
  # The members really differ, member 1 took 3 of the 5 steps, and the temperatures moved
  # apart (member 1's target entropy 2 * 0.5 nats is above the others').
  assert np.asarray(state.steps).tolist() == [5, 3, 5]
  w = jax.tree_util.tree_leaves(state.policy_params)[-1]
  assert not np.allclose(np.asarray(w[0]), np.asarray(w[2]))
  assert len(set(np.asarray(state.log_alpha).tolist())) == 3


def test_inactive_member_is_unchanged_bit_for_bit():
  population, _ = _population()
  state, new, _ = poptest.step_with_member_0_inactive(population, SPEC, BATCH)
  poptest.assert_trees_equal(pop.member(state, 0), pop.member(new, 0))
  assert np.asarray(new.steps).tolist() == [0, 1]


@pytest.mark.parametrize("overrides", [{}, {"target_update_tau": 1.0, "initial_temperature": 0.2,
                                            "target_entropy_per_dimension": -0.5}])
def test_member_with_config_hyperparameters_follows_sac_learner(overrides):
  """The population member (same key, the config's values) and `SACBuilder.make_learner`'s
  SACLearner take the same 6 steps on the same batches: policy, critic, target critic,
  log alpha, the three optimizer states (samples drawn from the same key) agree."""
  population, builder = _population(**overrides)
  rng = np.random.default_rng(3)
  batches = [poptest.transitions(rng, SPEC, BATCH) for _ in range(6)]
  learner, state = poptest.learner_and_member(population, builder, SPEC, batches,
                                              jax.random.PRNGKey(11))
  start = learner.save()
  for name in start._fields:
    poptest.assert_trees_close(pop.member(getattr(state, name), 0), getattr(start, name), 0, 0)
  state = poptest.step_learner_and_member(population, learner, state, batches)
  expected = learner.save()
  for name in expected._fields:
    poptest.assert_trees_close(pop.member(getattr(state, name), 0), getattr(expected, name))
  assert int(state.steps[0]) == int(expected.steps) == 6
  assert float(np.exp(state.log_alpha[0])) == pytest.approx(
      learner.get_variables(["temperature"])[0], rel=1e-5)


def test_select_actions_warmup_tanh_gaussian_and_greedy():
  """Box [-2, 2]. Heads [mean, log_std] = [[0.5, -1, log 0.5, 9]] for both members (the
  9 is clipped to LOG_STD_MAX = 2); member 0 at actor step 5 < warm-up 10 acts uniformly,
  member 1 (step 10) samples u = mean + std * eps and acts 2 * tanh(u)."""
  population, _ = _population(random_warmup_steps=10)
  head = np.array([0.5, -1.0, np.log(0.5), 9.0], np.float32)
  values = np.stack([head[None], head[None]])  # [N=2, B=1, 2A=4]
  got = population.select_actions(values, np.array([5, 10]), None, np.random.default_rng(4))
  draws = np.random.default_rng(4)
  eps = draws.standard_normal((2, 1, 2)).astype(np.float32)
  uniform = draws.uniform(-2.0, 2.0, (2, 1, 2)).astype(np.float32)
  np.testing.assert_array_equal(got[0], uniform[0])
  u = np.array([0.5, -1.0]) + np.array([0.5, np.exp(2.0)]) * eps[1, 0]
  np.testing.assert_allclose(got[1, 0], 2.0 * np.tanh(u), rtol=1e-5, atol=1e-6)
  greedy = population.select_actions(values, None, None, None, explore=False)
  want = np.float32(2.0) * np.tanh(np.array([0.5, -1.0], np.float32))
  np.testing.assert_allclose(greedy, np.stack([want[None], want[None]]), rtol=1e-6)
  assert got.dtype == greedy.dtype == np.float32 and got.shape == (2, 1, 2)


def test_member_config_and_refusals():
  population, _ = _population()
  config = population.member_config({"temperature_learning_rate": 1e-3,
                                     "target_entropy_per_dimension": -2.0,
                                     "actor_precision": "int8"})
  assert (config.temperature_learning_rate, config.target_entropy_per_dimension,
          config.actor_precision) == (1e-3, -2.0, "int8")
  assert config.critic_learning_rate == population.config.critic_learning_rate
  assert population.hyperparameters(2).target_entropy_per_dimension.tolist() == [-1.0, -1.0]
  with pytest.raises(ValueError, match="SACPopulation needs a SACConfig"):
    population_lib.SACPopulation(object(), population.networks, SPEC)
  with pytest.raises(ValueError, match="target_entropy_per_dimension"):
    population.member_config({"target_entropy_per_dimension": 0.7})
