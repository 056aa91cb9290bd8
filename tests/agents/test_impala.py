"""IMPALA: V-trace stability and episode ends (case L2), the loss on hand-computed values,
jit/vmap, and a seeded learning run in the single-process loop."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from actorq.agents import onpolicy_common as onpolicy
from actorq.agents.impala import builder as builder_lib
from actorq.agents.impala import config as config_lib
from actorq.agents.impala import learning
from actorq.launch import experiment, local
from actorq.testing import runs


def test_case_l2_extreme_log_ratios_give_finite_clipped_ratios():
  out = learning.vtrace_targets(jnp.zeros(3), jnp.ones(3), jnp.ones(3), jnp.full(3, 0.9),
                                jnp.array([89.0, -89.0, 0.0]), jnp.ones(3),
                                clip_rho_threshold=1.0, clip_pg_rho_threshold=1.0)
  # exp(-89) is a float32 denormal (2.2e-39): equal to it, or flushed to 0 on CPUs that
  # flush denormals; the atol admits both and nothing else.
  np.testing.assert_allclose(out.clipped_rho, [1.0, np.exp(-89.0), 1.0], rtol=1e-6, atol=1e-38)
  for x in out:
    assert np.all(np.isfinite(x))
  grads = jax.grad(lambda v: jnp.sum(learning.vtrace_targets(
      v, jnp.ones(3), jnp.ones(3), jnp.full(3, 0.9), jnp.array([89.0, -89.0, 0.0]),
      jnp.ones(3)).pg_advantage))(jnp.zeros(3))
  assert np.all(np.isfinite(grads))


def test_case_l2_unit_ratios_and_lambda_one_give_n_step_returns():
  gamma = 0.9
  v = jnp.array([0.5, -1.0, 2.0, 3.0, 4.0])  # V(x_0..x_4), x_4 bootstraps
  r = jnp.array([1.0, 2.0, 3.0, 4.0])
  out = learning.vtrace_targets(v[:-1], v[1:], r, jnp.full(4, gamma), jnp.zeros(4), jnp.ones(4),
                                lambda_=1.0)
  expected = [sum(gamma ** k * r[s + k] for k in range(4 - s)) + gamma ** (4 - s) * v[4]
              for s in range(4)]
  np.testing.assert_allclose(out.vs, expected, rtol=1e-5)
  # pg advantage: r_s + gamma v_{s+1} - V(x_s) with v_{s+1} the V-trace target.
  q = np.array(r) + gamma * np.append(np.array(expected)[1:], v[4])
  np.testing.assert_allclose(out.pg_advantage, q - np.array(v[:-1]), rtol=1e-5)


def test_case_l2_episode_end_inside_a_rollout_does_not_leak():
  rng = np.random.default_rng(0)
  gamma = 0.95
  # Rollout A: x0..x2 then x3 terminal (termination: d=0 on the last real transition).
  # Rollout B: y0..y3 with a bootstrap. Concatenated in acme's layout, x3 is the terminal
  # step (its transition into y0 is masked).
  va, vb = rng.normal(size=4), rng.normal(size=5)
  ra, rb = rng.normal(size=3), rng.normal(size=4)
  da, db = np.array([1.0, 1.0, 0.0]), np.ones(4)
  la, lb = rng.normal(size=3), rng.normal(size=4)
  f = lambda *xs: [jnp.asarray(x, jnp.float32) for x in xs]
  sep_a = learning.vtrace_targets(*f(va[:-1], va[1:], ra, gamma * da, la, np.ones(3)), lambda_=0.9)
  sep_b = learning.vtrace_targets(*f(vb[:-1], vb[1:], rb, gamma * db, lb, np.ones(4)), lambda_=0.9)
  v = np.concatenate([va, vb])
  r = np.concatenate([ra, [0.0], rb])
  d = np.concatenate([da, [0.0], db])
  log_rho = np.concatenate([la, [0.0], lb])  # acme's terminal step has zero extras
  start = np.zeros(9, bool); start[0] = start[4] = True
  mask = onpolicy.transition_mask(jnp.asarray(start))
  joint = learning.vtrace_targets(*f(v[:-1], v[1:], r, gamma * d, log_rho, mask), lambda_=0.9)
  for name in ("vs", "pg_advantage"):
    np.testing.assert_allclose(getattr(joint, name)[:3], getattr(sep_a, name), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(getattr(joint, name)[4:], getattr(sep_b, name), rtol=1e-5, atol=1e-6)
  # Same for a time-limit end (d = 1 on A's last transition: it bootstraps from V(x3)).
  da = np.ones(3)
  sep_a = learning.vtrace_targets(*f(va[:-1], va[1:], ra, gamma * da, la, np.ones(3)), lambda_=0.9)
  d = np.concatenate([da, [0.0], db])
  joint = learning.vtrace_targets(*f(v[:-1], v[1:], r, gamma * d, log_rho, mask), lambda_=0.9)
  np.testing.assert_allclose(joint.vs[:3], sep_a.vs, rtol=1e-5, atol=1e-6)
  with pytest.raises(ValueError, match="mask must have shape"):
    learning.vtrace_targets(*f(va[:-1], va[1:], ra, da, la, np.ones(2)))


def test_impala_loss_hand_computed_and_under_jit_vmap():
  head = onpolicy.PolicyHead(True, 2)
  outputs = jnp.zeros((2, 2))  # pi = 0.5 everywhere
  values = jnp.array([0.0, 0.0, 1.0])
  actions = jnp.array([0, 1])
  blogp = jnp.log(jnp.array([0.5, 0.25]))  # ratios 1 and 2 (clipped to 1)
  r, disc = jnp.array([1.0, 1.0]), jnp.array([0.5, 0.5])
  loss, m = learning.impala_loss(head, outputs, values, actions, blogp, r, disc, jnp.ones(2),
                                 baseline_cost=0.5, entropy_cost=0.1)
  # lambda 1, rhos clipped to 1: vs = [1 + .5 (1 + .5 * 1), 1 + .5 * 1] = [1.75, 1.5]
  vs = np.array([1.75, 1.5])
  adv = np.array([1 + 0.5 * 1.5 - 0.0, 1 + 0.5 * 1.0 - 0.0])
  pg = -np.mean(np.log(0.5) * adv)
  np.testing.assert_allclose(m["pg_loss"], pg, rtol=1e-5)
  np.testing.assert_allclose(m["baseline_loss"], np.mean(0.5 * vs ** 2), rtol=1e-5)
  np.testing.assert_allclose(loss, pg + 0.5 * np.mean(0.5 * vs ** 2) - 0.1 * np.log(2.0), rtol=1e-5)
  batched = jax.jit(jax.vmap(lambda o, v: learning.impala_loss(
      head, o, v, actions, blogp, r, disc, jnp.ones(2))[0]))(
      jnp.stack([outputs, outputs + 1.0]), jnp.stack([values, values]))
  np.testing.assert_allclose(batched[0], learning.impala_loss(
      head, outputs, values, actions, blogp, r, disc, jnp.ones(2))[0], rtol=1e-5)


@pytest.mark.slow
def test_impala_learns_cartpole_with_a_seed():
  """Default config, seed 0, 4,000 actor steps (25 learner steps). Deterministic: greedy
  return 412.6 at 4,000 steps (5 episodes; the project's 2-core machine). Single-process
  actors pull synchronously, so behaviour and target policy coincide and V-trace reduces to
  A2C's n-step returns (the same run as A2C's). The threshold leaves room for float
  differences on another CPU; a second, shorter run must retrace the first."""
  config = experiment.ExperimentConfig(
      builder_lib.IMPALABuilder(config_lib.IMPALAConfig()), "gym:CartPole-v1", 4_000, seed=0,
      eval_every=2_000, eval_episodes=5)
  result = local.run(config)
  assert result.learner_steps >= 20  # one per 8 rollouts of 20 steps
  assert result.final_eval_return >= 350, result.evaluations
  runs.assert_prefix_reproduces(config, result)


def test_learning_rate_decays_linearly_over_the_actor_steps_it_names():
  """1e-3 decayed over 6400 actor steps = 6400 / (8 * 20) = 40 learner steps:
  1e-3 at step 0, 5e-4 at 20, 0 from 40 on; None keeps it constant."""
  sched = onpolicy.learning_rate_schedule(
      config_lib.IMPALAConfig(learning_rate=1e-3, learning_rate_decay_steps=6_400))
  np.testing.assert_allclose([float(sched(s)) for s in (0, 20, 40, 80)],
                             [1e-3, 5e-4, 0.0, 0.0], atol=1e-9)
  assert onpolicy.learning_rate_schedule(config_lib.IMPALAConfig()) == 1e-3
  with pytest.raises(ValueError, match="learning_rate_decay_steps"):
    config_lib.IMPALAConfig(learning_rate_decay_steps=0)


def test_impala_builder_fits_the_distributed_launcher():
  """The launcher's calls on a builder: the queue under `rate_limited=True`, and the
  learner steps owed counted in rollouts written (batch_size 8 per learner step)."""
  from acme import specs as acme_specs
  from actorq import core
  builder = builder_lib.IMPALABuilder(config_lib.IMPALAConfig())
  env_spec = acme_specs.EnvironmentSpec(
      observations=acme_specs.Array((4,), np.float32),
      actions=acme_specs.DiscreteArray(2),
      rewards=acme_specs.Array((), np.float32),
      discounts=acme_specs.BoundedArray((), np.float32, 0.0, 1.0))
  tables = builder.make_replay_tables(env_spec, None, rate_limited=True)
  assert [t.name for t in tables] == ["impala_rollouts"]
  assert builder.learner_steps_owed(core.ReplayProgress(actor_steps=5_000, items_written=250)) == 31
  assert builder.learner_steps_owed(core.ReplayProgress(actor_steps=100, items_written=7)) == 0


@pytest.mark.isolated  # Launchpad nodes as threads of the test process: run in a child
@pytest.mark.slow
def test_impala_program_with_two_actors_under_test_mt(tmp_path):
  """IMPALA as a Launchpad program (threads): two actors feed the rollout queue, the
  learner steps on their rollouts (clipped importance ratios in (0, 1], finite losses),
  and the actors act with updated policies. (No upper bound on learner steps from the
  counter: actors and learner keep going between the limit and their stop, and steps
  counted then are dropped.)"""
  import csv
  from actorq.launch import distributed
  builder = builder_lib.IMPALABuilder(config_lib.IMPALAConfig())
  config = experiment.ExperimentConfig(builder, "gym:CartPole-v1", num_steps=2_000,
                                       logdir=str(tmp_path), eval_every=500, eval_episodes=1)
  result = distributed.launch(distributed.make_program(config, num_actors=2), "test_mt")
  assert (result.exit_code, result.reason) == (0, "finished")
  actor_steps, learner_steps = result.counts["actor_steps"], result.counts["learner_steps"]
  assert actor_steps >= 2_000 and learner_steps >= 5
  with open(tmp_path / "learner.csv", encoding="utf-8") as f:
    learner_rows = list(csv.DictReader(f))
  rho = np.array([float(r["mean_clipped_rho"]) for r in learner_rows])
  assert learner_rows and np.all((rho > 0) & (rho <= 1.0 + 1e-6))
  assert np.all(np.isfinite([float(r["loss"]) for r in learner_rows]))
  for i in range(2):
    with open(tmp_path / f"actor_{i}.csv", encoding="utf-8") as f:
      rows = list(csv.DictReader(f))
    assert rows and max(int(r["policy_version"]) for r in rows) > 0
  # Evaluations are every 500 actor steps (summed over actors); once the queue (64
  # rollouts, 1,280 actor steps) is full the actors wait for the learner, so a later one
  # acts with an updated policy.
  assert result.evaluations and result.evaluations[0]["actor_steps"] >= 500
  assert max(e["policy_version"] for e in result.evaluations) >= 1
