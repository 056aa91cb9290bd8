"""IPPO (agents/ippo) on multi-agent environments: per-agent episode ends and bootstrapping
on a scripted two-agent environment with hand-computed GAE targets, parameter sharing as
one network over stacked observations with one-hot agent ids and one inference per step
over all agents of all environments, a run that repeats itself under a seed, and
`eval.csv`'s team and per-agent returns."""
import csv
import dataclasses
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from actorq import core
from actorq.agents import ippo
from actorq.agents import ppo
from actorq.components.acting import actors
from actorq.components.acting import multi_agent as ma_loop
from actorq.components.acting import variable_client as vc
from actorq.components.envs import multi_agent as ma_env
from actorq.components.replay import local_replay
from actorq.components import checkpointing
from actorq.launch import experiment
from actorq.launch import local
from actorq.testing import fakes

@pytest.fixture
def scripted_id(monkeypatch):
  """``pz:scripted_pkg/scripted_v0``: `fakes.ScriptedParallelEnv` as an installed module."""
  return fakes.install_scripted_pz(monkeypatch)


class _CountingRuntime:
  """Wraps a policy runtime and records the batch size of every call."""

  def __init__(self, runtime):
    self._runtime, self.calls = runtime, []

  def __call__(self, batch):
    self.calls.append(np.asarray(batch).shape[0])
    return self._runtime(batch)

  def __getattr__(self, name):
    return getattr(self._runtime, name)


def _acting(config, num_envs=1, seed=0):
  """The shared group's networks, params, replay, adder and batched actor over `num_envs`
  scripted environments (env e seeded `seed + e`), as the multi-agent environments family (`decentralized.MultiAgentEnvironments`) builds them."""
  builder = ippo.IPPOBuilder(config)
  envs = [ma_env.ParallelEnvironment(fakes.ScriptedParallelEnv(), seed=seed + e)
          for e in range(num_envs)]
  (group,) = builder.make_groups(envs[0])
  gb = builder.group_builder(group)
  spec = group.environment_spec
  networks = gb.make_networks(spec)
  params = networks.init(jax.random.PRNGKey(0), np.zeros(spec.observations.shape, np.float32))
  policy = gb.make_policy(networks, spec)
  client = local_replay.LocalReplayClient(gb.make_replay_tables(spec, policy), seed=0)
  adder = gb.make_batched_adder(client, spec, policy, num_envs * 2)
  server = vc.PolicyServer(fakes.FixedPolicySource(params["policy"]), networks.spec)
  actor = actors.batched(gb.make_actor(jax.random.PRNGKey(1), policy, spec, server), adder,
                         spec.actions.generate_value())
  return envs, group, gb, networks, params, client, actor


def test_shared_group_appends_one_hot_agent_ids():
  env = ma_env.ParallelEnvironment(fakes.ScriptedParallelEnv(), seed=5)
  (group,) = ippo.IPPOBuilder(ippo.IPPOConfig()).make_groups(env)
  assert (group.name, group.agents, group.agent_ids, group.id_size) == (
      "shared", ("a", "b"), (0, 1), 2)
  assert group.environment_spec.observations.shape == (5,)
  out = group.observations(np.asarray([[1, 0, 5], [1, 1, 5], [2, 1, 5]], np.float32),
                           np.asarray([0, 1, 1]))
  np.testing.assert_array_equal(out, [[1, 0, 5, 1, 0], [1, 1, 5, 0, 1], [2, 1, 5, 0, 1]])
  independent = ippo.IPPOBuilder(ippo.IPPOConfig(share_parameters=False))
  groups = independent.make_groups(env)
  assert [(g.name, g.agents, g.id_size) for g in groups] == [("a", ("a",), 0),
                                                             ("b", ("b",), 0)]
  assert groups[1].environment_spec.observations.shape == (3,)
  assert [independent.group_builder(g).config.replay_table_name for g in groups] == [
      "ippo_rollouts_a", "ippo_rollouts_b"]


