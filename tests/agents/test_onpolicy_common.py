"""Shared on-policy machinery: selectors and their extras, masks, minibatches, and the
rollout adder writing into a queue whose signature includes the extras (E3)."""

import dm_env
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import reverb
from acme import specs

from actorq.agents import onpolicy_common as onpolicy
from actorq.components.replay import reverb_replay as replay, rollouts


def _env_spec(discrete=True):
  obs = specs.Array((3,), np.float32)
  act = (specs.DiscreteArray(2, dtype=np.int32) if discrete
         else specs.BoundedArray((1,), np.float32, -2.0, 2.0))
  return specs.EnvironmentSpec(obs, act, specs.Array((), np.float32),
                               specs.BoundedArray((), np.float32, 0.0, 1.0))


def test_categorical_selector_samples_softmax_and_emits_log_prob():
  head = onpolicy.policy_head(_env_spec())
  select = onpolicy.categorical_selector(head)
  logits = np.array([0.0, np.log(3.0)], np.float32)  # probabilities 1/4, 3/4
  rng = np.random.default_rng(0)
  draws = [select(logits, rng, 0) for _ in range(20_000)]
  freq = np.mean([int(a) for a, _ in draws])
  assert abs(freq - 0.75) < 0.015
  a, extras = draws[0]
  assert a.dtype == np.int32 and extras["log_prob"].dtype == np.float32
  np.testing.assert_allclose(extras["log_prob"], np.log([0.25, 0.75])[int(a)], rtol=1e-5)
  np.testing.assert_array_equal(extras["logits"], logits)
  assert int(onpolicy.categorical_selector(head, evaluation=True)(logits, rng, 0)[0]) == 1


def test_gaussian_selector_stays_in_bounds_and_logs_the_raw_sample():
  head = onpolicy.policy_head(_env_spec(discrete=False))
  select = onpolicy.gaussian_selector(head)
  rng = np.random.default_rng(0)
  # Saturated mean: actions equal the bounds; widest std: all samples inside (E4).
  assert float(select(np.array([1e4, 0.0], np.float32), rng, 0)[0][0]) == 2.0
  assert float(select(np.array([-1e4, 0.0], np.float32), rng, 0)[0][0]) == -2.0
  acts = np.array([select(np.array([0.0, 10.0], np.float32), rng, 0)[0][0] for _ in range(10_000)])
  assert acts.min() >= -2.0 and acts.max() <= 2.0
  out = np.array([0.5, np.log(0.3)], np.float32)
  a, extras = select(out, rng, 0)
  u = extras["raw_action"][0]
  expected = -0.5 * ((u - 0.5) / 0.3) ** 2 - np.log(0.3) - 0.5 * np.log(2 * np.pi)
  np.testing.assert_allclose(extras["log_prob"], expected, rtol=1e-4)
  # The learner's density agrees with the actor's.
  np.testing.assert_allclose(
      onpolicy.log_prob(head, jnp.asarray(out)[None], jnp.asarray(extras["raw_action"])[None])[0],
      expected, rtol=1e-4)
  np.testing.assert_allclose(
      onpolicy.gaussian_selector(head, evaluation=True)(np.array([9.0, 0.0], np.float32), rng, 0)[0], [2.0])


def test_transition_mask_and_trace_lambda_cut_at_terminal_steps():
  start = jnp.array([True, False, False, True, False])  # step 2 is acme's terminal step
  mask = onpolicy.transition_mask(start)
  np.testing.assert_array_equal(mask, [1, 1, 0, 1])
  np.testing.assert_allclose(onpolicy.trace_lambda(0.9, mask), [0.9, 0.0, 0.9, 0.9])


def test_minibatches_of_nine_items_by_four_pad_the_last():
  idx, w = onpolicy.minibatch_indices(jax.random.PRNGKey(0), 9, 4)
  assert idx.shape == (3, 4) and w.shape == (3, 4)
  np.testing.assert_array_equal(w[-1], [1, 0, 0, 0])
  np.testing.assert_array_equal(np.sort(np.asarray(idx)[np.asarray(w) > 0]), np.arange(9))
  with pytest.raises(ValueError, match="minibatch_size"):
    onpolicy.minibatch_indices(jax.random.PRNGKey(0), 9, 0)


