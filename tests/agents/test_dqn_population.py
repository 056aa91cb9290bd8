"""DQN's population learner (issue 43): the vmapped update of N members equals N separate
updates of the same members, a member with the config's hyperparameters follows
`DQNLearner` step for step, and an inactive member is left exactly as it was."""
import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from acme import specs
from acme import types as acme_types

from actorq.agents.dqn import builder as builder_lib
from actorq.agents.dqn import config as config_lib
from actorq.agents.dqn import learning
from actorq.agents.dqn import population as population_lib
from actorq.components import population as pop

OBS, ACTIONS, BATCH = 4, 2, 8
SPEC = specs.EnvironmentSpec(
    observations=specs.Array((OBS,), np.float32), actions=specs.DiscreteArray(ACTIONS),
    rewards=specs.Array((), np.float32), discounts=specs.BoundedArray((), np.float32, 0.0, 1.0))


def _population(**overrides):
  config = config_lib.DQNConfig(hidden_sizes=(16,), batch_size=BATCH, target_update_period=2,
                                learning_rate_decay_steps=4, **overrides)
  builder = builder_lib.DQNBuilder(config)
  return population_lib.DQNPopulation(config, builder.make_networks(SPEC), SPEC), builder


def _transitions(rng, *lead):
  shape = lead + (BATCH,)
  return acme_types.Transition(
      observation=rng.normal(size=shape + (OBS,)).astype(np.float32),
      action=rng.integers(ACTIONS, size=shape).astype(np.int32),
      reward=rng.normal(size=shape).astype(np.float32),
      discount=rng.choice([0.0, 0.98], size=shape).astype(np.float32),
      next_observation=rng.normal(size=shape + (OBS,)).astype(np.float32), extras=())


def _close(a, b, rtol=1e-5, atol=1e-6):
  for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b), strict=True):
    np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=rtol, atol=atol)


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
  separate = [pop.member(state, m) for m in range(n)]
  one = jax.jit(population.member_step)
  rng = np.random.default_rng(0)
  for step in range(5):  # past a target copy (period 2) and the lr decay's end (4 steps)
    data = _transitions(rng, n)
    probabilities = rng.uniform(0.01, 0.2, size=(n, BATCH)).astype(np.float32)
    size = np.full((n, BATCH), 50.0, np.float32)
    active = np.array([True, step % 2 == 0, True])
    state, td, _ = population.step(state, data, probabilities, size, hyper, active)
    for m in range(n):
      new, td_m, _ = one(separate[m], pop.member(data, m), probabilities[m], size[m],
                         pop.member(hyper, m), active[m])
      separate[m] = new
      np.testing.assert_allclose(np.asarray(td[m]), np.asarray(td_m), rtol=1e-5, atol=1e-6)
  for m in range(n):
    _close(pop.member(state, m), separate[m])
  # The members really differ (different hyperparameters and keys), and the inactive
  # rounds were skipped exactly: member 1 took 3 of the 5 steps.
  assert np.asarray(state.steps).tolist() == [5, 3, 5]
  assert not np.allclose(np.asarray(jax.tree_util.tree_leaves(state.params)[0][0]),
                         np.asarray(jax.tree_util.tree_leaves(state.params)[0][2]))


def test_inactive_member_is_unchanged_bit_for_bit():
  population, _ = _population()
  state = population.init(jax.random.split(jax.random.PRNGKey(1), 2))
  data = _transitions(np.random.default_rng(1), 2)
  ones = np.full((2, BATCH), 0.1, np.float32)
  new, td, _ = population.step(state, data, ones, ones * 100, population.hyperparameters(2),
                               np.array([False, True]))
  for before, after in zip(jax.tree_util.tree_leaves(pop.member(state, 0)),
                           jax.tree_util.tree_leaves(pop.member(new, 0))):
    np.testing.assert_array_equal(np.asarray(before), np.asarray(after))
  np.testing.assert_array_equal(np.asarray(td[0]), np.zeros(BATCH))
  assert int(new.steps[1]) == 1


def test_member_with_config_hyperparameters_follows_dqn_learner():
  """Uniform replay: the population member (same key, the config's values) and
  `DQNBuilder.make_learner`'s DQNLearner take the same 5 steps on the same batches."""
  population, builder = _population(prioritized_replay=False)
  rng = np.random.default_rng(3)
  batches = [_transitions(rng) for _ in range(5)]
  key = jax.random.PRNGKey(11)
  samples = iter([types.SimpleNamespace(data=b) for b in batches])
  learner = builder.make_learner(key, population.networks, samples,
                                 lambda label: None, SPEC)
  state = population.init(key[None])
  hyper = population.hyperparameters(1)
  ones = np.ones((1, BATCH), np.float32)
  for b in batches:
    learner.step()
    state, _, _ = population.step(state, jax.tree_util.tree_map(lambda x: x[None], b), ones,
                                  ones, hyper, np.array([True]))
  expected = learner.save()
  _close(pop.member(state.params, 0), expected.params)
  _close(pop.member(state.target_params, 0), expected.target_params)
  assert int(state.steps[0]) == int(expected.steps) == 5