def test_per_agent_episode_ends_and_bootstrapping_give_hand_computed_gae_targets():
  gamma, lam, c = 0.5, 0.5, 2.0
  config = ippo.IPPOConfig(rollout_length=3, batch_size=1, minibatch_size=3, discount=gamma,
                           gae_lambda=lam, policy_hidden=(8,), value_hidden=(8,))
  envs, group, gb, networks, params, client, actor = _acting(config, seed=7)
  loop = ma_loop.MultiAgentLoop(envs, [group], [actor])
  # t = 1, 2 (a terminates), 3 (b truncated: the episode ends), 4 (the next episode).
  episodes = loop.run(num_steps=4)
  (stats,) = episodes
  assert stats.episode_length == 3
  # Rollouts of T + 1 = 4 steps: b's is written at t = 3 (3 steps + its terminal step), a's
  # at t = 4 (2 steps + terminal step + the next episode's first step).
  it = gb.make_dataset_iterator(client)
  b_traj, a_traj = next(it).data, next(it).data
  with pytest.raises(Exception):
    next(it)  # nothing else was written
  # Observations carry the one-hot ids; a's terminal step is its observation at t = 2.
  np.testing.assert_array_equal(b_traj.observation[0], [[0, 1, 7, 0, 1], [1, 1, 7, 0, 1],
                                                        [2, 1, 7, 0, 1], [3, 1, 7, 0, 1]])
  np.testing.assert_array_equal(a_traj.observation[0], [[0, 0, 7, 1, 0], [1, 0, 7, 1, 0],
                                                        [2, 0, 7, 1, 0], [0, 0, 7, 1, 0]])
  np.testing.assert_array_equal(a_traj.start_of_episode[0], [True, False, False, True])
  np.testing.assert_array_equal(b_traj.start_of_episode[0], [True, False, False, False])
  act_a, act_b = a_traj.action[0], b_traj.action[0]
  r_a = [1.0 + act_a[0], 1.0 + act_a[1]]
  r_b = [10.0 + act_b[0], 20.0 + act_b[1], 30.0 + act_b[2]]
  np.testing.assert_array_equal(a_traj.reward[0, :2], r_a)
  np.testing.assert_array_equal(a_traj.discount[0, :3], [1, 0, 0])   # a's termination
  np.testing.assert_array_equal(b_traj.reward[0, :3], r_b)
  np.testing.assert_array_equal(b_traj.discount[0, :3], [1, 1, 1])   # b's truncation
  # A value function V = c everywhere: zero weights, output bias c.
  value = jax.tree_util.tree_map(jnp.zeros_like, params["value"])
  value["value_1"]["b"] = jnp.full_like(value["value_1"]["b"], c)
  for traj, expected in (
      # a: A_1 = r_2 - c (no bootstrap after a termination); A_0 = r_1 + g c - c + g l A_1.
      (a_traj, [r_a[0] + gamma * c - c + gamma * lam * (r_a[1] - c), r_a[1] - c]),
      # b: every delta bootstraps (truncation): d_t = r_t + g c - c; A_t = d_t + g l A_t+1.
      (b_traj, None)):
    values = networks.value.apply(value, traj.observation)
    adv, returns, mask = ppo.rollout_targets(values, traj, gamma, lam)
    if expected is not None:
      np.testing.assert_array_equal(mask[0], [1, 1, 0])
      np.testing.assert_allclose(adv[0, :2], expected, rtol=1e-6)
      np.testing.assert_allclose(returns[0, :2], np.asarray(expected) + c, rtol=1e-6)
    else:
      d = [r + gamma * c - c for r in r_b]
      a2 = d[2]
      a1 = d[1] + gamma * lam * a2
      a0 = d[0] + gamma * lam * a1
      np.testing.assert_array_equal(mask[0], [1, 1, 1])
      np.testing.assert_allclose(adv[0], [a0, a1, a2], rtol=1e-6)


def test_parameter_sharing_is_one_network_over_stacked_observations_with_agent_ids():
  config = ippo.IPPOConfig(rollout_length=2, batch_size=1, minibatch_size=2,
                           policy_hidden=(8,), value_hidden=(8,))
  envs, group, gb, networks, params, client, actor = _acting(config, num_envs=2, seed=3)
  counting = _CountingRuntime(actor._runtime)  # pylint: disable=protected-access
  actor._runtime = counting  # pylint: disable=protected-access
  loop = ma_loop.MultiAgentLoop(envs, [group], [actor])
  loop.run(num_steps=6)  # three steps of each of the 2 environments
  # One inference per step over all agents of all environments, rows (env, agent): at the
  # third step the finished agents' rows idle.
  assert counting.calls == [4, 4, 4]
  it = gb.make_dataset_iterator(client)
  rollouts = [next(it).data for _ in range(4)]
  for traj in rollouts:
    obs = traj.observation[0, :2]
    logits = networks.policy.apply(params["policy"], obs)
    np.testing.assert_allclose(traj.extras["logits"][0, :2], logits, rtol=1e-5, atol=1e-6)
  # The streams' rollouts in the order they completed: a's (ended at t = 2) of env 0 and
  # env 1 (seeds 3 and 4), then b's (t = 3).
  stacked = np.stack([t.observation[0, 0] for t in rollouts])
  np.testing.assert_array_equal(stacked, [[0, 0, 3, 1, 0], [0, 0, 4, 1, 0],
                                          [0, 1, 3, 0, 1], [0, 1, 4, 0, 1]])
  one_network = networks.policy.apply(params["policy"], stacked)
  np.testing.assert_allclose(np.stack([t.extras["logits"][0, 0] for t in rollouts]),
                             one_network, rtol=1e-5, atol=1e-6)


