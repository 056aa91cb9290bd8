"""D4PG learner: exact periodic target copies, policy-only
variables for actors, save/restore; and a seeded short learning run."""

import jax
import numpy as np
import pytest
import reverb
from acme import specs, types

from actorq.agents.d4pg import builder as builder_lib
from actorq.agents.d4pg import config as config_lib
from actorq.launch import experiment, local
from actorq.testing import runs

OBS, ACT = 3, 1
ENV_SPEC = specs.EnvironmentSpec(
    specs.Array((OBS,), np.float32), specs.BoundedArray((ACT,), np.float32, 0.0, 10.0),
    specs.Array((), np.float32), specs.BoundedArray((), np.float32, 0.0, 1.0))


def _batches(seed=0, batch=16):
  rng = np.random.default_rng(seed)
  while True:
    t = types.Transition(
        observation=rng.normal(size=(batch, OBS)).astype(np.float32),
        action=rng.uniform(0, 10, size=(batch, ACT)).astype(np.float32),
        reward=rng.uniform(0, 1, size=batch).astype(np.float32),
        discount=np.ones(batch, np.float32),
        next_observation=rng.normal(size=(batch, OBS)).astype(np.float32), extras=())
    yield reverb.ReplaySample(info=None, data=t)


def _learner(period=3, tau=1.0):
  cfg = config_lib.D4PGConfig(policy_hidden_sizes=(8,), critic_hidden_sizes=(8,), num_atoms=11,
                              vmin=0.0, vmax=10.0, target_update_period=period,
                              target_update_tau=tau, batch_size=16)
  b = builder_lib.D4PGBuilder(cfg)
  nets = b.make_networks(ENV_SPEC)
  return b.make_learner(jax.random.PRNGKey(0), nets, _batches(), lambda label: None, ENV_SPEC)


def _equal(a, b):
  return all(np.array_equal(x, y) for x, y in
             zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)))


def test_periodic_target_copy_is_exact_and_variables_are_policy_only():
  learner = _learner(period=3)
  for step in range(1, 8):
    learner.step()
    policy, critic, t_policy, t_critic = learner.get_variables(
        ["policy", "critic", "target_policy", "target_critic"])
    assert learner.step_count == step
    copied = step % 3 == 0
    assert _equal(policy, t_policy) == copied and _equal(critic, t_critic) == copied
  params, version = learner.get_variables(["policy", "version"])
  assert version == 7 and sorted(params) == ["dense_0", "dense_1"]  # the NetworkSpec layers
  assert params["dense_1"]["w"].shape == (8, ACT)


def test_soft_target_update_moves_a_fraction():
  learner = _learner(period=1, tau=0.5)
  before = learner.get_variables(["target_critic"])[0]
  learner.step()
  critic, after = learner.get_variables(["critic", "target_critic"])
  for c, b, a in zip(*(jax.tree_util.tree_leaves(x) for x in (critic, before, after))):
    np.testing.assert_allclose(a, 0.5 * c + 0.5 * b, rtol=1e-5, atol=1e-7)


def test_save_restore_roundtrip():
  learner = _learner()
  learner.step()
  saved = learner.save()
  learner.step()
  learner.step()
  learner.restore(saved)
  assert learner.step_count == 1
  assert _equal(learner.get_variables(["policy"])[0], saved.policy_params)


# Small, fast settings for the learning test (the README's runs use the defaults).
LEARNING_TEST_CONFIG = dict(policy_hidden_sizes=(64, 64), critic_hidden_sizes=(64, 64),
                            batch_size=64, samples_per_insert=64.0, min_replay_size=1_000,
                            critic_layer_norm=True, policy_output_init_scale=1e-4)


@pytest.mark.slow
def test_d4pg_learns_cartpole_balance_seeded():
  """15k actor steps on dmc:cartpole-balance, seed 0, one greedy episode every 2.5k, with
  Acme's LayerNorm critic and near-zero policy head (the config above; with the plain
  ReLU critic this run ends at 392).

  Reference returns: uniform random actions ~331, always-zero action ~755 (5 episodes).
  Deterministic on one code path, but at 15k steps the run is on the steep part of its
  curve, so the final return is a wide draw across CPU code paths (jax 0.4.23, AMD EPYC
  25/17): 130, 353, 302, 344, 804, 898 at 2.5k..15k steps as compiled for the CPU;
  129, 390, 320, 204, 397, 543 under XLA_FLAGS=--xla_backend_extra_options=
  -force-vector-width=8; 129, 427, 386, 483, 396, 981 under -vectorize-loops=false (the
  reproducibility guide's other code paths; 600 failed the first of these). So the
  threshold asks what holds on every path measured: the final return is well above random
  actions and above the first evaluation by 300. A second, shorter run must retrace the
  first (on any one path).
  """
  config = experiment.ExperimentConfig(
      builder_lib.D4PGBuilder(config_lib.D4PGConfig(**LEARNING_TEST_CONFIG)),
      "dmc:cartpole-balance", 15_000, seed=0, eval_every=2_500, eval_episodes=1)
  result = local.run(config)
  first = result.evaluations[0]["episode_return"]
  assert result.final_eval_return >= 450.0, result.evaluations
  assert result.final_eval_return >= first + 300.0, result.evaluations
  # The first evaluation (2.5k steps, 1.5k of them learning) retraced by a second run.
  runs.assert_prefix_reproduces(config, result, fraction=1 / 6)