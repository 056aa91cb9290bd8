"""On-policy agents (PPO, A2C, IMPALA) with B > 1 environments per actor (issue 16): each
env's rollouts through `PerEnvAdders` are exactly the rollouts of that env run alone, and a
single-process run of every on-policy agent at B = 4 learns from them and is a function of
its seed."""
import warnings

import numpy as np
import pytest
import reverb
import tree
from acme import specs

from actorq.agents.a2c import builder as a2c_builder
from actorq.agents.a2c import config as a2c_config
from actorq.agents.impala import builder as impala_builder
from actorq.agents.impala import config as impala_config
from actorq.agents.onpolicy_common import networks as onpolicy
from actorq.agents.ppo import builder as ppo_builder
from actorq.agents.ppo import config as ppo_config
from actorq.components.acting import actors
from actorq.components.acting import loop as loop_lib
from actorq.components.replay import adders, reverb_replay as replay, rollouts
from actorq.launch import experiment, local
from actorq.testing import fakes

T = 4  # rollout length
# (episode length, truncated?) per env: shorter than T, equal to T, longer, a 1-step one.
EPISODES = [(3, False), (4, True), (7, False), (1, False)]
# Logits that make the categorical selector's Gumbel-max draw always pick action 1 with
# log-prob 0, so a row's actions and extras do not depend on how the rows interleave.
LOGITS = [-100.0, 100.0]


def scripted_envs():
  return [fakes.ScriptedEnvironment([0.1 * (i + 1) + 0.37 * t for t in range(length)],
                                    truncate=truncate, observation_offset=100.0 * i)
          for i, (length, truncate) in enumerate(EPISODES)]


SPEC = specs.make_environment_spec(scripted_envs()[0])
HEAD = onpolicy.policy_head(SPEC)


def queue_server():
  return reverb.Server([rollouts.rollout_queue("q", SPEC, onpolicy.extras_spec(HEAD), T,
                                               10_000)])


def queued(write):
  """The rollouts `write(client)` queues on a fresh server, in write order, each as a list
  of numpy columns; `write` returns how many it wrote and has closed its adders (their
  writers closed, every rollout flushed) before the queue is read, so nothing is waited
  for: every item is in the queue before the read starts, so the rate limiter never makes
  the `count` samples wait, and its timeout only bounds the reader's one further request,
  for an item known not to come, which the reader's end waits out (with 1 s: 1.0 s per
  queue; with 0.1 s: ~0.1 s; any positive value down to 1 ms passed, exactly 0 does not).
  Were an item ever missing, the read would fail loudly (`ReplayTimeoutError`, or fewer
  items than `count`), never pass. An open writer stream would hold Reverb's
  `Server.stop` for 5 s."""
  server = queue_server()
  try:
    count = write(reverb.Client(f"localhost:{server.port}"))
    got = replay.sample(f"localhost:{server.port}", "q", count, timeout_s=0.1)
    assert len(got) == count
    return [[np.asarray(x) for x in tree.flatten(s.data)] for s in got]
  finally:
    server.stop()


def rollout_adder(client):
  return rollouts.make_rollout_adder(client, "q", SPEC, onpolicy.extras_spec(HEAD), T)


def env_of(rollout):
  return int(rollout[0].reshape(-1)[0] // 100)  # the observation column comes first


def test_per_env_rollouts_are_each_envs_rollouts_alone():
  selector = onpolicy.make_selector(HEAD)
  steps = {}

  def write_batched(client):
    per_env = adders.PerEnvAdders([rollout_adder(client) for _ in EPISODES])
    actor = actors.BatchedFeedForwardActor(fakes.FixedRuntime(LOGITS), selector, adder=per_env,
                                           dummy_action=np.int32(0))

    class Count(loop_lib.Hook):
      def on_step(self, loop, action, timestep):
        i = int(timestep.observation[0] // 100)
        steps[i] = steps.get(i, 0) + 1

    loop_lib.VectorActorLoop(fakes.ScriptedVectorEnvironment(scripted_envs()), actor,
                             hooks=[Count()]).run(num_steps=80)
    per_env.close()  # every env's writer closed (`ValidatingAdder.close`)
    return per_env.items_written

  def write_alone(i):
    def write(client):
      adder = rollout_adder(client)
      alone_actor = actors.FeedForwardActor(fakes.FixedRuntime(LOGITS), selector, adder=adder)
      loop_lib.ActorLoop(scripted_envs()[i], alone_actor).run(num_steps=steps[i])
      adder.close()
      return adder.items_written
    return write

  batched = queued(write_batched)
  assert sum(steps.values()) == 80
  for i in range(len(EPISODES)):
    mine = [r for r in batched if env_of(r) == i]
    alone = queued(write_alone(i))
    assert len(alone) == len(mine) >= 2, (i, len(alone), len(mine))
    for got, want in zip(mine, alone):
      for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)  # every column, bit for bit
  # Every queued rollout belongs to exactly one env (no rollout mixes rows).
  for r in batched:
    assert len(set((r[0].reshape(-1) // 100).astype(int).tolist())) == 1


def _configs():
  small = dict(policy_hidden=(16,), value_hidden=(16,), rollout_length=8, batch_size=4)
  return {
      "ppo": (ppo_builder.PPOBuilder, ppo_config.PPOConfig(minibatch_size=16, num_epochs=2,
                                                            **small)),
      "a2c": (a2c_builder.A2CBuilder, a2c_config.A2CConfig(**small)),
      "impala": (impala_builder.IMPALABuilder, impala_config.IMPALAConfig(**small)),
  }


@pytest.mark.slow
@pytest.mark.parametrize("agent", ["ppo", "a2c", "impala"])
def test_on_policy_run_with_four_envs_learns_and_is_a_function_of_its_seed(agent):
  builder_cls, config = _configs()[agent]

  def run():
    with warnings.catch_warnings():
      warnings.simplefilter("ignore")
      return local.run(experiment.ExperimentConfig(
          builder=builder_cls(config), env_id="gym:CartPole-v1", num_steps=256, seed=5,
          eval_every=128, eval_episodes=1, checkpoint_every=None, num_envs=4))

  first, second = run(), run()
  # 256 actor steps = 64 per env = 8 rollouts of 8 per env at least (episode ends add
  # rollouts), 32 or more rollouts in all -> at least 8 learner steps of 4 rollouts.
  assert first.actor_steps == 256
  assert first.learner_steps >= 8 and len(first.evaluations) == 2
  assert first.params_checksum == second.params_checksum
  assert (first.learner_steps, first.episodes) == (second.learner_steps, second.episodes)
  assert [r["episode_return"] for r in first.evaluations] == \
      [r["episode_return"] for r in second.evaluations]
