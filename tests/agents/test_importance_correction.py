"""The quantized on-policy correction of PPO and A2C: truncated importance weights and the
behaviour KL on hand-computed values (also under jit and vmap), the weighted losses, the
default (on for non-fp32 actors), the corrected updates, and `behaviour_kl` in
learner.csv of an int8 run."""
import collections
import csv

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from acme import specs

from actorq.agents import onpolicy_common as onpolicy
from actorq.agents.a2c import builder as a2c_builder
from actorq.agents.a2c import config as a2c_config
from actorq.agents.a2c import learning as a2c_learning
from actorq.agents.ppo import builder as ppo_builder
from actorq.agents.ppo import config as ppo_config
from actorq.agents.ppo import learning as ppo_learning
from actorq.components import config_io
from actorq.launch import experiment, local

HEAD = onpolicy.PolicyHead(True, 2)


# --- the shared pieces ---------------------------------------------------------------------
def test_truncated_importance_weights_hand_computed():
  # ratios pi/mu = 0.5/0.25 = 2, 0.2/0.4 = 0.5, 0.9/0.9 = 1.
  log_pi, log_mu = jnp.log(jnp.array([0.5, 0.2, 0.9])), jnp.log(jnp.array([0.25, 0.4, 0.9]))
  np.testing.assert_allclose(onpolicy.truncated_importance_weights(log_pi, log_mu, 1.0),
                             [1.0, 0.5, 1.0], rtol=1e-6)
  np.testing.assert_allclose(onpolicy.truncated_importance_weights(log_pi, log_mu, 1.5),
                             [1.5, 0.5, 1.0], rtol=1e-6)
  # Extreme log-ratios (+-89) stay finite: rho_bar and exp(-89) (0 where denormals flush).
  extreme = onpolicy.truncated_importance_weights(jnp.array([89.0, -89.0]), jnp.zeros(2), 1.0)
  assert float(extreme[0]) == 1.0 and 0.0 <= float(extreme[1]) < 1e-30
  # No gradient into either log-prob.
  g = jax.grad(lambda lp: jnp.sum(onpolicy.truncated_importance_weights(lp, log_mu, 1.5)))(log_pi)
  np.testing.assert_array_equal(g, 0.0)
  jitted = jax.jit(onpolicy.truncated_importance_weights, static_argnums=2)(log_pi, log_mu, 1.0)
  per = jax.vmap(onpolicy.truncated_importance_weights, (0, 0, None))(log_pi, log_mu, 1.0)
  np.testing.assert_allclose(jitted, [1.0, 0.5, 1.0], rtol=1e-6)
  np.testing.assert_allclose(per, [1.0, 0.5, 1.0], rtol=1e-6)


def test_behaviour_kl_hand_computed_and_unbiased():
  """mu = (0.25, 0.75), pi = (0.5, 0.5): r = 2 for action 0, 2/3 for action 1, so
  k3 = (r - 1) - log r = 1 - log 2 = 0.30685 and -1/3 + log 1.5 = 0.07213. Weighted by
  the behaviour probabilities (an expectation under mu) they give the exact KL(mu || pi)
  = 0.25 log 0.5 + 0.75 log 1.5 = 0.13081."""
  log_pi, log_mu = jnp.log(jnp.array([0.5, 0.5])), jnp.log(jnp.array([0.25, 0.75]))
  k3 = np.array([1 - np.log(2.0), -1 / 3 + np.log(1.5)])
  assert float(onpolicy.behaviour_kl(log_pi, log_mu, jnp.ones(2))) == pytest.approx(
      k3.mean(), rel=1e-5)
  exact = 0.25 * np.log(0.5) + 0.75 * np.log(1.5)
  assert float(onpolicy.behaviour_kl(log_pi, log_mu, jnp.array([0.25, 0.75]))) == \
      pytest.approx(exact, rel=1e-5)
  assert float(onpolicy.behaviour_kl(log_mu, log_mu, jnp.ones(2))) == 0.0  # same policy
  assert float(onpolicy.behaviour_kl(log_pi, log_mu, jnp.array([0.0, 1.0]))) == \
      pytest.approx(k3[1], rel=1e-5)  # a masked item counts for nothing
  # Finite for extreme log-ratios (clipped to +-20), never negative.
  extreme = onpolicy.behaviour_kl(jnp.array([200.0, -200.0]), jnp.zeros(2), jnp.ones(2))
  assert np.isfinite(float(extreme)) and float(extreme) > 0
  jitted = jax.jit(onpolicy.behaviour_kl)(log_pi, log_mu, jnp.ones(2))
  assert float(jitted) == pytest.approx(k3.mean(), rel=1e-5)
  per = jax.vmap(onpolicy.behaviour_kl)(log_pi[:, None], log_mu[:, None], jnp.ones((2, 1)))
  np.testing.assert_allclose(per, k3, rtol=1e-5)