def _run(env_id, logdir=None, **overrides):
  config = ippo.IPPOConfig(rollout_length=5, batch_size=2, minibatch_size=5, num_epochs=2,
                           policy_hidden=(8,), value_hidden=(8,), **overrides)
  return local.run(experiment.ExperimentConfig(
      builder=ippo.IPPOBuilder(config), env_id=env_id, num_steps=40, eval_every=20,
      eval_episodes=2, seed=3, logdir=logdir, num_envs=2))


@pytest.mark.parametrize("share", [True, False])
def test_a_run_repeats_itself_under_a_seed(scripted_id, share):
  first, again = _run(scripted_id, share_parameters=share), _run(scripted_id,
                                                                 share_parameters=share)
  assert first.learner_steps > 0 and first.actor_steps == 40
  assert first.params_checksum == again.params_checksum
  assert [r["episode_return"] for r in first.evaluations] == [
      r["episode_return"] for r in again.evaluations]


def test_eval_csv_has_the_team_return_and_each_agents(scripted_id, tmp_path):
  result = _run(scripted_id, logdir=str(tmp_path))
  with open(os.path.join(tmp_path, "eval.csv"), encoding="utf-8") as f:
    rows = list(csv.DictReader(f))
  assert [int(r["actor_steps"]) for r in rows] == [20, 40]
  for row in rows:
    # Greedy episodes of 3 steps: a's return 1 + a_1 + 1 + a_2, b's 10 + 20 + 30 + actions.
    a, b = float(row["return_a"]), float(row["return_b"])
    assert 2.0 <= a <= 4.0 and 60.0 <= b <= 63.0
    assert float(row["episode_return"]) == pytest.approx(a + b)
    assert float(row["episode_length"]) == 3.0
  assert result.final_eval_return == pytest.approx(float(rows[-1]["episode_return"]))
  assert os.path.exists(os.path.join(tmp_path, "run.json"))


def test_multi_agent_runs_refuse_what_they_do_not_support(tmp_path):
  make = lambda env_id, **kw: experiment.ExperimentConfig(
      builder=ippo.IPPOBuilder(ippo.IPPOConfig()), env_id=env_id, num_steps=1, **kw)
  with pytest.raises(core.UsageError, match="^pz:mpe2/simple_adversary_v3: agents "
                     "'adversary_0' and 'agent_0' have different observation specs"):
    local.run(make("pz:mpe2/simple_adversary_v3"))
  with pytest.raises(core.UsageError, match="^'gym:CartPole-v1' is not a multi-agent"):
    local.run(make("gym:CartPole-v1"))
  # Multi-agent runs resume since they write checkpoints; with none there is nothing to resume.
  with pytest.raises(checkpointing.CheckpointError, match="^no readable checkpoint in "):
    local.run(make("pz:mpe2/simple_spread_v3", logdir=str(tmp_path), resume=True))


def test_actorq_train_runs_ippo_and_refuses_what_does_not_fit(scripted_id, tmp_path, capsys):
  from actorq.testing.cli import run_cli  # pylint: disable=g-import-not-at-top
  logdir = str(tmp_path / "run")
  code, out, err = run_cli(
      ["train", "--agent", "ippo", "--env", scripted_id, "--steps", "30", "--eval-every", "15",
       "--eval-episodes", "2", "--seed", "0", "--no-progress", "--logdir", logdir,
       "--set", "rollout_length=5", "--set", "minibatch_size=5", "--set", "batch_size=2",
       "--actor-precision", "int8"], capsys)
  assert code == 0, err
  assert "actorq: training ippo on pz:scripted_pkg/scripted_v0 for 30 steps" in out
  with open(os.path.join(logdir, "eval.csv"), encoding="utf-8") as f:
    rows = list(csv.DictReader(f))
  assert [(r["actor_steps"], r["actor_precision"]) for r in rows] == [("15", "int8"),
                                                                      ("30", "int8")]
  assert {"episode_return", "return_a", "return_b"} <= set(rows[0])
  for argv, message in (
      (["--agent", "ppo", "--env", scripted_id],
       f"actorq: error: {scripted_id} is a multi-agent environment and agent 'ppo' is "
       "single-agent; multi-agent agents: idqn, ippo, mappo\n"),
      (["--agent", "ippo", "--env", "gym:CartPole-v1"],
       "actorq: error: agent 'ippo' is multi-agent: 'gym:CartPole-v1' is not a multi-agent "
       "environment id: use 'pz:<module>/<env>' (e.g. pz:mpe2/simple_spread_v3)\n")):
    code, _, err = run_cli(["train", *argv, "--logdir", str(tmp_path / "bad")], capsys)
    assert (code, err) == (2, message)
    assert not os.path.exists(tmp_path / "bad")
