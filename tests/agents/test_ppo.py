"""PPO: the clipped loss on hand-computed values, GAE across an episode end, case L1
(minibatch of one, all-equal advantages), jit/vmap, and a seeded learning run."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from acme import specs

from actorq.agents import onpolicy_common as onpolicy
from actorq.agents.ppo import builder as builder_lib
from actorq.agents.ppo import config as config_lib
from actorq.agents.ppo import learning
from actorq.launch import experiment, local
from actorq.testing import runs

HEAD = onpolicy.PolicyHead(True, 2)


def test_ppo_loss_matches_hand_computed_values():
  # pi(a=0|s0) = 0.5, pi(a=1|s1) = exp(1)/(1+exp(1)); behaviour probs 0.25 and 0.5.
  outputs = jnp.array([[0.0, 0.0], [0.0, 1.0]])
  actions = jnp.array([0, 1])
  blogp = jnp.log(jnp.array([0.25, 0.5]))
  adv = jnp.array([1.0, -2.0])
  values, returns = jnp.array([0.0, 1.0]), jnp.array([1.0, 3.0])
  loss, m = learning.ppo_loss(HEAD, outputs, values, actions, blogp, adv, returns, jnp.ones(2),
                              clip_epsilon=0.2, value_cost=0.5, entropy_cost=0.01,
                              normalize_advantages=False)
  p1 = np.e / (1 + np.e)
  r = np.array([2.0, p1 / 0.5])  # ratios 2.0 and 1.462
  surrogate = np.minimum(r * [1.0, -2.0], np.clip(r, 0.8, 1.2) * [1.0, -2.0])  # [1.2, -2.924]
  pg = -surrogate.mean()
  vl = 0.5 * np.mean(np.square([0.0 - 1.0, 1.0 - 3.0]))  # 1.25
  ent = np.mean([np.log(2.0), -(p1 * np.log(p1) + (1 - p1) * np.log(1 - p1))])
  np.testing.assert_allclose(m["pg_loss"], pg, rtol=1e-5)
  np.testing.assert_allclose(m["value_loss"], vl, rtol=1e-6)
  np.testing.assert_allclose(loss, pg + 0.5 * vl - 0.01 * ent, rtol=1e-5)
  np.testing.assert_allclose(m["clip_fraction"], 1.0)
  # Weights 0 drop an item entirely.
  _, m0 = learning.ppo_loss(HEAD, outputs, values, actions, blogp, adv, returns,
                            jnp.array([1.0, 0.0]), normalize_advantages=False)
  np.testing.assert_allclose(m0["pg_loss"], -1.2, rtol=1e-6)
  with pytest.raises(ValueError, match="returns must have shape"):
    learning.ppo_loss(HEAD, outputs, values, actions, blogp, adv, returns[:1], jnp.ones(2))


def test_gae_hand_computed_and_cut_at_an_episode_end():
  gamma, lam = 0.9, 0.5
  values = jnp.array([1.0, 2.0, 3.0, 4.0])
  r = jnp.array([1.0, 1.0, 1.0])
  adv = learning.gae_advantages(values, r, gamma * jnp.ones(3), jnp.ones(3), lam)
  d = np.array([1 + 0.9 * 2 - 1, 1 + 0.9 * 3 - 2, 1 + 0.9 * 4 - 3])  # deltas 1.8, 1.7, 1.6
  expected = [d[0] + 0.45 * d[1] + 0.45 ** 2 * d[2], d[1] + 0.45 * d[2], d[2]]
  np.testing.assert_allclose(adv, expected, rtol=1e-6)
  # Episode A: o0 -a0-> o1 (time-limit end, d=1), step 1 is acme's terminal step, then
  # episode B starts at step 2: o2 -a2-> o3. Step 0 bootstraps from V(o1) only.
  values = jnp.array([1.0, 5.0, 2.0, 3.0, 4.0])
  r = jnp.array([1.0, 0.0, 1.0, 1.0])
  discount = gamma * jnp.array([1.0, 0.0, 1.0, 1.0])
  mask = onpolicy.transition_mask(jnp.array([True, False, True, False, False]))
  adv = learning.gae_advantages(values, r, discount, mask, lam)
  np.testing.assert_allclose(adv[0], 1 + 0.9 * 5 - 1, rtol=1e-6)
  alone = learning.gae_advantages(values[2:], r[2:], discount[2:], jnp.ones(2), lam)
  np.testing.assert_allclose(adv[2:], alone, rtol=1e-6)


def test_case_l1_minibatch_of_one_and_equal_advantages_are_finite():
  """9-step rollout, minibatches of 4 (the last holds 1 item); all-equal advantages."""
  n, rng = 9, np.random.default_rng(0)
  idx, w = onpolicy.minibatch_indices(jax.random.PRNGKey(1), n, 4)
  assert np.asarray(w).sum(axis=1).tolist() == [4, 4, 1]
  params = {"w": jnp.asarray(rng.normal(size=(3, 2)), jnp.float32), "v": jnp.ones(3)}
  obs = jnp.asarray(rng.normal(size=(n, 3)), jnp.float32)
  actions = jnp.asarray(rng.integers(0, 2, n))
  blogp = jnp.full((n,), np.log(0.5), jnp.float32)
  returns = jnp.asarray(rng.normal(size=n), jnp.float32)

  def loss(p, adv, i, weight):
    return learning.ppo_loss(HEAD, obs[i] @ p["w"], obs[i] @ p["v"], actions[i], blogp[i],
                             adv[i], returns[i], weight, entropy_cost=0.01)[0]

  value_and_grad = jax.jit(jax.value_and_grad(loss))
  for adv in (jnp.asarray(rng.normal(size=n), jnp.float32), jnp.full((n,), 0.7, jnp.float32)):
    for k in range(3):
      value, grads = value_and_grad(params, adv, idx[k], w[k])
      assert np.isfinite(value), (k, value)
      assert all(np.all(np.isfinite(g)) for g in jax.tree_util.tree_leaves(grads))
  # All-equal advantages normalise to 0: no policy-gradient term at all.
  _, m = learning.ppo_loss(HEAD, obs @ params["w"], obs @ params["v"], actions, blogp,
                           jnp.full((n,), 0.7), returns, jnp.ones(n))
  assert float(m["pg_loss"]) == 0.0


def test_losses_under_jit_and_vmap():
  rng = np.random.default_rng(2)
  values = jnp.asarray(rng.normal(size=(5, 7)), jnp.float32)
  r = jnp.asarray(rng.normal(size=(5, 6)), jnp.float32)
  disc = jnp.full((5, 6), 0.99, jnp.float32)
  mask = jnp.ones((5, 6))
  batched = jax.jit(jax.vmap(learning.gae_advantages, in_axes=(0, 0, 0, 0, None)))(
      values, r, disc, mask, 0.95)
  for i in range(5):
    np.testing.assert_allclose(batched[i], learning.gae_advantages(values[i], r[i], disc[i],
                                                                   mask[i], 0.95), rtol=1e-5)
  gauss = onpolicy.PolicyHead(False, 1, np.array([-1.0], np.float32), np.array([1.0], np.float32),
                              np.float32)
  args = (jnp.asarray(rng.normal(size=(4, 2)), jnp.float32), jnp.zeros(4),
          jnp.asarray(rng.normal(size=(4, 1)), jnp.float32), jnp.full((4,), -1.0),
          jnp.asarray(rng.normal(size=4), jnp.float32), jnp.zeros(4), jnp.ones(4))
  eager = learning.ppo_loss(gauss, *args)[0]
  jitted = jax.jit(lambda *a: learning.ppo_loss(gauss, *a)[0])(*args)
  np.testing.assert_allclose(eager, jitted, rtol=1e-5)


@pytest.mark.slow
def test_ppo_learns_cartpole_with_a_seed():
  """Default config, seed 0, 6,000 actor steps. Deterministic: greedy return 383.8 at
  6,000 steps (5 episodes; the project's 2-core machine; a random policy's is about 9).
  The threshold leaves room for float differences on another CPU; a second, shorter run
  must retrace the first."""
  config = experiment.ExperimentConfig(
      builder_lib.PPOBuilder(config_lib.PPOConfig()), "gym:CartPole-v1", 6_000, seed=0,
      eval_every=3_000, eval_episodes=5)
  result = local.run(config)
  assert result.learner_steps >= 10  # one per 4 rollouts of 128 steps
  assert result.final_eval_return >= 300, result.evaluations
  runs.assert_prefix_reproduces(config, result)


def test_linear_learning_rate_decay_counts_optimizer_updates():
  # dmc config: 1 rollout of 2048 steps, 10 epochs of 32 minibatches of 64 = 320 updates
  # per learner step; 200000 actor steps = 97 learner steps = 31040 updates.
  cfg = config_lib.PPOConfig(rollout_length=2048, batch_size=1, num_epochs=10,
                             minibatch_size=64, learning_rate=3e-4,
                             learning_rate_decay_steps=200_000)
  assert learning.sgd_updates_per_learner_step(cfg) == 320
  schedule = learning.learning_rate_schedule(cfg)
  np.testing.assert_allclose([schedule(0), schedule(15_520), schedule(31_040), schedule(40_000)],
                             [3e-4, 1.5e-4, 0.0, 0.0], atol=1e-9)
  assert learning.learning_rate_schedule(config_lib.PPOConfig()) == 3e-4
  with pytest.raises(ValueError, match="learning_rate_decay_steps"):
    config_lib.PPOConfig(learning_rate_decay_steps=0)