def test_normalize_advantages_is_finite_for_one_item_and_equal_values():
  for adv, w in (([3.0, 0.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0]), ([2.0] * 4, [1.0] * 4),
                 ([1.0, 2.0], [0.0, 0.0])):
    out = onpolicy.normalize_advantages(jnp.array(adv), jnp.array(w))
    assert np.all(np.isfinite(out))
  np.testing.assert_allclose(onpolicy.normalize_advantages(jnp.array([1.0, 3.0]), jnp.ones(2)),
                             [-1.0, 1.0], atol=1e-6)


def test_rollout_adder_writes_overlapping_rollouts_across_episodes_into_the_queue():
  env_spec = _env_spec()
  head = onpolicy.policy_head(env_spec)
  extras = onpolicy.extras_spec(head)
  t = 4
  server = reverb.Server([rollouts.rollout_queue("q", env_spec, extras, t, 100)])
  client = reverb.Client(f"localhost:{server.port}")
  adder = None
  try:
    adder = rollouts.make_rollout_adder(client, "q", env_spec, extras, t)
    ex = {"logits": np.zeros(2, np.float32), "log_prob": np.float32(-0.5)}
    obs = lambda i: np.full(3, i, np.float32)
    n = 0
    for length in (3, 5):  # two episodes: 3 + 5 actions and 2 terminal steps = 10 steps
      adder.add_first(dm_env.restart(obs(n)))
      for k in range(length):
        n += 1
        last = k == length - 1
        ts = dm_env.TimeStep(dm_env.StepType.LAST if last else dm_env.StepType.MID,
                             np.float32(1.0), np.float32(0.0 if last else 1.0), obs(n))
        adder.add(np.int32(1), ts, ex)
      n += 100
    assert adder.stored_steps == 10 and adder.items_written == 2
    assert client.server_info()["q"].current_size == 2
    items = replay.sample(client.server_address, "q", 2, timeout_s=5)
    first, second = items[0].data, items[1].data
    assert first.observation.shape == (t + 1, 3)
    np.testing.assert_array_equal(first.observation[:, 0], [0, 1, 2, 3, 103])
    np.testing.assert_array_equal(first.start_of_episode, [1, 0, 0, 0, 1])
    np.testing.assert_array_equal(first.discount, [1, 1, 0, 0, 1])  # step 3: terminal step
    np.testing.assert_array_equal(first.extras["log_prob"], [-0.5, -0.5, -0.5, 0.0, -0.5])
    np.testing.assert_array_equal(second.observation[:, 0], [103, 104, 105, 106, 107])  # overlap 1
    with pytest.raises(TypeError, match="extras/log_prob"):
      adder.add(np.int32(0), dm_env.transition(np.float32(1.0), obs(0), np.float32(1.0)),
                {"logits": np.zeros(2, np.float32), "log_prob": np.float64(0.0)})
  finally:
    if adder is not None:
      adder.close()  # its writer stream: an open one holds Server.stop for 5 s
    server.stop()


def test_state_independent_log_std_is_the_bias_and_its_weights_get_no_gradient():
  nets = onpolicy.make_actor_critic_networks(_env_spec(discrete=False), (8,), (8,),
                                             state_independent_log_std=True,
                                             initial_log_std=-0.5)
  params = nets.init(jax.random.PRNGKey(0), np.zeros(3, np.float32))
  last = nets.spec.layers[-1].name
  np.testing.assert_array_equal(params["policy"][last]["w"][:, 1], np.zeros(8))
  assert float(params["policy"][last]["b"][1]) == -0.5
  obs = jnp.asarray(np.random.default_rng(0).normal(size=(5, 3)), jnp.float32)
  _, log_std = onpolicy.split_gaussian(nets.policy.apply(params["policy"], obs), jnp)
  np.testing.assert_allclose(log_std, np.full((5, 1), -0.5), atol=1e-7)  # same for every s
  grads = jax.grad(lambda p: jnp.sum(nets.policy.apply(p["policy"], obs) ** 2))(params)
  assert float(jnp.abs(grads["policy"][last]["w"][:, 1]).sum()) > 0
  masked = nets.mask_gradients(grads)
  np.testing.assert_array_equal(masked["policy"][last]["w"][:, 1], np.zeros(8))
  np.testing.assert_array_equal(masked["policy"][last]["w"][:, 0], grads["policy"][last]["w"][:, 0])
  np.testing.assert_array_equal(masked["policy"][last]["b"], grads["policy"][last]["b"])
  # A discrete head has no log-std: the flag changes nothing there.
  disc = onpolicy.make_actor_critic_networks(_env_spec(), (8,), (8,),
                                             state_independent_log_std=True)
  assert disc.mask_gradients(grads) is grads
