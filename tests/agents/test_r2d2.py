"""R2D2 (Kapturowski et al. 2019): value rescaling, the n-step transformed double-Q
target, burn-in and padding masks, the eta-mixed priority (hand-computed values, pure
functions under jit and vmap), the recurrent runtime's parity with the Haiku LSTM, the
sequence adder's layout and a builder/actor/learner smoke test, config errors."""
import dm_env
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import rlax

from actorq.agents.r2d2 import builder as builder_lib
from actorq.agents.r2d2 import config as config_lib
from actorq.agents.r2d2 import learning
from actorq.agents.r2d2 import networks as networks_lib
from actorq.components.acting import loop
from actorq.components.acting import variable_client as vc
from actorq.components.envs import environments
from actorq.components.replay import local_replay
from actorq.quantization import mixed
from actorq.quantization import payload as payload_lib
from actorq.quantization import runtimes

EPS = 1e-3


# --- value rescaling ----------------------------------------------------------------

def test_value_rescaling_known_points_and_round_trip():
  h = jax.jit(learning.value_rescale)
  # h(x) = sign(x)(sqrt(|x| + 1) - 1) + eps x
  np.testing.assert_allclose(h(jnp.array([0.0, 3.0, -8.0, 99.0])),
                             [0.0, 1.0 + 0.003, -(2.0 + 0.008), 9.0 + 0.099], rtol=1e-6)
  x = jnp.concatenate([-jnp.logspace(-3, 4, 50), jnp.zeros(1), jnp.logspace(-3, 4, 50)])
  back = jax.jit(jax.vmap(learning.value_rescale_inverse))(jax.vmap(learning.value_rescale)(x))
  np.testing.assert_allclose(back, x, rtol=2e-4, atol=2e-4)
  # and the other way round, h(h^-1(y)) = y
  y = jnp.linspace(-50.0, 50.0, 101)
  np.testing.assert_allclose(learning.value_rescale(learning.value_rescale_inverse(y)), y,
                             rtol=1e-5, atol=1e-4)
  # h^-1 at the known points (float32: rlax's formula subtracts 1 / (2 eps) = 500, so its
  # absolute error is ~500 * 2^-24 * a few, 2.4e-4 at 1.003)
  np.testing.assert_allclose(learning.value_rescale_inverse(jnp.array([1.003, -2.008])),
                             [3.0, -8.0], atol=5e-4)


# --- the n-step transformed double-Q target -------------------------------------------

def _tiny_sequence():
  """4 transitions, 2 actions; transition 2 terminates (d = 0), transition 3 is acme's
  terminal step (invalid). Only the bootstrap of t = 0 (from s_2, index 1) survives."""
  q_t_selector = jnp.array([[0.0, 1.0], [1.0, 0.0], [0.0, 1.0], [1.0, 0.0]])
  # index 1: the selector picks action 0, h(8) = 2.008; the target net's max would be 100.
  q_t_value = jnp.array([[7.0, 7.0], [2.008, 100.0], [50.0, 50.0], [60.0, 60.0]])
  r_t = jnp.array([9.75, 6.5, 3.0, 0.0])
  discount_t = jnp.array([0.5, 0.5, 0.0, 0.0])
  valid_t = jnp.array([1.0, 1.0, 1.0, 0.0])
  return q_t_value, q_t_selector, r_t, discount_t, valid_t


