"""DPG network options: Acme's LayerNorm critic torso and the near-zero policy head,
checked against a NumPy forward pass and the initialiser's stated std."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from acme import specs

from actorq.agents.d4pg import builder as builder_lib
from actorq.agents.d4pg import config as config_lib
from actorq.agents.dpg_common import networks as dpg_networks
from actorq.components import networks as networks_lib
from actorq.quantization import network_spec as ns

OBS, ACT = 4, 2
ENV_SPEC = specs.EnvironmentSpec(
    specs.Array((OBS,), np.float32), specs.BoundedArray((ACT,), np.float32, -1.0, 1.0),
    specs.Array((), np.float32), specs.BoundedArray((), np.float32, 0.0, 1.0))


def _layer_norm_mlp_numpy(p, x):
  """linear -> LayerNorm (eps 1e-5, Haiku's default) -> tanh, ELU hidden, linear head."""
  h = x @ p["critic/linear_0"]["w"] + p["critic/linear_0"]["b"]
  mean, var = h.mean(-1, keepdims=True), h.var(-1, keepdims=True)
  h = (h - mean) / np.sqrt(var + 1e-5)
  h = np.tanh(h * p["critic/layer_norm"]["scale"] + p["critic/layer_norm"]["offset"])
  h = h @ p["critic/linear_1"]["w"] + p["critic/linear_1"]["b"]
  h = np.where(h > 0, h, np.expm1(np.minimum(h, 0)))
  return h @ p["critic/linear_2"]["w"] + p["critic/linear_2"]["b"]


def test_layer_norm_critic_matches_numpy_forward_under_jit():
  critic = dpg_networks.make_critic((16, 8), 5, layer_norm=True)
  rng = np.random.default_rng(0)
  obs = rng.normal(size=(6, OBS)).astype(np.float32)
  u = rng.uniform(-1, 1, size=(6, ACT)).astype(np.float32)
  params = critic.init(jax.random.PRNGKey(1), obs, u)
  # Non-trivial LayerNorm scale/offset so both enter the check.
  params = dict(params)
  params["critic/layer_norm"] = {"scale": jnp.full((16,), 1.5), "offset": jnp.full((16,), -0.2)}
  assert sorted(params) == ["critic/layer_norm", "critic/linear_0", "critic/linear_1",
                            "critic/linear_2"]
  got = np.asarray(jax.jit(critic.apply)(params, obs, u))
  np_params = jax.tree_util.tree_map(np.asarray, params)
  want = _layer_norm_mlp_numpy(np_params, np.concatenate([obs, u], -1))
  assert got.shape == (6, 5) and got.dtype == np.float32
  np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_layer_norm_bounds_the_first_layer_for_huge_inputs():
  """Inputs x1000 leave the head's input bounded (tanh of a normalised vector)."""
  critic = dpg_networks.make_critic((16, 8), 1, layer_norm=True)
  obs = np.ones((1, OBS), np.float32)
  u = np.ones((1, ACT), np.float32)
  params = critic.init(jax.random.PRNGKey(0), obs, u)
  small = critic.apply(params, obs, u)
  huge = critic.apply(params, 1000 * obs, 1000 * u)
  # linear_0 is linear without bias effects at x1000, so LayerNorm output is the same
  # normalised direction: the critic output barely moves.
  np.testing.assert_allclose(huge, small, atol=0.05)


def test_relu_critic_is_the_default_and_unchanged():
  a = dpg_networks.make_critic((16, 8), 3)
  obs = np.ones((2, OBS), np.float32)
  u = np.zeros((2, ACT), np.float32)
  params = a.init(jax.random.PRNGKey(0), obs, u)
  assert sorted(params) == ["critic/~/linear_0", "critic/~/linear_1", "critic/~/linear_2"]


def test_output_init_scale_sets_only_the_last_layer_std():
  spec = ns.mlp(OBS, (512, 512), 256, output_activation="tanh")
  key = jax.random.PRNGKey(0)
  dummy = jnp.zeros((1, OBS))
  default = networks_lib.haiku_network(spec).init(key, dummy)
  near_zero = networks_lib.haiku_network(spec, output_init_scale=1e-4).init(key, dummy)
  for name in ("dense_0", "dense_1"):  # hidden layers: identical draws
    np.testing.assert_array_equal(default[name]["w"], near_zero[name]["w"])
  # VarianceScaling corrects for the truncation at 2 sigma: std = sqrt(scale / fan_in).
  # Haiku's default TruncatedNormal(1 / sqrt(fan_in)) does not: std = 0.8796 / sqrt(fan_in).
  std = float(jnp.std(near_zero["dense_2"]["w"]))
  assert std == pytest.approx(np.sqrt(1e-4 / 512), rel=0.05)
  assert float(jnp.std(default["dense_2"]["w"])) == pytest.approx(
      0.8796 / np.sqrt(512), rel=0.05)


@pytest.mark.parametrize("scale", [0.0, -1.0])
def test_output_init_scale_must_be_positive(scale):
  spec = ns.mlp(OBS, (8,), 2)
  with pytest.raises(ValueError, match="output_init_scale must be > 0"):
    networks_lib.haiku_network(spec, output_init_scale=scale)
  with pytest.raises(ValueError, match="policy_output_init_scale must be > 0"):
    config_lib.D4PGConfig(policy_output_init_scale=scale)


def test_layer_norm_critic_needs_a_hidden_layer():
  with pytest.raises(ValueError, match="critic_layer_norm needs at least one"):
    config_lib.D4PGConfig(critic_layer_norm=True, critic_hidden_sizes=())
  with pytest.raises(ValueError, match="critic_layer_norm needs at least one"):
    dpg_networks.make_critic((), 1, layer_norm=True)


def test_builder_wires_both_options_into_the_learner():
  cfg = config_lib.D4PGConfig(policy_hidden_sizes=(32,), critic_hidden_sizes=(16, 8),
                              num_atoms=11, critic_layer_norm=True,
                              policy_output_init_scale=1e-4)
  nets = builder_lib.D4PGBuilder(cfg).make_networks(ENV_SPEC)
  key = jax.random.PRNGKey(0)
  obs = jnp.ones((3, OBS))
  policy_params = nets.policy.init(key, obs)
  critic_params = nets.critic.init(key, obs, jnp.zeros((3, ACT)))
  assert "critic/layer_norm" in critic_params
  assert nets.critic.apply(critic_params, obs, jnp.zeros((3, ACT))).shape == (3, 11)
  # Near-zero head (the default): initial actions ~100x (sqrt(1 / 1e-4)) closer to the
  # centre of the action range than with Haiku's default head, same key.
  assert config_lib.D4PGConfig().policy_output_init_scale == 1e-4
  assert config_lib.D4PGConfig().critic_layer_norm
  default = builder_lib.D4PGBuilder(config_lib.D4PGConfig(policy_hidden_sizes=(32,),
                                                          policy_output_init_scale=None))
  default_policy = default.make_networks(ENV_SPEC).policy
  near = float(jnp.max(jnp.abs(nets.policy.apply(policy_params, obs))))
  far = float(jnp.max(jnp.abs(default_policy.apply(default_policy.init(key, obs), obs))))
  assert 0 < near < 0.03 * far
