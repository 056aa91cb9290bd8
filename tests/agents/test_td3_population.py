"""TD3's population learner (issue 43): the vmapped update of N members equals N separate
updates of the same members, a member with the config's hyperparameters follows the
builder's `DPGLearner` step for step, an inactive member is left exactly as it was, and
the members' actions (warm-up, per-member Gaussian noise, greedy) on hand-computed values."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from actorq.agents.td3 import builder as builder_lib
from actorq.agents.td3 import population as population_lib
from actorq.components import population as pop
from actorq.testing import population as poptest

OBS, ACT, BATCH = 3, 2, 8
SPEC = poptest.box_spec(OBS, ACT, -2.0, 2.0)


def _population(**overrides):
  return poptest.make_population(
      population_lib.TD3Population, builder_lib.TD3Builder, SPEC,
      **{"policy_hidden_sizes": (16,), "critic_hidden_sizes": (16,), "batch_size": BATCH,
         **overrides})


def test_vmapped_update_equals_separate_member_updates():
  population, _ = _population()
  n = 3
  state = population.init(jax.random.split(jax.random.PRNGKey(7), n))
  hyper = population.hyperparameters(n)._replace(
      policy_learning_rate=jnp.array([1e-3, 3e-3, 1e-4], jnp.float32),
      critic_learning_rate=jnp.array([3e-4, 1e-3, 2e-3], jnp.float32),
      discount=jnp.array([0.99, 0.9, 0.95], jnp.float32),
      target_noise_sigma=jnp.array([0.2, 0.0, 0.5], jnp.float32))
  # 5 rounds (member 1 active on rounds 0, 2, 4): past the delayed policy and target
  # updates (every 2 steps).
  state, separate, rounds = poptest.step_population_and_members(
      population, state, hyper,
      poptest.alternating_inputs(np.random.default_rng(0), SPEC, BATCH, n, 5))
  assert len(rounds) == 5
  poptest.assert_rounds_match_members(rounds, metrics=("critic_loss",), rtol=1e-5)
  for r in rounds:
    np.testing.assert_array_equal(np.asarray(r.td), np.zeros((n, BATCH)))
  for m in range(n):
    poptest.assert_trees_close(pop.member(state, m), separate[m])
  # The members really differ, and member 1 took 3 of the 5 steps.
  assert np.asarray(state.steps).tolist() == [5, 3, 5]
  w = jax.tree_util.tree_leaves(state.policy_params)[-1]
  assert not np.allclose(np.asarray(w[0]), np.asarray(w[2]))


def test_inactive_member_is_unchanged_bit_for_bit():
  population, _ = _population()
  state, new, _ = poptest.step_with_member_0_inactive(population, SPEC, BATCH)
  poptest.assert_trees_equal(pop.member(state, 0), pop.member(new, 0))
  assert np.asarray(new.steps).tolist() == [0, 1]


@pytest.mark.parametrize("tau", [0.005, 1.0])
def test_member_with_config_hyperparameters_follows_td3_learner(tau):
  """The population member (same key, the config's values) and `TD3Builder.make_learner`'s
  DPGLearner take the same 6 steps on the same batches: both networks, both targets,
  Adam states and the smoothing noise (drawn from the same key) agree."""
  population, builder = _population(target_update_tau=tau)
  rng = np.random.default_rng(3)
  batches = [poptest.transitions(rng, SPEC, BATCH) for _ in range(6)]
  learner, state = poptest.learner_and_member(population, builder, SPEC, batches,
                                              jax.random.PRNGKey(11))
  poptest.assert_trees_close(pop.member(state.policy_params, 0),
                             learner.get_variables(["policy"])[0], 0, 0)
  state = poptest.step_learner_and_member(population, learner, state, batches)
  expected = learner.save()
  for name in ("policy_params", "critic_params", "target_policy_params",
               "target_critic_params", "policy_opt_state", "critic_opt_state"):
    poptest.assert_trees_close(pop.member(getattr(state, name), 0), getattr(expected, name))
  assert int(state.steps[0]) == int(expected.steps) == 6


def test_select_actions_warmup_noise_per_member_and_greedy():
  """Box [-2, 2] (half range 2). u = [[0.5, -1]] for both members; member 0 at actor step
  5 < warm-up 10 acts uniformly, member 1 (step 10) with its sigma 0.25."""
  population, _ = _population(random_warmup_steps=10)
  u = np.array([[[0.5, -1.0]], [[0.5, -1.0]]], np.float32)  # [N=2, B=1, A=2]
  hyper = population.hyperparameters(2)._replace(sigma=jnp.array([0.1, 0.25], jnp.float32))
  got = population.select_actions(u, np.array([5, 10]), hyper, np.random.default_rng(4))
  draws = np.random.default_rng(4)
  eps = draws.standard_normal((2, 1, 2)).astype(np.float32)
  uniform = draws.uniform(-2.0, 2.0, (2, 1, 2)).astype(np.float32)
  np.testing.assert_array_equal(got[0], uniform[0])
  # from_unit: [0.5, -1] -> [1, -2]; noise 0.25 * 2 * eps; clipped to [-2, 2].
  want = np.clip(np.array([1.0, -2.0]) + 0.5 * eps[1, 0], -2.0, 2.0)
  np.testing.assert_allclose(got[1, 0], want, rtol=1e-6)
  greedy = population.select_actions(u, None, None, None, explore=False)
  np.testing.assert_array_equal(greedy, np.array([[[1.0, -2.0]], [[1.0, -2.0]]], np.float32))
  assert got.dtype == greedy.dtype == np.float32


def test_member_config_and_refusals():
  population, _ = _population()
  config = population.member_config({"policy_learning_rate": 1e-3, "sigma": 0.2,
                                     "actor_precision": "int8"})
  assert (config.policy_learning_rate, config.sigma, config.actor_precision) == (
      1e-3, 0.2, "int8")
  assert config.critic_learning_rate == population.config.critic_learning_rate
  with pytest.raises(ValueError, match="TD3Population needs a TD3Config"):
    population_lib.TD3Population(object(), population.networks, SPEC)
