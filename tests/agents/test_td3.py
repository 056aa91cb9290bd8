"""TD3: the twin-critic target and loss, target policy smoothing and the delayed policy
update on hand-computed values (also under jit and vmap), the twin critics, the builder's
learner, and a seeded short learning run on gym:Pendulum-v1."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import reverb
from acme import specs, types

from actorq.agents.dpg_common import learning as dpg_learning
from actorq.agents.dpg_common import networks as dpg_networks
from actorq.agents.td3 import builder as builder_lib
from actorq.agents.td3 import config as config_lib
from actorq.agents.td3 import learning
from actorq.launch import experiment, local
from actorq.testing import runs

OBS, ACT = 3, 2
ENV_SPEC = specs.EnvironmentSpec(
    specs.Array((OBS,), np.float32), specs.BoundedArray((ACT,), np.float32, -2.0, 2.0),
    specs.Array((), np.float32), specs.BoundedArray((), np.float32, 0.0, 1.0))


# --- target policy smoothing (Fujimoto et al. 2018, eq. 14) -----------------------------
def test_smoothing_clips_the_noise_then_the_action():
  u_t = jnp.array([0.9, -0.2, 0.1, -0.95])
  noise = jnp.array([2.0, -10.0, 0.5, -1.0])
  # sigma * noise = [0.4, -2, 0.1, -0.2] -> clipped to +-0.3: [0.3, -0.3, 0.1, -0.2];
  # u + eps = [1.2, -0.5, 0.2, -1.15] -> clipped to [-1, 1]: [1, -0.5, 0.2, -1].
  got = learning.smoothed_target_action(u_t, noise, 0.2, 0.3)
  np.testing.assert_allclose(got, [1.0, -0.5, 0.2, -1.0], rtol=1e-6)
  # The second entry shows the noise clipped at -c before it is added (unclipped, -0.2 - 2
  # would end at the bound -1); the first and last show the action clipped to the bounds.
  np.testing.assert_allclose(learning.smoothed_target_action(u_t, noise, 0.0, 0.3), u_t)
  np.testing.assert_allclose(learning.smoothed_target_action(u_t, noise, 0.2, 0.0), u_t)
  jitted = jax.jit(learning.smoothed_target_action, static_argnums=(2, 3))(u_t, noise, 0.2, 0.3)
  np.testing.assert_array_equal(jitted, got)
  per_sample = jax.vmap(learning.smoothed_target_action, (0, 0, None, None))(
      u_t[:, None], noise[:, None], 0.2, 0.3)
  np.testing.assert_array_equal(per_sample[:, 0], got)


# --- clipped double Q (eq. 10) -------------------------------------------------------------
Q_TM1 = jnp.array([[1.0, 2.0], [0.0, -1.0]])
R_T = jnp.array([1.0, 0.5])
DISCOUNT_T = jnp.array([0.5, 0.0])
Q_T = jnp.array([[4.0, 3.0], [100.0, -100.0]])


def test_clipped_double_q_target_takes_the_min_of_the_twin_targets():
  # y = r + d * min(q_t): 1 + 0.5 * 3 = 2.5; 0.5 + 0 * (-100) = 0.5.
  y = jax.vmap(learning.clipped_double_q_target)(R_T, DISCOUNT_T, Q_T)
  np.testing.assert_allclose(y, [2.5, 0.5])
  assert float(jax.jit(learning.clipped_double_q_target)(1.0, 0.5, jnp.array([4.0, 3.0]))) == 2.5
  # With an entropy term (SAC): 1 + 0.5 * (3 - (-0.4)) = 2.7.
  assert float(learning.clipped_double_q_target(1.0, 0.5, jnp.array([4.0, 3.0]), -0.4)) == \
      pytest.approx(2.7)


def test_twin_critic_loss_hand_computed_and_its_gradients():
  # td = y - q_tm1 = [[1.5, 0.5], [0.5, 1.5]]; per sample sum 0.5 td^2 = [1.25, 1.25].
  loss = learning.twin_critic_loss(Q_TM1, R_T, DISCOUNT_T, Q_T)
  assert float(loss) == pytest.approx(1.25)
  assert float(jax.jit(learning.twin_critic_loss)(Q_TM1, R_T, DISCOUNT_T, Q_T)) == \
      pytest.approx(1.25)
  g = jax.grad(learning.twin_critic_loss)(Q_TM1, R_T, DISCOUNT_T, Q_T)
  np.testing.assert_allclose(g, -np.array([[1.5, 0.5], [0.5, 1.5]]) / 2)  # -td / B
  np.testing.assert_array_equal(jax.grad(learning.twin_critic_loss, argnums=3)(
      Q_TM1, R_T, DISCOUNT_T, Q_T), 0.0)  # no gradient into the target
  per = jax.vmap(learning.twin_critic_loss)(Q_TM1[:, None], R_T[:, None], DISCOUNT_T[:, None],
                                            Q_T[:, None])
  np.testing.assert_allclose(per, [1.25, 1.25])
  with pytest.raises(ValueError, match="q_tm1 and q_t"):
    learning.twin_critic_loss(Q_TM1, R_T, DISCOUNT_T, Q_T[:, :1])
  with pytest.raises(ValueError, match="r_t must be"):
    learning.twin_critic_loss(Q_TM1, R_T[:1], DISCOUNT_T, Q_T)


def test_twin_critics_are_two_independent_mlps():
  critic = dpg_networks.make_critic((8,), 1, num_critics=2)
  obs, u = np.ones((3, OBS), np.float32), np.zeros((3, ACT), np.float32)
  params = critic.init(jax.random.PRNGKey(0), obs, u)
  assert sorted(params) == ["critic_0/~/linear_0", "critic_0/~/linear_1",
                            "critic_1/~/linear_0", "critic_1/~/linear_1"]
  q = critic.apply(params, obs, u)
  assert q.shape == (3, 2)
  one = dpg_networks.make_critic((8,), 1)
  for i in range(2):
    alone = {k.replace(f"critic_{i}", "critic"): v for k, v in params.items()
             if k.startswith(f"critic_{i}/")}
    np.testing.assert_allclose(q[:, i], one.apply(alone, obs, u)[:, 0], rtol=1e-6)
  assert not np.allclose(q[:, 0], q[:, 1])  # separately initialised
  with pytest.raises(ValueError, match="num_critics"):
    dpg_networks.make_critic((8,), 3, num_critics=2)
  ln = dpg_networks.make_critic((8,), 1, layer_norm=True, num_critics=2)
  assert ln.apply(ln.init(jax.random.PRNGKey(0), obs, u), obs, u).shape == (3, 2)


# --- the learner ---------------------------------------------------------------------------
def _batches(seed=0, batch=16):
  rng = np.random.default_rng(seed)
  while True:
    t = types.Transition(
        observation=rng.normal(size=(batch, OBS)).astype(np.float32),
        action=rng.uniform(-2, 2, size=(batch, ACT)).astype(np.float32),
        reward=rng.uniform(0, 1, size=batch).astype(np.float32),
        discount=np.ones(batch, np.float32),
        next_observation=rng.normal(size=(batch, OBS)).astype(np.float32), extras=())
    yield reverb.ReplaySample(info=None, data=t)


def _learner(**kw):
  cfg = config_lib.TD3Config(**{"policy_hidden_sizes": (8,), "critic_hidden_sizes": (8,),
                                "batch_size": 16, **kw})
  b = builder_lib.TD3Builder(cfg)
  nets = b.make_networks(ENV_SPEC)
  return b.make_learner(jax.random.PRNGKey(0), nets, _batches(), lambda label: None, ENV_SPEC)


def _equal(a, b):
  return all(np.array_equal(x, y) for x, y in
             zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)))


def test_delayed_policy_update_on_exact_learner_steps_and_target_noise():
  """policy_delay 3: the policy changes at learner steps 3 and 6 only (counted from 1);
  the critic at every step. Hard target copies (tau 1) every 3 steps, on the policy's
  steps: the target policy always equals the policy, the target critic only after a copy."""
  learner = _learner(policy_delay=3, target_update_period=3, target_update_tau=1.0)
  previous_policy, previous_critic = learner.get_variables(["policy", "critic"])
  changed = []
  for step in range(1, 8):
    learner.step()
    policy, critic, t_policy, t_critic = learner.get_variables(
        ["policy", "critic", "target_policy", "target_critic"])
    if not _equal(policy, previous_policy):
      changed.append(step)
    assert not _equal(critic, previous_critic)  # the critics learn every step
    assert _equal(policy, t_policy)
    assert _equal(critic, t_critic) == (step % 3 == 0)
    previous_policy, previous_critic = policy, critic
  assert changed == [3, 6]
  # The default (policy_delay 2) changes it at even steps.
  learner = _learner()
  previous = learner.get_variables(["policy"])[0]
  changed = []
  for step in range(1, 6):
    learner.step()
    policy = learner.get_variables(["policy"])[0]
    changed += [step] if not _equal(policy, previous) else []
    previous = policy
    if step == 1:
      smoothed_critic = learner.get_variables(["critic"])[0]
  assert changed == [2, 4]
  # Target policy smoothing enters the critic update: the same first step without target
  # noise ends elsewhere. (Noise clipped to 0 is no noise: test_smoothing_clips_...)
  no_noise = _learner(target_noise_sigma=0.0)
  no_noise.step()
  assert not _equal(smoothed_critic, no_noise.get_variables(["critic"])[0])


def test_config_checks_and_defaults():
  c = config_lib.TD3Config()
  assert (c.policy_delay, c.target_noise_sigma, c.target_noise_clip, c.sigma) == (2, 0.2, 0.5, 0.1)
  assert (c.n_step, c.random_warmup_steps, c.min_replay_size) == (3, 1_000, 1_000)
  assert c.samples_per_insert == c.batch_size  # one learner step per actor step
  with pytest.raises(ValueError, match="TD3Config.policy_delay must be >= 1, got 0"):
    config_lib.TD3Config(policy_delay=0)
  with pytest.raises(ValueError, match="TD3Config.target_noise_clip must be >= 0"):
    config_lib.TD3Config(target_noise_clip=-0.1)


def test_random_warmup_precedes_the_noisy_policy_when_acting_only():
  b = builder_lib.TD3Builder(config_lib.TD3Config(policy_hidden_sizes=(16,),
                                                  critic_hidden_sizes=(16,),
                                                  random_warmup_steps=3, sigma=0.0))
  nets = b.make_networks(ENV_SPEC)
  acting = b.make_policy(nets, ENV_SPEC, evaluation=False).selector
  greedy = b.make_policy(nets, ENV_SPEC, evaluation=True).selector
  u = np.array([0.5, -0.5], np.float32)  # tanh outputs: actions 1.0, -1.0 on [-2, 2]
  rng, ref = np.random.default_rng(2), np.random.default_rng(2)
  for step in range(3):
    np.testing.assert_array_equal(acting(u, rng, step)[0],
                                  ref.uniform(-2.0, 2.0, size=ACT).astype(np.float32))
  np.testing.assert_array_equal(acting(u, rng, 3)[0], [1.0, -1.0])  # sigma 0: the policy
  np.testing.assert_array_equal(greedy(u, rng, 0)[0], [1.0, -1.0])


# --- learning ------------------------------------------------------------------------------
LEARNING_TEST_CONFIG = dict(policy_hidden_sizes=(64, 64), critic_hidden_sizes=(64, 64),
                            batch_size=128, samples_per_insert=128.0, min_replay_size=500,
                            policy_learning_rate=1e-3, critic_learning_rate=1e-3,
                            discount=0.98, n_step=3)


@pytest.mark.slow
def test_td3_learns_pendulum_seeded():
  """TD3 on gym:Pendulum-v1, seed 0, 3k actor steps, one learner step per actor step from
  the 500th (the config above: 64x64 networks, batch 128, Adam 1e-3, gamma 0.98, 3-step
  returns; the default 1,000 uniformly random first actions), 3 greedy episodes every 1k
  steps. A random policy scores about -1,200.
  Deterministic: -1236.6, -187.4, -44.0 at 1k..3k steps (then -41.0, -41.2 at 4k, 5k; jax
  0.4.23, AMD EPYC family 26 with AVX-512: values are per kind of CPU). Without the warm-up
  the same run (another EPYC) stayed near -1,570 up to 3k and reached -133.6 at 4k. The
  threshold leaves room for float differences on another CPU; a second, shorter run (1k
  steps) must retrace the first.
  """
  config = experiment.ExperimentConfig(
      builder_lib.TD3Builder(config_lib.TD3Config(**LEARNING_TEST_CONFIG)),
      "gym:Pendulum-v1", 3_000, seed=0, eval_every=1_000, eval_episodes=3)
  result = local.run(config)
  assert result.final_eval_return >= -300.0, result.evaluations
  runs.assert_prefix_reproduces(config, result, fraction=1 / 3)


# --- the pre-activation penalty (DDPG, D4PG and TD3 share it) -------------------------------
def test_preactivation_penalty_hand_computed_under_jit_and_vmap():
  """lambda * mean_b sum_i z_bi^2 (HER, appendix A): z = [[1, -2], [0, 3]], lambda 0.5 ->
  0.5 * (5 + 9) / 2 = 3.5; its gradient 2 lambda z / B does not vanish where tanh does."""
  z = jnp.array([[1.0, -2.0], [0.0, 3.0]])
  assert float(dpg_learning.preactivation_penalty_loss(z, 0.5)) == pytest.approx(3.5)
  assert float(jax.jit(dpg_learning.preactivation_penalty_loss, static_argnums=1)(z, 0.5)) == \
      pytest.approx(3.5)
  batched = jax.vmap(lambda x: dpg_learning.preactivation_penalty_loss(x, 0.5))(jnp.stack([z, 2 * z]))
  np.testing.assert_allclose(batched, [3.5, 14.0], rtol=1e-6)
  grad = jax.grad(lambda x: dpg_learning.preactivation_penalty_loss(x, 0.5))(z)
  np.testing.assert_allclose(grad, 2 * 0.5 * np.asarray(z) / 2, rtol=1e-6)
  with pytest.raises(ValueError, match=r"z_t must be \[B, A\]"):
    dpg_learning.preactivation_penalty_loss(jnp.zeros(3), 0.5)


def test_preactivation_network_shares_the_policy_parameters():
  nets = builder_lib.TD3Builder(config_lib.TD3Config(policy_hidden_sizes=(8,))).make_networks(ENV_SPEC)
  params = nets.policy.init(jax.random.PRNGKey(1), np.zeros((1, OBS), np.float32))
  obs = np.random.default_rng(0).normal(size=(5, OBS)).astype(np.float32)
  z = nets.policy_preactivation.apply(params, obs)
  np.testing.assert_allclose(jnp.tanh(z), nets.policy.apply(params, obs), rtol=1e-6, atol=1e-7)


def test_preactivation_penalty_pulls_a_saturated_policy_back():
  """A policy started saturated (output init scale 2000: |u| ~ 1 on every sample) with a
  large learning rate: after 40 learner steps the penalty (lambda 0.1) has brought its
  pre-activations down to a fraction of where they started (6.5 -> 0.34 on this seed);
  without it they do not come back (here they grow to 20.6)."""
  obs = next(_batches(seed=7)).data.observation

  def mean_abs_z(learner, nets):
    return float(jnp.mean(jnp.abs(nets.policy_preactivation.apply(
        learner.get_variables(["policy"])[0], obs))))

  out = {}
  for penalty in (0.0, 0.1):
    cfg = config_lib.TD3Config(policy_hidden_sizes=(8,), critic_hidden_sizes=(8,),
                               batch_size=16, policy_delay=1, policy_output_init_scale=2000.0,
                               policy_learning_rate=0.05, preactivation_penalty=penalty)
    b = builder_lib.TD3Builder(cfg)
    nets = b.make_networks(ENV_SPEC)
    learner = b.make_learner(jax.random.PRNGKey(0), nets, _batches(), lambda label: None,
                             ENV_SPEC)
    start = mean_abs_z(learner, nets)
    for _ in range(40):
      learner.step()
    out[penalty] = (start, mean_abs_z(learner, nets))
  start, end = out[0.1]
  assert start > 3.0  # saturated: tanh(3) = 0.995
  assert end < 0.5 * start, out
  assert out[0.0][1] > 0.8 * out[0.0][0], out
  with pytest.raises(ValueError, match="TD3Config.preactivation_penalty must be >= 0"):
    config_lib.TD3Config(preactivation_penalty=-1.0)
