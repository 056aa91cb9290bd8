"""Independent DQN (agents/idqn): each agent's n-step transitions end with its own episode
end (termination: discount 0, truncation: kept), hand-computed on the scripted two-agent
environment; discrete actions only; a run repeats itself under a seed."""
import jax
import numpy as np
import pytest

from actorq import core
from actorq.agents import idqn
from actorq.components.acting import actors
from actorq.components.acting import multi_agent as ma_loop
from actorq.components.acting import variable_client as vc
from actorq.components.envs import multi_agent as ma_env
from actorq.components.replay import local_replay
from actorq.launch import experiment
from actorq.launch import local
from actorq.testing import fakes


def test_each_agents_n_step_transitions_end_with_its_own_episode_end():
  g_ = 0.5
  config = idqn.IDQNConfig(n_step=2, discount=g_, hidden_sizes=(8,))
  builder = idqn.IDQNBuilder(config)
  env = ma_env.ParallelEnvironment(fakes.ScriptedParallelEnv(), seed=7)
  (group,) = builder.make_groups(env)
  gb = builder.group_builder(group)
  assert gb.config.replay_table_name == "idqn_transitions"
  spec = group.environment_spec
  networks = gb.make_networks(spec)
  params = networks.network.init(jax.random.PRNGKey(0), np.zeros((1, 5), np.float32))
  policy = gb.make_policy(networks, spec)
  client = local_replay.LocalReplayClient(gb.make_replay_tables(spec, policy), seed=0)
  adder = gb.make_batched_adder(client, spec, policy, 2)
  server = vc.PolicyServer(fakes.FixedPolicySource(params), networks.spec)
  actor = actors.batched(gb.make_actor(jax.random.PRNGKey(1), policy, spec, server), adder,
                         spec.actions.generate_value())
  loop = ma_loop.MultiAgentLoop([env], [group], [actor])
  loop.run(num_steps=3)  # one episode: a terminates at t = 2, b is truncated at t = 3
  assert loop.group_steps == [5]  # a: 2 agent steps, b: 3
  obs, action, reward, discount, next_obs = client.state()["tables"]["idqn_transitions"][
      "columns"][:5]
  # Written as they complete: a's two at t = 2 (its end), then b's three: at t = 3 b's
  # window from t = 1 completes, then its end closes the rest.
  assert obs[:, 1].tolist() == [0, 0, 1, 1, 1] and obs[:, 0].tolist() == [0, 1, 0, 1, 2]
  np.testing.assert_array_equal(obs[:, 3:], [[1, 0], [1, 0], [0, 1], [0, 1], [0, 1]])
  a0, a1, b0, b1, b2 = action.tolist()
  r_a, r_b = [1.0 + a0, 1.0 + a1], [10.0 + b0, 20.0 + b1, 30.0 + b2]
  np.testing.assert_allclose(reward, [
      r_a[0] + g_ * r_a[1], r_a[1],                      # a: m = 2 from s_0, 1 from s_1
      r_b[0] + g_ * r_b[1], r_b[1] + g_ * r_b[2], r_b[2]], rtol=1e-6)
  # discount = g^(m-1) d_t ... d_(t+m-1): a's termination zeroes both of a's; b's
  # truncation keeps d = 1 (its last transition bootstraps from V(o_3) with discount 1).
  np.testing.assert_allclose(discount, [0.0, 0.0, g_, g_, 1.0])
  assert next_obs[:, 0].tolist() == [2, 2, 2, 3, 3]


def test_independent_dqn_refuses_continuous_actions_in_one_line():
  env = ma_env.make_multi_agent_environment("pz:mpe2/simple_spread_v3",
                                            continuous_actions=True)
  builder = idqn.IDQNBuilder(idqn.IDQNConfig())
  (group,) = builder.make_groups(env)
  with pytest.raises(core.UnsupportedEnvironmentError) as e:
    builder.group_builder(group).make_networks(group.environment_spec)
  assert "\n" not in str(e.value)
  env.close()


def test_an_idqn_run_repeats_itself(monkeypatch):
  env_id = fakes.install_scripted_pz(monkeypatch)

  def run():
    config = idqn.IDQNConfig(hidden_sizes=(8,), min_replay_size=10, batch_size=8,
                             samples_per_insert=8.0, share_parameters=False)
    return local.run(experiment.ExperimentConfig(
        builder=idqn.IDQNBuilder(config), env_id=env_id,
        num_steps=30, eval_every=30, eval_episodes=2, seed=1))

  first, again = run(), run()
  # Each agent's learner starts once it has taken 10 transitions and its table holds 10
  # (transitions of a 2- or 3-step episode are all written at its end: n_step 3), then
  # takes one step per agent transition (8 samples per insert, batch 8), counting from
  # the step before the start. a: 2 transitions per 3 environment steps; its 10th comes at
  # its 5th episode's end (table 10): start at 9, 20 - 9 = 11 steps by the end. b: at its
  # 10th transition the table holds 9 (3 episodes); its 4th episode's end (12 transitions)
  # starts it at 11: 30 - 11 = 19 steps.
  assert first.learner_steps == 11 + 19
  assert first.params_checksum == again.params_checksum
  assert first.evaluations[-1]["episode_return"] == again.evaluations[-1]["episode_return"]