@pytest.mark.parametrize("config_cls", [ppo_config.PPOConfig, a2c_config.A2CConfig])
def test_the_correction_is_on_by_default_exactly_for_non_fp32_actors(config_cls):
  assert not config_cls().importance_correction_on()
  for precision in ("int8", "fp16", "bf16"):
    assert config_cls(actor_precision=precision).importance_correction_on()
  off = config_cls(actor_precision="int8", importance_correction=False)
  assert not off.importance_correction_on()
  assert config_cls(importance_correction=True).importance_correction_on()
  with pytest.raises(ValueError, match=f"{config_cls.__name__}.importance_rho_bar must be > 0"):
    config_cls(importance_rho_bar=0.0)
  with pytest.raises(ValueError, match="importance_correction must be true or false"):
    config_cls(importance_correction="yes")
  # From a config file or --set: null (auto) and the booleans' words.
  assert config_io.from_dict(config_cls, {"importance_correction": None}) == config_cls()
  assert config_io.from_dict(config_cls, {}, {"importance_correction": "false"}) == \
      config_cls(importance_correction=False)


# --- PPO -----------------------------------------------------------------------------------
def test_ppo_loss_weights_each_surrogate_by_its_importance_weight():
  # The hand example of test_ppo: surrogates [1.2, -2.924]; weights [0.5, 1].
  outputs = jnp.array([[0.0, 0.0], [0.0, 1.0]])
  args = (HEAD, outputs, jnp.zeros(2), jnp.array([0, 1]), jnp.log(jnp.array([0.25, 0.5])),
          jnp.array([1.0, -2.0]), jnp.zeros(2), jnp.ones(2))
  kw = dict(clip_epsilon=0.2, value_cost=0.0, entropy_cost=0.0, normalize_advantages=False)
  p1 = np.e / (1 + np.e)
  surrogate = np.array([1.2, min(p1 / 0.5 * -2.0, 1.2 * -2.0)])
  _, plain = ppo_learning.ppo_loss(*args, **kw)
  _, weighted = ppo_learning.ppo_loss(*args, **kw, importance_weights=jnp.array([0.5, 1.0]))
  np.testing.assert_allclose(plain["pg_loss"], -surrogate.mean(), rtol=1e-5)
  np.testing.assert_allclose(weighted["pg_loss"], -np.mean([0.5, 1.0] * surrogate), rtol=1e-5)
  with pytest.raises(ValueError, match="importance_weights must have shape"):
    ppo_learning.ppo_loss(*args, **kw, importance_weights=jnp.ones(3))


Trajectory = collections.namedtuple(
    "Trajectory", "observation action reward discount start_of_episode extras")


def _rollouts(seed=0, b=2, t=6, obs=3):
  rng = np.random.default_rng(seed)
  return Trajectory(
      observation=jnp.asarray(rng.normal(size=(b, t + 1, obs)), jnp.float32),
      action=jnp.asarray(rng.integers(0, 2, size=(b, t + 1)), jnp.int32),
      reward=jnp.asarray(rng.uniform(size=(b, t + 1)), jnp.float32),
      discount=jnp.ones((b, t + 1), jnp.float32),
      start_of_episode=jnp.zeros((b, t + 1), bool).at[:, 0].set(True),
      extras={})


def _updater(builder_cls, config):
  """`update(traj_fn)`: one jitted update (compiled once per config) of a fresh learner on
  rollouts whose behaviour log-probs are `traj_fn(log_pi_fp32)` (log_pi_fp32: the fresh
  learner's own log-probs)."""
  env_spec = specs.EnvironmentSpec(specs.Array((3,), np.float32), specs.DiscreteArray(2),
                                   specs.Array((), np.float32),
                                   specs.BoundedArray((), np.float32, 0.0, 1.0))
  builder = builder_cls(config)
  nets = builder.make_networks(env_spec)
  params = nets.init(jax.random.PRNGKey(0), np.zeros(3, np.float32))
  optimizer = builder.make_optimizer()
  jitted = jax.jit(builder.learning_lib.make_update(nets, optimizer, config))
  log_pi = onpolicy.log_prob(HEAD, nets.policy.apply(params["policy"], _rollouts().observation),
                             _rollouts().action)

  def update(traj_fn):
    traj = _rollouts()._replace(extras={"log_prob": traj_fn(log_pi),
                                        "logits": jnp.zeros(log_pi.shape + (2,))})
    state = onpolicy.TrainingState(params, optimizer.init(params), jax.random.PRNGKey(1),
                                   jnp.zeros((), jnp.int32))
    return jitted(state, traj)
  return update


def _leaves_equal(a, b):
  return all(np.array_equal(x, y) for x, y in zip(jax.tree_util.tree_leaves(a),
                                                  jax.tree_util.tree_leaves(b)))


@pytest.mark.parametrize("builder_cls, config_cls", [
    (ppo_builder.PPOBuilder, ppo_config.PPOConfig), (a2c_builder.A2CBuilder, a2c_config.A2CConfig)])