def test_transformed_n_step_double_q_target_hand_computed():
  q_t_value, q_t_selector, r_t, discount_t, valid_t = _tiny_sequence()
  y = jax.jit(learning.transformed_n_step_double_q_targets, static_argnums=(5,))(
      q_t_value, q_t_selector, r_t, discount_t, valid_t, 2)
  # t=0: G = 9.75 + 0.5 * 6.5 + 0.25 * h^-1(2.008) = 9.75 + 3.25 + 2 = 15 -> h = 3.015
  # t=1: G = 6.5 + 0.5 * 3 + 0.5 * 0 * (...) = 8 -> 2.008
  # t=2: one step left in the episode: G = 3 + 0 * (...) = 3 -> 1.003
  np.testing.assert_allclose(y[:3], [3.015, 2.008, 1.003], rtol=1e-4)
  # n = 1: t=0: G = 9.75 + 0.5 h^-1(Q_target(s_1, argmax Q(s_1))) = 9.75 + 0.5 h^-1(7)
  y1 = learning.transformed_n_step_double_q_targets(q_t_value, q_t_selector, r_t, discount_t,
                                                    valid_t, 1)
  g0 = 9.75 + 0.5 * float(learning.value_rescale_inverse(jnp.float32(7.0)))
  np.testing.assert_allclose(y1[0], np.sign(g0) * (np.sqrt(abs(g0) + 1) - 1) + EPS * g0,
                             rtol=1e-5)


def test_time_limit_end_bootstraps_from_the_final_observation():
  # Transition 1 is the last real one and a time-limit end (discount 0.5 > 0); transitions
  # 2, 3 are acme's terminal step and padding (zeros). n = 3 must stop at transition 1 and
  # bootstrap from s_2 (index 1), not run into the zero step (which would drop it).
  q_t_value = jnp.array([[0.0, 0.0], [2.008, 2.008], [0.0, 0.0], [0.0, 0.0]])
  q_t_selector = jnp.zeros((4, 2))
  r_t = jnp.array([1.0, 2.0, 0.0, 0.0])
  discount_t = jnp.array([0.5, 0.5, 0.0, 0.0])
  valid_t = jnp.array([1.0, 1.0, 0.0, 0.0])
  y = learning.transformed_n_step_double_q_targets(q_t_value, q_t_selector, r_t, discount_t,
                                                   valid_t, 3)
  # t=0: G = 1 + 0.5 * 2 + 0.25 * 8 = 4;  t=1: G = 2 + 0.5 * 8 = 6
  np.testing.assert_allclose(y[:2], [np.sqrt(5.0) - 1 + 0.004, np.sqrt(7.0) - 1 + 0.006],
                             rtol=1e-5)


@pytest.mark.parametrize("n", [1, 3])
def test_targets_equal_rlax_transformed_n_step_q_learning_without_episode_end(n):
  rng = np.random.default_rng(n)
  t, a = 7, 3
  q_tm1 = rng.normal(size=(t, a)).astype(np.float32)
  q_t_value = rng.normal(size=(t, a)).astype(np.float32)
  q_t_selector = rng.normal(size=(t, a)).astype(np.float32)
  a_tm1 = rng.integers(a, size=t)
  r_t = rng.normal(size=t).astype(np.float32)
  discount_t = np.full(t, 0.9, np.float32)
  ours = learning.transformed_n_step_double_q_targets(q_t_value, q_t_selector, r_t,
                                                      discount_t, np.ones(t), n)
  td = rlax.transformed_n_step_q_learning(q_tm1, a_tm1, q_t_value, jnp.argmax(q_t_selector, -1),
                                          r_t, discount_t, n,
                                          tx_pair=rlax.SIGNED_HYPERBOLIC_PAIR)
  np.testing.assert_allclose(ours, td + q_tm1[np.arange(t), a_tm1], rtol=1e-5, atol=1e-6)


# --- priorities ------------------------------------------------------------------------

def test_eta_mixed_priority_hand_computed():
  abs_td = jnp.array([0.5, -2.0, 1.0, 4.0])
  mask = jnp.array([1.0, 1.0, 1.0, 0.0])  # the 4.0 is padding: ignored
  # max 2, mean (0.5 + 2 + 1) / 3 = 7/6: 0.9 * 2 + 0.1 * 7/6 = 1.916667
  assert float(learning.sequence_priority(abs_td, mask, 0.9)) == pytest.approx(1.8 + 0.7 / 6,
                                                                                rel=1e-6)
  batched = jax.jit(jax.vmap(learning.sequence_priority, in_axes=(0, 0, None)))
  out = batched(jnp.stack([abs_td, abs_td]), jnp.stack([mask, jnp.zeros(4)]), 0.9)
  np.testing.assert_allclose(out, [1.8 + 0.7 / 6, 0.0], rtol=1e-6)
  assert float(learning.sequence_priority(abs_td, mask, 1.0)) == pytest.approx(2.0)
  assert float(learning.sequence_priority(abs_td, mask, 0.0)) == pytest.approx(7 / 6)


