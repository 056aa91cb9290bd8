"""The in-graph replay (`ring_buffer`): n-step transitions as Acme's adder writes them,
episode ends respected, uniform and prioritized sampling probabilities, seeded."""
import jax
import jax.numpy as jnp
import numpy as np

from actorq.components.replay import ring_buffer as rb


def _step(t, last=False, discount=1.0):
  return {"observation": jnp.full((1, 2), float(t)), "action": jnp.array([t % 2]),
          "reward": jnp.array([float(t)]), "discount": jnp.array([discount]),
          "next_observation": jnp.full((1, 2), float(t + 1)), "last": jnp.array([last])}


def _buffer(capacity, steps, lookahead):
  buf = rb.init(jax.tree_util.tree_map(lambda x: x[0], _step(0)), capacity, 1)
  for t, (last, d) in enumerate(steps):
    buf = rb.add(buf, _step(t, last, d), lookahead)
  return buf


def test_nstep_transitions_stop_at_the_episode_end():
  gamma = 0.9
  # Steps 0..5; the episode terminates at step 2 (discount 0), truncates at step 4.
  steps = [(False, 1.0), (False, 1.0), (True, 0.0), (False, 1.0), (True, 1.0), (False, 1.0)]
  buf = _buffer(8, steps, lookahead=2)
  tr = rb.nstep_transitions(buf, jnp.array([0, 1, 2, 3]), jnp.zeros(4, jnp.int32), 3, gamma)
  np.testing.assert_allclose(tr.reward, [0 + gamma * 1 + gamma**2 * 2, 1 + gamma * 2, 2,
                                         3 + gamma * 4], rtol=1e-6)
  # discount = gamma^(m-1) prod d: a termination zeroes it, a truncation keeps it.
  np.testing.assert_allclose(tr.discount, [0.0, 0.0, 0.0, gamma], rtol=1e-6)
  np.testing.assert_array_equal(tr.next_observation[:, 0], [3, 3, 3, 5])
  np.testing.assert_array_equal(tr.observation[:, 0], [0, 1, 2, 3])


def test_sampling_respects_the_lookahead_and_priorities():
  buf = _buffer(4, [(False, 1.0)] * 6, lookahead=1)  # wrapped: rows hold steps 2..5
  assert int(rb.size(buf)) == 4
  # Sampleable: steps 2, 3, 4 (step 5 waits for its next step).
  rows, envs, prob = rb.sample_uniform(buf, jax.random.PRNGKey(0), 500, lookahead=1)
  steps = np.asarray(buf.items["observation"][rows, envs, 0])
  assert set(steps.tolist()) == {2.0, 3.0, 4.0}
  np.testing.assert_allclose(prob, 1 / 3)
  rows, envs, prob = rb.sample_prioritized(buf, jax.random.PRNGKey(0), 500)
  assert set(np.asarray(buf.items["observation"][rows, envs, 0]).tolist()) == {2.0, 3.0, 4.0}
  # Priorities p^alpha: the slot of step 4 gets p = 9, alpha = 0.5 -> weight 3 of 5.
  row4 = int(np.where(np.asarray(buf.items["observation"][:, 0, 0]) == 4.0)[0][0])
  buf = rb.set_priorities(buf, jnp.array([row4]), jnp.array([0]), jnp.array([9.0]), 0.5)
  rows, envs, prob = rb.sample_prioritized(buf, jax.random.PRNGKey(1), 4000)
  picked = np.asarray(buf.items["observation"][rows, envs, 0])
  np.testing.assert_allclose(prob[picked == 4.0], 3 / 5, rtol=1e-6)
  np.testing.assert_allclose(prob[picked == 2.0], 1 / 5, rtol=1e-6)
  assert abs(np.mean(picked == 4.0) - 0.6) < 0.03
  # Seeded: the same key draws the same slots.
  again = rb.sample_prioritized(buf, jax.random.PRNGKey(1), 4000)[0]
  np.testing.assert_array_equal(rows, again)
  # Inactive updates change nothing.
  same = rb.set_priorities(buf, jnp.array([row4]), jnp.array([0]), jnp.array([100.0]), 0.5,
                           active=False)
  np.testing.assert_array_equal(same.priorities, buf.priorities)


def test_prioritized_sampling_in_three_levels_draws_p_over_the_sum():
  # 37 rows x 3 envs = 111 slots (leaf groups of 5, the last one padded; their 23 sums in
  # groups of 5, the last one padded), a third at 0.
  rng = np.random.default_rng(0)
  weights = rng.uniform(0.1, 2.0, (37, 3)).astype(np.float32)
  weights[rng.random((37, 3)) < 0.33] = 0.0
  weights[-1] = 0.0  # a whole row at 0 (and padded slots): never drawn
  buf = _buffer(37, [(False, 1.0)] * 3, lookahead=0)
  buf = buf._replace(priorities=jnp.asarray(weights))
  rows, envs, prob = rb.sample_prioritized(buf, jax.random.PRNGKey(3), 60_000)
  rows, envs, prob = np.asarray(rows), np.asarray(envs), np.asarray(prob)
  assert (weights[rows, envs] > 0).all()
  np.testing.assert_allclose(prob, weights[rows, envs] / weights.sum(), rtol=1e-5)
  counts = np.zeros_like(weights)
  np.add.at(counts, (rows, envs), 1.0)
  expected = weights / weights.sum()
  assert np.abs(counts / 60_000 - expected).max() < 4 * np.sqrt(expected.max() / 60_000)
