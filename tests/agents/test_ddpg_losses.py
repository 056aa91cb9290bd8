"""DDPG critic loss on hand-computed values, jit/vmap, and network checks."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from acme import specs

from actorq.agents.ddpg import learning, networks

# targets r + d * q_t = [1 + 0.5 * 4, 0 + 0 * 100] = [3, 0]; td = [2, -2].
Q_TM1 = jnp.array([1.0, 2.0])
R_T = jnp.array([1.0, 0.0])
DISCOUNT_T = jnp.array([0.5, 0.0])
Q_T = jnp.array([4.0, 100.0])


def test_ddpg_critic_loss_hand_computed():
  assert float(learning.ddpg_critic_loss(Q_TM1, R_T, DISCOUNT_T, Q_T)) == pytest.approx(2.0)
  # Huber(delta=1) of |td| = 2: 1 * (2 - 0.5) = 1.5.
  assert float(learning.ddpg_critic_loss(Q_TM1, R_T, DISCOUNT_T, Q_T, 1.0)) == pytest.approx(1.5)
  # [B, 1] critic outputs are accepted as-is.
  assert float(learning.ddpg_critic_loss(Q_TM1[:, None], R_T, DISCOUNT_T, Q_T[:, None])) == \
      pytest.approx(2.0)


def test_ddpg_critic_loss_gradients_jit_vmap():
  g = jax.grad(learning.ddpg_critic_loss)(Q_TM1, R_T, DISCOUNT_T, Q_T)
  np.testing.assert_allclose(g, [-1.0, 1.0])  # -(td) / B
  g_t = jax.grad(learning.ddpg_critic_loss, argnums=3)(Q_TM1, R_T, DISCOUNT_T, Q_T)
  np.testing.assert_array_equal(g_t, 0.0)
  assert float(jax.jit(learning.ddpg_critic_loss)(Q_TM1, R_T, DISCOUNT_T, Q_T)) == \
      pytest.approx(2.0)
  per = jax.vmap(learning.ddpg_critic_loss)(Q_TM1[:, None], R_T[:, None], DISCOUNT_T[:, None],
                                            Q_T[:, None])
  np.testing.assert_allclose(per, [2.0, 2.0])


def test_ddpg_critic_loss_shape_errors():
  with pytest.raises(ValueError, match="q_tm1 and q_t"):
    learning.ddpg_critic_loss(Q_TM1, R_T, DISCOUNT_T, Q_T[:1])
  with pytest.raises(ValueError, match="r_t and discount_t"):
    learning.ddpg_critic_loss(Q_TM1, R_T[:1], DISCOUNT_T, Q_T)


def test_networks_reject_discrete_actions_and_give_a_tanh_policy_spec():
  obs = specs.Array((5,), np.float32)
  with pytest.raises(networks.UnsupportedEnvironmentError, match="discrete"):
    networks.make_networks(specs.EnvironmentSpec(obs, specs.DiscreteArray(2),
                                                 specs.Array((), np.float32),
                                                 specs.BoundedArray((), np.float32, 0, 1)))
  env_spec = specs.EnvironmentSpec(obs, specs.BoundedArray((2,), np.float32, -2.0, 2.0),
                                   specs.Array((), np.float32),
                                   specs.BoundedArray((), np.float32, 0, 1))
  nets = networks.make_networks(env_spec, (8,), (8,))
  assert nets.spec.layers[-1].activation == "tanh" and nets.spec.output_size == 2
  p = nets.critic.init(jax.random.PRNGKey(0), jnp.zeros((1, 5)), jnp.zeros((1, 2)))
  assert nets.critic.apply(p, jnp.zeros((4, 5)), jnp.zeros((4, 2))).shape == (4, 1)