# --- burn-in and padding masks ------------------------------------------------------------

def test_burn_in_mask():
  np.testing.assert_array_equal(learning.burn_in_mask(jnp.array([1, 1, 1, 1, 0]), 2),
                                [0, 0, 1, 1, 0])
  np.testing.assert_array_equal(learning.burn_in_mask(jnp.ones(3), 0), [1, 1, 1])


def _loss_inputs():
  q_t_value, q_t_selector, r_t, discount_t, valid_t = _tiny_sequence()
  q_tm1 = jnp.array([[0.0, 0.0], [0.008, 1.0], [0.003, 0.5], [3.0, 3.0]])
  a_tm1 = jnp.array([1, 0, 0, 1])
  return q_tm1, a_tm1, r_t, discount_t, q_t_value, q_t_selector, valid_t


def test_sequence_loss_hand_computed_with_burn_in_and_padding():
  q_tm1, a_tm1, r_t, discount_t, q_t_value, q_t_selector, valid_t = _loss_inputs()
  fn = jax.jit(learning.r2d2_sequence_loss, static_argnums=(7, 8))
  loss, priority, td = fn(q_tm1, a_tm1, r_t, discount_t, q_t_value, q_t_selector, valid_t,
                          1, 2)
  # targets [3.015, 2.008, 1.003, -]; burn-in masks t=0, padding t=3:
  # td_1 = 2.008 - 0.008 = 2, td_2 = 1.003 - 0.003 = 1
  np.testing.assert_allclose(td, [0.0, 2.0, 1.0, 0.0], atol=1e-5)
  assert float(loss) == pytest.approx(0.5 * (4.0 + 1.0) / 2, rel=1e-5)
  assert float(priority) == pytest.approx(0.9 * 2.0 + 0.1 * 1.5, rel=1e-5)
  # No gradient reaches Q at burn-in or padded rows.
  grad = jax.grad(lambda q: fn(q, a_tm1, r_t, discount_t, q_t_value, q_t_selector, valid_t,
                               1, 2)[0])(q_tm1)
  np.testing.assert_array_equal(grad[0], [0.0, 0.0])
  np.testing.assert_array_equal(grad[3], [0.0, 0.0])
  np.testing.assert_allclose(grad[1], [-2.0 / 2, 0.0], atol=1e-5)  # d/dq 0.5 td^2 / 2
  # Rewards and actions of the burn-in and padded rows do not change the loss.
  loss2, _, _ = fn(q_tm1, a_tm1.at[0].set(0).at[3].set(0), r_t.at[3].set(50.0), discount_t,
                   q_t_value, q_t_selector, valid_t, 1, 2)
  assert float(loss2) == pytest.approx(float(loss), rel=1e-6)
  # Under vmap over a batch of two sequences (the second with no burn-in effect on t=0).
  stack = lambda x: jnp.stack([x, x])
  batched = jax.jit(jax.vmap(learning.r2d2_sequence_loss,
                             in_axes=(0, 0, 0, 0, 0, 0, 0, None, None)), static_argnums=(7, 8))
  losses, priorities, _ = batched(*map(stack, _loss_inputs()), 1, 2)
  np.testing.assert_allclose(losses, [1.25, 1.25], rtol=1e-5)
  np.testing.assert_allclose(priorities, [1.95, 1.95], rtol=1e-5)


def _cartpole_po_spec():
  env = environments.make_environment("gym:CartPole-v1-po", seed=0)
  try:
    return environments.environment_spec(env)
  finally:
    env.close()


