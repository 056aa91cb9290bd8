"""MAPPO (agents/mappo): the centralized critic's input is the global state (or the joint
observation), stored after each agent's policy input; the policy the actors run sees only
the agent's own observation and id; what cannot be built is refused in one line."""
import jax
import numpy as np
import pytest

from actorq import core
from actorq.agents import mappo
from actorq.components.acting import actors
from actorq.components.acting import multi_agent as ma_loop
from actorq.components.acting import variable_client as vc
from actorq.components.envs import multi_agent as ma_env
from actorq.components.replay import local_replay
from actorq.launch import experiment
from actorq.launch import local
from actorq.testing import fakes


def _collect(config, steps, seed=7):
  """Acts `steps` steps in one scripted environment; returns the group, its builder,
  networks, params and every rollout written (in order)."""
  builder = mappo.MAPPOBuilder(config)
  env = ma_env.ParallelEnvironment(fakes.ScriptedParallelEnv(), seed=seed)
  groups = builder.make_groups(env)
  out = []
  for g in groups:
    gb = builder.group_builder(g)
    spec = g.environment_spec
    networks = gb.make_networks(spec)
    params = networks.init(jax.random.PRNGKey(0), np.zeros(spec.observations.shape, np.float32))
    policy = gb.make_policy(networks, spec)
    client = local_replay.LocalReplayClient(gb.make_replay_tables(spec, policy), seed=0)
    adder = gb.make_batched_adder(client, spec, policy, len(g.agents))
    server = vc.PolicyServer(fakes.FixedPolicySource(params["policy"]), networks.spec)
    actor = actors.batched(gb.make_actor(jax.random.PRNGKey(1), policy, spec, server), adder,
                           spec.actions.generate_value())
    out.append([g, gb, networks, params, client, actor])
  ma_loop.MultiAgentLoop([env], groups, [o[5] for o in out]).run(num_steps=steps)
  return out


def test_the_critics_input_is_the_global_state():
  config = mappo.MAPPOConfig(rollout_length=3, batch_size=1, minibatch_size=3,
                             policy_hidden=(8,), value_hidden=(8,))
  ((group, gb, networks, params, client, _),) = _collect(config, steps=4)
  assert (group.critic_input, group.critic_size) == ("state", 2)
  assert group.environment_spec.observations.shape == (3 + 2 + 2,)
  assert gb.layout == mappo.InputLayout(3, 2, 2)
  assert networks.spec.input_shape == (5,)  # the actors' policy: [local obs, id]
  it = gb.make_dataset_iterator(client)
  b_traj, a_traj = next(it).data, next(it).data
  # Stored: [local obs (t, i, seed), one-hot id, global state (t, agents alive)].
  np.testing.assert_array_equal(b_traj.observation[0], [
      [0, 1, 7, 0, 1, 0, 2], [1, 1, 7, 0, 1, 1, 2], [2, 1, 7, 0, 1, 2, 1],
      [3, 1, 7, 0, 1, 3, 0]])
  np.testing.assert_array_equal(a_traj.observation[0, :3], [
      [0, 0, 7, 1, 0, 0, 2], [1, 0, 7, 1, 0, 1, 2], [2, 0, 7, 1, 0, 2, 1]])
  obs = np.concatenate([a_traj.observation[0], b_traj.observation[0]])
  # The value function is an MLP of [state, id] alone: the local observation does not
  # reach it, the state does.
  value = networks.value.apply(params["value"], obs)
  direct = jax.tree_util.tree_map(np.asarray, params["value"])
  x = np.concatenate([obs[:, 5:], obs[:, 3:5]], axis=1)
  for k in range(2):
    x = np.tanh(x @ direct[f"value_{k}"]["w"] + direct[f"value_{k}"]["b"]) if k < 1 else \
        x @ direct[f"value_{k}"]["w"] + direct[f"value_{k}"]["b"]
  np.testing.assert_allclose(value, x[:, 0], rtol=1e-5, atol=1e-6)
  changed_local = obs.copy()
  changed_local[:, :3] += 5.0
  np.testing.assert_array_equal(networks.value.apply(params["value"], changed_local), value)
  changed_state = obs.copy()
  changed_state[:, 5:] += 5.0
  assert not np.allclose(networks.value.apply(params["value"], changed_state), value)
  # The policy (what the actors ran) sees [local obs, id] alone.
  logits = networks.policy.apply(params["policy"], obs[:, :5])
  np.testing.assert_array_equal(networks.policy.apply(params["policy"], changed_state), logits)
  np.testing.assert_allclose(a_traj.extras["logits"][0, :2], logits[:2], rtol=1e-5, atol=1e-6)


def test_the_joint_observation_input_zeroes_agents_that_finished():
  config = mappo.MAPPOConfig(rollout_length=3, batch_size=1, minibatch_size=3,
                             policy_hidden=(8,), value_hidden=(8,), share_parameters=False,
                             critic_input="joint_observation")
  (a_part, b_part) = _collect(config, steps=3)
  group, gb = b_part[0], b_part[1]
  assert (group.name, group.id_size, group.critic_size) == ("b", 0, 6)
  assert gb.config.replay_table_name == "mappo_rollouts_b"
  (b_traj,) = [next(gb.make_dataset_iterator(b_part[4])).data]
  # b's stored observation: [b's own (3), a's (3), b's (3)]; a finished at t = 2.
  np.testing.assert_array_equal(b_traj.observation[0], [
      [0, 1, 7, 0, 0, 7, 0, 1, 7], [1, 1, 7, 1, 0, 7, 1, 1, 7], [2, 1, 7, 2, 0, 7, 2, 1, 7],
      [3, 1, 7, 0, 0, 0, 3, 1, 7]])


def test_what_cannot_be_built_is_refused_in_one_line():
  env = ma_env.ParallelEnvironment(fakes.ScriptedParallelEnv(), seed=0)
  del env._env.state_space  # pylint: disable=protected-access
  with pytest.raises(core.UnsupportedEnvironmentError,
                     match="^pz has no global state \\(no state_space\\); a centralized "
                           "critic on 'state' needs one: use critic_input joint_observation"):
    mappo.MAPPOBuilder(mappo.MAPPOConfig()).make_groups(env)
  with pytest.raises(ValueError, match="critic_input must be one of"):
    mappo.MAPPOConfig(critic_input="everything")


def test_a_mappo_run_repeats_itself(monkeypatch):
  env_id = fakes.install_scripted_pz(monkeypatch)

  def run():
    config = mappo.MAPPOConfig(rollout_length=5, batch_size=2, minibatch_size=5,
                               num_epochs=2, policy_hidden=(8,), value_hidden=(8,))
    return local.run(experiment.ExperimentConfig(
        builder=mappo.MAPPOBuilder(config), env_id=env_id,
        num_steps=30, eval_every=30, eval_episodes=2, seed=1))

  first, again = run(), run()
  assert first.learner_steps > 0
  assert first.params_checksum == again.params_checksum
  assert first.evaluations[-1]["episode_return"] == again.evaluations[-1]["episode_return"]
