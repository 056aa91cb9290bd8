"""D4PG: categorical projection and critic loss on hand-computed values, jit/vmap, the
shared DPG policy loss and target updates, config validation."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import rlax

from actorq.agents.d4pg import config as config_lib
from actorq.agents.d4pg import learning, networks
from actorq.agents.dpg_common import learning as dpg_learning

LN2 = math.log(2.0)
ATOMS = jnp.array([0.0, 1.0, 2.0])
# Row 0: uniform target probs on shifted atoms 0.5 + 0.5 z = [0.5, 1, 1.5] -> projected
#        [1/6, 2/3, 1/6]; online probs [1/4, 1/2, 1/4]: CE = (4/3) ln 2.
# Row 1: shifted atoms 2 + z = [2, 3, 4] all clip to vmax -> [0, 0, 1];
#        online probs [1/4, 1/4, 1/2]: CE = ln 2.
# Row 2: terminal (discount 0), r = 0.25 -> [0.75, 0.25, 0];
#        online probs [1/2, 1/4, 1/4]: CE = 0.75 ln 2 + 0.25 ln 4 = 1.25 ln 2.
LOGITS_TM1 = jnp.log(jnp.array([[1.0, 2.0, 1.0], [1.0, 1.0, 2.0], [2.0, 1.0, 1.0]]))
R_T = jnp.array([0.5, 2.0, 0.25])
DISCOUNT_T = jnp.array([0.5, 1.0, 0.0])
LOGITS_T = jnp.zeros((3, 3))
EXPECTED_ROWS = np.array([4.0 / 3.0, 1.0, 1.25]) * LN2


def test_categorical_projection_hand_computed():
  probs = jnp.full((3,), 1.0 / 3.0)
  projected = jax.vmap(rlax.categorical_l2_project, in_axes=(0, None, None))(
      R_T[:, None] + DISCOUNT_T[:, None] * ATOMS[None], probs, ATOMS)
  np.testing.assert_allclose(projected, [[1 / 6, 2 / 3, 1 / 6], [0, 0, 1], [0.75, 0.25, 0]],
                             atol=1e-6)


def test_d4pg_critic_loss_hand_computed():
  loss = learning.d4pg_critic_loss(LOGITS_TM1, R_T, DISCOUNT_T, LOGITS_T, ATOMS)
  assert float(loss) == pytest.approx(EXPECTED_ROWS.mean(), rel=1e-5)  # (43/36) ln 2


def test_d4pg_critic_loss_no_gradient_into_target():
  g_t = jax.grad(lambda lt: learning.d4pg_critic_loss(LOGITS_TM1, R_T, DISCOUNT_T, lt, ATOMS))(
      LOGITS_T)
  np.testing.assert_array_equal(g_t, 0.0)
  # Gradient w.r.t. the online logits: (softmax - target) / B.
  g = jax.grad(lambda l: learning.d4pg_critic_loss(l, R_T, DISCOUNT_T, LOGITS_T, ATOMS))(
      LOGITS_TM1)
  target = np.array([[1 / 6, 2 / 3, 1 / 6], [0, 0, 1], [0.75, 0.25, 0]])
  np.testing.assert_allclose(g, (jax.nn.softmax(LOGITS_TM1) - target) / 3, atol=1e-6)


def test_d4pg_losses_jit_and_vmap():
  f = lambda *a: learning.d4pg_critic_loss(*a, atoms=ATOMS)
  jitted = jax.jit(f)(LOGITS_TM1, R_T, DISCOUNT_T, LOGITS_T)
  assert float(jitted) == pytest.approx(EXPECTED_ROWS.mean(), rel=1e-5)
  # vmap over an outer axis of batches of one row each: the per-row losses.
  per_row = jax.vmap(f)(LOGITS_TM1[:, None], R_T[:, None], DISCOUNT_T[:, None], LOGITS_T[:, None])
  np.testing.assert_allclose(per_row, EXPECTED_ROWS, rtol=1e-5)
  q = jax.jit(learning.categorical_q_value)(LOGITS_TM1, ATOMS)
  np.testing.assert_allclose(q, [1.0, 1.25, 0.75], rtol=1e-6)


def test_d4pg_loss_shape_errors():
  with pytest.raises(ValueError, match="atoms"):
    learning.d4pg_critic_loss(LOGITS_TM1, R_T, DISCOUNT_T, LOGITS_T, jnp.zeros(4))
  with pytest.raises(ValueError, match="r_t and discount_t"):
    learning.d4pg_critic_loss(LOGITS_TM1, R_T[:2], DISCOUNT_T, LOGITS_T, ATOMS)
  with pytest.raises(ValueError, match="logits"):
    learning.d4pg_critic_loss(LOGITS_TM1, R_T, DISCOUNT_T, LOGITS_T[:, :2], ATOMS)


def test_dpg_policy_loss_value_gradient_clipping_jit_vmap():
  a = jnp.array([[0.1, -0.2], [0.0, 0.5]])
  dqda = jnp.array([[3.0, 4.0], [0.0, 0.0]])
  # 0.5 * |dqda|^2 per sample: [12.5, 0] -> mean 6.25.
  assert float(dpg_learning.dpg_policy_loss(a, dqda)) == pytest.approx(6.25)
  assert float(jax.jit(dpg_learning.dpg_policy_loss)(a, dqda)) == pytest.approx(6.25)
  # Clipped to norm 1: [0.6, 0.8] -> 0.5 per sample.
  assert float(dpg_learning.dpg_policy_loss(a, dqda, 1.0)) == pytest.approx(0.25)
  # The gradient w.r.t. the action is -dqda / B (ascent on Q).
  g = jax.grad(lambda x: dpg_learning.dpg_policy_loss(x, dqda))(a)
  np.testing.assert_allclose(g, -dqda / 2)
  per = jax.vmap(dpg_learning.dpg_policy_loss)(a[:, None], dqda[:, None])
  np.testing.assert_allclose(per, [12.5, 0.0])
  with pytest.raises(ValueError, match="B, A"):
    dpg_learning.dpg_policy_loss(a[0], dqda[0])


def test_target_update_periodic_exact_and_soft():
  online, target = {"w": jnp.array([1.0, 3.0])}, {"w": jnp.array([0.0, 0.0])}
  upd = jax.jit(lambda s: dpg_learning.target_update(online, target, s, 3, 1.0))
  for step in range(1, 10):
    expected = online if step % 3 == 0 else target
    np.testing.assert_array_equal(upd(jnp.int32(step))["w"], expected["w"])
  soft = dpg_learning.target_update(online, target, jnp.int32(7), 1, 0.25)
  np.testing.assert_allclose(soft["w"], [0.25, 0.75])
  with pytest.raises(ValueError, match="tau"):
    dpg_learning.target_update(online, target, jnp.int32(1), 1, 0.0)
  with pytest.raises(ValueError, match="period"):
    dpg_learning.target_update(online, target, jnp.int32(1), 0, 1.0)


def test_config_validation_and_atoms():
  with pytest.raises(ValueError, match="vmin < vmax"):
    config_lib.D4PGConfig(vmin=1.0, vmax=1.0)
  with pytest.raises(ValueError, match="num_atoms"):
    config_lib.D4PGConfig(num_atoms=1)
  with pytest.raises(ValueError, match="target_update_tau"):
    config_lib.D4PGConfig(target_update_tau=1.5)
  np.testing.assert_allclose(networks.atoms(5, -2.0, 2.0), [-2, -1, 0, 1, 2])