def test_burn_in_unroll_passes_no_gradient_to_the_stored_state():
  spec = _cartpole_po_spec()
  nets = networks_lib.make_networks(spec, (8,), 4, dueling=True)
  params = nets.init(jax.random.PRNGKey(0))
  obs = jax.random.normal(jax.random.PRNGKey(1), (6, 2, 2))
  state = networks_lib.hk.LSTMState(hidden=jnp.full((2, 4), 0.3), cell=jnp.full((2, 4), -0.2))

  def total(h, burn, x=obs):
    s = state._replace(hidden=h)
    return jnp.sum(learning.unroll_with_burn_in(nets, params, x, s, burn)[burn:])

  assert float(jnp.abs(jax.grad(total)(state.hidden, 0)).sum()) > 0
  np.testing.assert_array_equal(jax.grad(total)(state.hidden, 3), np.zeros((2, 4)))
  # nor to the burn-in observations; values equal the plain unroll's.
  g_obs = jax.grad(lambda x: total(state.hidden, 3, x))(obs)
  np.testing.assert_array_equal(g_obs[:3], np.zeros((3, 2, 2)))
  assert float(jnp.abs(g_obs[3:]).sum()) > 0
  np.testing.assert_allclose(learning.unroll_with_burn_in(nets, params, obs, state, 3),
                             nets.unroll.apply(params, obs, state)[0], rtol=1e-6, atol=1e-6)


# --- the environment, the runtimes ------------------------------------------------------------

def test_cartpole_po_hides_the_velocities():
  full = environments.make_environment("gym:CartPole-v1", seed=3)
  po = environments.make_environment("gym:CartPole-v1-po", seed=3)
  assert po.observation_spec().shape == (2,)
  np.testing.assert_array_equal(po.reset().observation, full.reset().observation[[0, 2]])
  np.testing.assert_array_equal(po.step(1).observation, full.step(1).observation[[0, 2]])
  full.close()
  po.close()


def test_recurrent_runtime_matches_the_haiku_lstm_fp32_and_int8():
  spec = _cartpole_po_spec()
  nets = networks_lib.make_networks(spec, (16,), 8, dueling=True)
  params = nets.init(jax.random.PRNGKey(2))
  obs = np.asarray(jax.random.normal(jax.random.PRNGKey(3), (5, 1, 2)))
  ref = np.asarray(nets.unroll.apply(params, obs, nets.initial_state(1))[0])
  for precision, tol in (("fp32", 1e-5), ("int8", 0.05)):
    rt = runtimes.make_runtime(precision, nets.spec)
    rt.load(payload_lib.make_payload(params, nets.spec, rt.payload_precision, 7))
    state, outs = rt.initial_state(1), []
    for t in range(5):
      out, state = rt.step(obs[t], state)
      outs.append(out)
    err = np.abs(np.stack(outs) - ref).max()
    assert err <= tol * np.abs(ref).max(), (precision, err)
    assert rt.version == 7 and rt.precision == precision
  int8 = payload_lib.make_payload(params, nets.spec, "int8", 0)
  assert int8.layers["lstm/linear"]["w"].dtype == np.int8
  assert int8.layers["lstm/linear"]["w"].shape == (16 + 8, 32)