def test_corrected_update_with_int8_actors_against_the_plain_one(builder_cls, config_cls):
  """An update of a config with int8 actors (the correction on by default) against the
  plain fp32 one, on the same rollouts.

  Behaviour log-probs equal to the learner's fp32 ones: every weight is 1 and the KL 0, so
  the corrected update is the plain one (PPO's ratio denominators agree too: two
  minibatches, the second after the first's step).

  Behaviour log-probs shifted by log 2 (mu = 2 pi) on every action: r = 1/2, so the
  weights are 0.5 and k3 = -0.5 + log 2 = 0.19315 per action; the plain update logs the KL
  too, and moves the parameters differently from the corrected one."""
  small = dict(policy_hidden=(8,), value_hidden=(8,), rollout_length=6, batch_size=2)
  if config_cls is ppo_config.PPOConfig:
    small.update(minibatch_size=6, num_epochs=1)
  plain_update = _updater(builder_cls, config_cls(**small))
  corrected_update = _updater(builder_cls, config_cls(actor_precision="int8", **small))

  plain, plain_metrics = plain_update(lambda lp: lp)
  fixed, metrics = corrected_update(lambda lp: lp)
  assert "importance_weight" not in plain_metrics and "importance_weight" in metrics
  assert float(metrics["importance_weight"]) == pytest.approx(1.0)
  assert float(metrics["behaviour_kl"]) == pytest.approx(0.0, abs=1e-6)
  for a, b in zip(jax.tree_util.tree_leaves(plain.params), jax.tree_util.tree_leaves(fixed.params)):
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)

  shifted = lambda lp: lp + np.log(2.0)
  state, metrics = corrected_update(shifted)
  plain, plain_metrics = plain_update(shifted)
  assert float(metrics["importance_weight"]) == pytest.approx(0.5, rel=1e-5)
  for m in (metrics, plain_metrics):
    assert float(m["behaviour_kl"]) == pytest.approx(-0.5 + np.log(2.0), rel=1e-4)
  assert not _leaves_equal(state.params["policy"], plain.params["policy"])


def test_a2c_loss_with_the_correction_hand_computed():
  """test_a2c's rollout (step 1 is acme's terminal step; real transitions 0, 2, 3 with
  advantages 2, 2, 2) under pi = 0.5 per action, with behaviour probabilities mu = 0.25,
  0.5, 0.8, 0.5: rho = min(1, 0.5 / mu) = 1, 1, 0.625, 1."""
  values = jnp.array([1.0, 9.0, 0.0, 0.0, 2.0])
  r = jnp.array([3.0, 0.0, 1.0, 1.0])
  disc = 0.5 * jnp.array([0.0, 0.0, 1.0, 1.0])
  mask = onpolicy.transition_mask(jnp.array([True, False, True, False, False]))
  outputs, actions = jnp.zeros((4, 2)), jnp.array([0, 1, 1, 0])
  log_mu = jnp.log(jnp.array([0.25, 0.5, 0.8, 0.5]))
  _, m = a2c_learning.a2c_loss(HEAD, outputs, values, actions, r, disc, mask, 1.0, 0.5, 0.1,
                               log_mu, 1.0)
  adv, rho = np.array([2.0, 2.0, 2.0]), np.array([1.0, 0.625, 1.0])
  np.testing.assert_allclose(m["pg_loss"], -np.mean(np.log(0.5) * adv * rho), rtol=1e-5)
  np.testing.assert_allclose(m["importance_weight"], rho.mean(), rtol=1e-6)
  k3 = np.array([1 - np.log(2.0), -0.375 - np.log(0.625), 0.0])
  np.testing.assert_allclose(m["behaviour_kl"], k3.mean(), rtol=1e-5)
  _, plain = a2c_learning.a2c_loss(HEAD, outputs, values, actions, r, disc, mask, 1.0, 0.5, 0.1,
                                   log_mu)
  np.testing.assert_allclose(plain["pg_loss"], -np.mean(np.log(0.5) * adv), rtol=1e-5)
  assert "importance_weight" not in plain
  with pytest.raises(ValueError, match="needs behaviour_log_prob"):
    a2c_learning.a2c_loss(HEAD, outputs, values, actions, r, disc, mask, importance_rho_bar=1.0)


# --- end to end ----------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("builder_cls, config", [
    (ppo_builder.PPOBuilder, ppo_config.PPOConfig(rollout_length=64, batch_size=2)),
    (a2c_builder.A2CBuilder, a2c_config.A2CConfig())])
def test_int8_actors_log_the_kl_and_the_weights_in_learner_csv(builder_cls, config, tmp_path):
  result = local.run(experiment.ExperimentConfig(
      builder_cls(config), "gym:CartPole-v1", 1_500, seed=0, eval_every=1_500,
      eval_episodes=1, logdir=str(tmp_path), actor_precision="int8"))
  assert result.learner_steps > 0
  with open(tmp_path / "learner.csv", encoding="utf-8") as f:
    rows = list(csv.DictReader(f))
  kl = np.array([float(r["behaviour_kl"]) for r in rows])
  weight = np.array([float(r["importance_weight"]) for r in rows])
  # int8 actors act with a policy close to, but not exactly, the learner's fp32 one.
  assert np.all(kl >= 0) and 0 < kl.mean() < 0.05, kl
  assert np.all((weight > 0.5) & (weight <= 1.0)), weight
