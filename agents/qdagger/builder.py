"""QDagger's builder: DQN's (replay, adder, actor, policies, optimizer) with the
teacher-student learner of `learning.py` and the teacher of `networks.py`."""
from __future__ import annotations

from typing import Iterator, Optional

import jax
import numpy as np
import reverb
from acme import specs

from actorq.agents.dqn import builder as dqn_builder
from actorq.agents.qdagger import config as config_lib
from actorq.agents.qdagger import learning
from actorq.agents.qdagger import networks as networks_lib
from actorq.components.acting import loop as loop_lib
from actorq.components.envs import environments
from actorq.components.replay import local_replay
from actorq.components.replay import reverb_replay as replay


def greedy_return(network, env_id: str, episodes: int, seed: int,
                  max_episode_steps: int = loop_lib.DEFAULT_MAX_EPISODE_STEPS):
  """`evaluate(params) -> float`: the mean undiscounted return of `episodes` greedy
  (argmax Q) episodes of `network` on `env_id` (seeded `seed`, fp32, in this process)."""
  apply = jax.jit(network.apply)

  def evaluate(params) -> float:
    env = environments.make_environment(env_id, seed=seed)
    try:
      total = 0.0
      for _ in range(episodes):
        timestep, steps = env.reset(), 0
        while not timestep.last() and steps < max_episode_steps:
          q = apply(params, np.asarray(timestep.observation)[None])
          timestep = env.step(int(np.argmax(np.asarray(q)[0])))
          total += float(timestep.reward or 0.0)
          steps += 1
      return total / episodes
    finally:
      env.close()

  return evaluate


class QDaggerBuilder(dqn_builder.DQNBuilder):
  """A DQN student distilled from a teacher run (`QDaggerConfig.teacher`)."""
  config_class = config_lib.QDaggerConfig

  def make_networks(self, environment_spec: specs.EnvironmentSpec):
    """The student's networks (DQN's, of `hidden_sizes`), after checking the teacher.

    Raises:
      ValueError: the teacher is missing, unreadable or of another task
        (`networks.load_teacher`), or has no replay for `offline_steps` > 0.
    """
    teacher = networks_lib.load_teacher(self.config.teacher, environment_spec)
    if self.config.offline_steps and teacher.replay_state is None:
      raise ValueError(f"teacher {teacher.run} holds no in-process replay (a distributed "
                       "run): set offline_steps=0")
    if self.config.teacher_return is None and not (teacher.final_return or 0) > 0:
      raise ValueError(f"teacher {teacher.run} has no positive evaluation return in its "
                       "eval.csv: set teacher_return")
    return super().make_networks(environment_spec)

  def make_learner(self, random_key: jax.Array, networks, dataset: Iterator[reverb.ReplaySample],
                   logger_fn, environment_spec: specs.EnvironmentSpec,
                   replay_client: Optional[reverb.Client] = None,
                   counter=None) -> learning.QDaggerLearner:
    """Raises ValueError as `make_networks`, or for prioritized replay without a client."""
    c = self.config
    teacher = networks_lib.load_teacher(c.teacher, environment_spec)
    key_learner, key_replay = jax.random.split(random_key)
    teacher_iterator = None
    if c.offline_steps:
      teacher_builder = dqn_builder.DQNBuilder(teacher.config)
      client = local_replay.LocalReplayClient(
          teacher_builder.make_replay_tables(environment_spec),
          seed=int(jax.random.randint(key_replay, (), 0, 2**31 - 1)))
      client.restore(teacher.replay_state)
      teacher_iterator = replay.make_iterator(client, teacher.config.replay_table_name,
                                              c.batch_size)
    dummy = np.zeros(environment_spec.observations.shape, environment_spec.observations.dtype)
    seed = int(jax.random.randint(key_replay, (), 0, 2**31 - 1))
    return learning.QDaggerLearner(
        networks.network, teacher.network, teacher.params, dataset, teacher_iterator,
        key_learner, dummy, self.make_optimizer(), c.discount, c.target_update_period,
        huber_delta=c.huber_delta, double_q=c.double_q, temperature=c.temperature,
        offline_steps=c.offline_steps,
        teacher_return=c.teacher_return or float(teacher.final_return),
        evaluate=greedy_return(networks.network, teacher.env_id, c.coefficient_episodes, seed),
        coefficient_every=c.coefficient_every, logger=logger_fn("learner"), counter=counter,
        prioritized=self.make_prioritized_replay(replay_client),
        td_operator=self.make_td_operator())