def test_recurrent_runtime_runs_a_per_layer_policy_part_by_part():
  """A "mixed:..." name gives each of torso, gate matmul and head its own precision: all
  int8 labels compute what the int8 runtime does, all fp32 what the fp32 one does, and
  "int8,int8,fp32" runs the head in float32 (its outputs are the float head applied to the
  int8 parts' hidden state, and its payload ships the head's float32 weights)."""
  spec = _cartpole_po_spec()
  nets = networks_lib.make_networks(spec, (16,), 8, dueling=True)
  params = jax.tree_util.tree_map(np.asarray, nets.init(jax.random.PRNGKey(2)))
  obs = np.asarray(jax.random.normal(jax.random.PRNGKey(3), (5, 3, 2)))

  def unroll(precision):
    rt = runtimes.make_runtime(precision, nets.spec)
    if precision.startswith("mixed:"):
      payload = mixed.make_payload(params, nets.spec, mixed.policy_of(precision, nets.spec), 4)
    else:
      payload = payload_lib.make_payload(params, nets.spec, rt.payload_precision, 4)
    rt.load(payload)
    state, outs, hiddens = rt.initial_state(3), [], []
    for t in range(5):
      out, state = rt.step(obs[t], state)
      outs.append(out)
      hiddens.append(state[0])
    assert rt.precision == precision and rt.payload_precision == precision and rt.version == 4
    return np.stack(outs), np.stack(hiddens), payload

  int8, int8_h, _ = unroll("int8")
  fp32, _, _ = unroll("fp32")
  all_int8, all_int8_h, _ = unroll("mixed:int8,int8,int8")
  all_fp32, _, _ = unroll("mixed:fp32,fp32,fp32")
  np.testing.assert_allclose(all_int8, int8, rtol=0, atol=1e-6)
  np.testing.assert_allclose(all_int8_h, int8_h, rtol=0, atol=1e-6)
  np.testing.assert_allclose(all_fp32, fp32, rtol=0, atol=1e-5)
  float_head, float_head_h, payload = unroll("mixed:int8,int8,fp32")
  np.testing.assert_allclose(float_head_h, int8_h, rtol=0, atol=1e-6)  # same int8 parts
  head = params["head"]
  np.testing.assert_allclose(float_head, float_head_h @ head["w"] + head["b"], rtol=1e-5,
                             atol=1e-5)
  assert payload.layers["head"]["w"].dtype == np.float32 and "scale" not in payload.layers["head"]
  assert payload.layers["lstm/linear"]["w"].dtype == np.int8
  with pytest.raises(ValueError, match=r"gives 2 layer choice\(s\); the policy network has 3"):
    runtimes.make_runtime("mixed:int8,fp32", nets.spec)


# --- builder, actor, adder, learner -------------------------------------------------------------

def _small_config(**kw):
  base = dict(torso_sizes=(8,), lstm_size=4, burn_in_length=1, trace_length=2,
              sequence_period=2, n_step=1, batch_size=2, min_replay_size=1,
              max_replay_size=100, epsilon_start=0.5, epsilon_end=0.5)
  base.update(kw)
  return config_lib.R2D2Config(**base)


