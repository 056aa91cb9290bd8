"""DQN on MinAtar: the environment declares Young and Tian 2019's network through its
observation spec's name (no branch on the environment id), the network's shapes and values
against a hand computation, B7 unchanged for other images, and the preset config file holding
the paper's hyperparameters."""
import json
import os

import jax
import numpy as np
import pytest
from acme import specs
from dm_env import specs as dm_specs

from actorq import core
from actorq.agents.dqn import config as config_lib
from actorq.agents.dqn import networks as dqn_networks
from actorq.components import config_io
from actorq.components.envs import environments, minatar
from actorq.quantization import network_spec as ns

CONFIG = os.path.join(os.path.dirname(config_lib.__file__), "configs", "minatar.json")


def _spec(shape, name, actions=6):
  return specs.EnvironmentSpec(
      observations=dm_specs.Array(shape, np.float32, name),
      actions=dm_specs.DiscreteArray(actions, np.int32, name="action"),
      rewards=dm_specs.Array((), np.float32), discounts=dm_specs.BoundedArray(
          (), np.float32, 0.0, 1.0))


def test_the_minatar_network_is_the_papers():
  assert ns.IMAGE_NETWORKS[minatar.NETWORK] is ns.minatar_cnn  # what the environment declares
  spec = ns.minatar_cnn((10, 10, 4), 6)
  assert spec.layers == (ns.Conv2D("conv_0", 16, 3, 1), ns.Flatten(),
                         ns.Dense("dense_0", 128), ns.Dense("dense_1", 6, "none"))
  assert spec.input_scale == 1.0 and spec.input_shape == (10, 10, 4)
  assert ns.smallest_input_hw(spec.layers) == (3, 3)
  with pytest.raises(ValueError) as e:
    ns.minatar_cnn((2, 2, 4), 6)
  assert str(e.value) == ("observation shape (2, 2, 4) is too small for the MinAtar network: "
                          "the smallest input it accepts is (3, 3, C)")


@pytest.mark.parametrize("game,channels", [("breakout", 4), ("seaquest", 10)])
def test_a_minatar_environment_gets_the_minatar_network(game, channels):
  env = environments.make_environment(f"minatar:{game}", seed=0)
  nets = dqn_networks.make_networks(environments.environment_spec(env), dueling=False)
  assert nets.spec == ns.minatar_cnn((10, 10, channels), 6)
  params = nets.network.init(jax.random.PRNGKey(0), np.zeros((1, 10, 10, channels), np.float32))
  shapes = {k: {n: v.shape for n, v in p.items()} for k, p in params.items()}
  # 10 - 3 + 1 = 8 per side: 8 * 8 * 16 = 1,024 features into the 128-unit layer.
  assert shapes == {"conv_0": {"w": (3, 3, channels, 16), "b": (16,)},
                    "dense_0": {"w": (1024, 128), "b": (128,)},
                    "dense_1": {"w": (128, 6), "b": (6,)}}
  # A dueling head (DQNConfig's default) adds the value output: 6 + 1.
  dueling = dqn_networks.make_networks(environments.environment_spec(env), dueling=True)
  assert dueling.spec == ns.minatar_cnn((10, 10, channels), 7)


def test_its_q_values_equal_a_hand_computed_forward_pass():
  nets = dqn_networks.make_networks(_spec((10, 10, 4), "minatar_cnn"), dueling=False)
  x = (np.random.default_rng(0).random((2, 10, 10, 4)) < 0.2).astype(np.float32)
  params = nets.network.init(jax.random.PRNGKey(1), x[:1])
  q = np.asarray(nets.network.apply(params, x))
  w, b = (np.asarray(params["conv_0"][k], np.float64) for k in ("w", "b"))
  conv = np.zeros((2, 8, 8, 16))
  for i in range(8):
    for j in range(8):  # VALID 3x3 stride 1: output (i, j) sees input rows i..i+2, cols j..j+2
      conv[:, i, j] = np.einsum("bhwc,hwco->bo", x[:, i:i + 3, j:j + 3], w) + b
  h = np.maximum(conv, 0).reshape(2, -1)  # row-major (H, W, C) flatten
  h = np.maximum(h @ np.asarray(params["dense_0"]["w"]) + np.asarray(params["dense_0"]["b"]), 0)
  expected = h @ np.asarray(params["dense_1"]["w"]) + np.asarray(params["dense_1"]["b"])
  np.testing.assert_allclose(q, expected, rtol=1e-4, atol=1e-5)


def test_other_images_keep_the_nature_cnn_and_case_b7():
  assert dqn_networks.make_networks(_spec((84, 84, 4), "observation")).spec == \
      ns.nature_cnn((84, 84, 4), 6)
  assert dqn_networks.make_networks(_spec((84, 84, 4), "pixels")).spec == \
      ns.nature_cnn((84, 84, 4), 6)
  with pytest.raises(core.UnsupportedEnvironmentError) as e:
    dqn_networks.make_networks(_spec((15, 15, 3), "observation"))
  assert str(e.value) == ("observation shape (15, 15, 3) is too small for the Nature CNN: the "
                          "smallest input it accepts is (36, 36, C)")
  with pytest.raises(core.UnsupportedEnvironmentError) as e:
    dqn_networks.make_networks(_spec((2, 2, 3), "minatar_cnn"))
  assert str(e.value) == ("observation shape (2, 2, 3) is too small for the MinAtar network: "
                          "the smallest input it accepts is (3, 3, C)")


def test_the_preset_holds_the_papers_hyperparameters():
  """Young and Tian 2019 (MinAtar's examples/dqn.py): step size 2.5e-4, batch 32, replay
  100k, target update every 1,000 updates, epsilon 1 -> 0.1 over 100k frames, gamma 0.99,
  one update every frame, learning from 5,000 frames on; plain DQN (no double Q, no
  prioritized replay, no dueling head, 1-step targets, Huber loss)."""
  with open(CONFIG, encoding="utf-8") as f:
    raw = json.load(f)
  config = config_io.from_dict(config_lib.DQNConfig, raw)
  assert (config.learning_rate, config.learning_rate_decay_steps) == (2.5e-4, None)
  assert (config.batch_size, config.max_replay_size, config.min_replay_size) == (32, 100_000, 5_000)
  assert config.batch_size / config.samples_per_insert == 1.0  # one learner step per actor step
  assert config.target_update_period == 1_000 and config.discount == 0.99
  assert (config.epsilon_start, config.epsilon_end, config.epsilon_decay_steps) == \
      (1.0, 0.1, 100_000)
  assert (config.n_step, config.double_q, config.prioritized_replay, config.dueling) == \
      (1, False, False, False)
  assert config.huber_delta == 1.0
