"""A2C builder: Acme's builder contract over the shared rollout-queue machinery
(`actorq.components.onpolicy`)."""
from __future__ import annotations

from typing import Iterator, Optional

import jax
import numpy as np
import reverb
from acme import specs

from actorq.agents.a2c import config as config_lib
from actorq.agents.a2c import learning
from actorq.agents.a2c import networks as networks_lib
from actorq.components import onpolicy


class A2CBuilder(onpolicy.OnPolicyBuilder):
  """Rollout queue, sequence adder, stochastic actor (extras: behaviour log-probs) and
  the A2C learner. One learner step per `batch_size` rollouts of `rollout_length` steps."""

  def __init__(self, config: config_lib.A2CConfig):
    super().__init__(config)

  def make_networks(self, environment_spec: specs.EnvironmentSpec) -> networks_lib.A2CNetworks:
    return networks_lib.make_networks(environment_spec, self.config)

  def make_learner(self, random_key: jax.Array, networks: networks_lib.A2CNetworks,
                   dataset: Iterator[reverb.ReplaySample], logger_fn,
                   environment_spec: specs.EnvironmentSpec,
                   replay_client: Optional[reverb.Client] = None,
                   counter=None) -> onpolicy.OnPolicyLearner:
    del replay_client
    key_init, key_learn = jax.random.split(random_key)
    dummy = np.zeros(environment_spec.observations.shape, np.float32)
    params = networks.init(key_init, dummy)
    optimizer = learning.make_optimizer(self.config)
    update = learning.make_update(networks, optimizer, self.config)
    return onpolicy.OnPolicyLearner(update, params, optimizer, dataset, key_learn,
                                    logger=logger_fn("learner"), counter=counter)