def test_builder_actor_resets_state_at_first_and_writes_sequences():
  spec = _cartpole_po_spec()
  builder = builder_lib.R2D2Builder(_small_config())
  nets = builder.make_networks(spec)
  policy = builder.make_policy(nets, spec)
  client = local_replay.LocalReplayClient(builder.make_replay_tables(spec, policy), seed=0)
  learner = builder.make_learner(jax.random.PRNGKey(0), nets,
                                 builder.make_dataset_iterator(client),
                                 lambda label: None, spec, client)
  server = vc.PolicyServer(learner, nets.spec)
  adder = builder.make_adder(client, spec, policy)
  actor = builder.make_actor(jax.random.PRNGKey(1), policy, spec, server, adder)
  obs = [np.array([0.1 * i, -0.05 * i], np.float32) for i in range(7)]
  actor.observe_first(dm_env.restart(obs[0]))
  states = []
  for i in range(1, 7):  # a 6-step episode ending in a termination
    states.append(actor.state)
    action = actor.select_action(obs[i - 1])
    ts = (dm_env.termination(np.float32(1.0), obs[i]) if i == 6
          else dm_env.transition(np.float32(1.0), obs[i], np.float32(1.0)))
    if i == 6:
      ts = ts._replace(discount=np.float32(0.0))
    actor.observe(action, ts)
  np.testing.assert_array_equal(states[0][0], np.zeros((1, 4)))
  assert np.abs(actor.state[0]).sum() > 0          # the state moved on ...
  actor.observe_first(dm_env.restart(obs[0]))       # ... and FIRST zeroes it
  np.testing.assert_array_equal(actor.state[0], np.zeros((1, 4)))
  np.testing.assert_array_equal(actor.state[1], np.zeros((1, 4)))
  # 6 acted steps + acme's terminal step (7 steps), L = 4, period 2: items start at steps
  # 0 and 2; at the end acme pads (period + L - 7) % period = 1 zero step, so the last
  # item is steps 4, 5, the terminal step 6 and one padding step.
  assert adder.items_written == 3
  batch = client.sample_batch(builder.replay_table_name(), 30)  # seeded, with replacement
  firsts = {}
  for k in range(30):
    firsts[int(batch.info.key[k])] = (batch.data.extras["real"][k].tolist(),
                                      batch.data.extras["core_state"]["hidden"][k, 0])
  assert sorted(firsts) == [0, 1, 2]
  assert firsts[0][0] == [1.0, 1.0, 1.0, 1.0]
  assert firsts[1][0] == [1.0, 1.0, 1.0, 1.0]   # steps 2..5
  assert firsts[2][0] == [1.0, 1.0, 0.0, 0.0]   # steps 4, 5, the terminal step, padding
  np.testing.assert_array_equal(firsts[0][1], np.zeros(4))   # stored state at step 0
  np.testing.assert_allclose(firsts[1][1], states[2][0][0])   # ... at step 2
  np.testing.assert_allclose(firsts[2][1], states[4][0][0])   # ... at step 4
  assert np.abs(firsts[2][1]).sum() > 0
  # One learner step: priorities written back (not the initial 1.0 any more).
  before = client.server_info()[builder.replay_table_name()]
  learner.step()
  assert learner.step_count == 1
  sample = client.sample_batch(builder.replay_table_name(), 3)
  assert sample.info.priority.min() >= 0 and not np.all(sample.info.priority == 1.0)
  assert before.current_size == 3
  assert builder.learner_steps_owed(
      builder_lib.core.ReplayProgress(actor_steps=10, items_written=4)) == 4 * 64 // 2


def test_evaluation_loop_resets_the_recurrent_state_every_episode():
  spec = _cartpole_po_spec()
  builder = builder_lib.R2D2Builder(_small_config())
  nets = builder.make_networks(spec)
  client = local_replay.LocalReplayClient(builder.make_replay_tables(spec), seed=0)
  learner = builder.make_learner(jax.random.PRNGKey(0), nets,
                                 builder.make_dataset_iterator(client), lambda l: None, spec,
                                 client)
  actor = builder.make_actor(jax.random.PRNGKey(1), builder.make_policy(nets, spec, True), spec,
                             vc.PolicyServer(learner, nets.spec))
  seen = []

  class Record(loop.Hook):
    def on_episode_start(self, lp, timestep):
      seen.append(np.abs(actor.state[0]).sum() + np.abs(actor.state[1]).sum())

  env = environments.make_environment("gym:CartPole-v1-po", seed=0)
  loop.ActorLoop(env, actor, hooks=[Record()], learn=False).run(num_episodes=3)
  env.close()
  assert seen == [0.0, 0.0, 0.0]


# --- config -----------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, match", [
    ({"n_step": 20}, "need n_step <= trace_length"),
    ({"sequence_period": 30}, "need sequence_period <= burn_in_length"),
    ({"burn_in_length": -1}, "R2D2Config.burn_in_length must be >= 0"),
    ({"max_priority_weight": 1.5}, "R2D2Config.max_priority_weight must be in"),
    ({"actor_precision": "int4"}, "R2D2Config.actor_precision must be one of"),
    ({"lstm_size": 0}, "R2D2Config.lstm_size must be >= 1"),
    ({"min_replay_size": 20_000}, "need min_replay_size <= max_replay_size"),
    ({"dueling": 1}, "R2D2Config.dueling must be true or false"),
])
def test_config_validation_errors(kwargs, match):
  with pytest.raises(ValueError, match=match):
    config_lib.R2D2Config(**kwargs)


def test_default_config_sequence_length():
  c = config_lib.R2D2Config()
  assert c.sequence_length == c.burn_in_length + c.trace_length + 1 == 25
