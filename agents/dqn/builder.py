"""DQN builder: Acme's builder contract, shared by the local and distributed launchers."""
from __future__ import annotations

import dataclasses
from typing import Iterator, Optional

import jax
import numpy as np
import optax
import reverb
from acme import specs

from actorq.agents.dqn import learning
from actorq.agents.dqn import networks as networks_lib
from actorq.components import actors, builders
from actorq.quantization import network_spec as ns


@dataclasses.dataclass
class DQNPolicy:
  """What an actor needs: the network spec, a precision and an action selector."""
  spec: ns.NetworkSpec
  precision: str
  selector: actors.Selector
  evaluation: bool


class DQNBuilder(builders.TransitionReplayBuilder):
  """DQN's networks, policies and learner; replay, adder and actor come from
  `TransitionReplayBuilder`."""

  def make_networks(self, environment_spec: specs.EnvironmentSpec) -> networks_lib.DQNNetworks:
    return networks_lib.make_networks(environment_spec, self.config.hidden_sizes)

  def make_policy(self, networks: networks_lib.DQNNetworks,
                  environment_spec: specs.EnvironmentSpec, evaluation: bool = False) -> DQNPolicy:
    del environment_spec
    c = self.config
    if evaluation:
      return DQNPolicy(networks.spec, c.evaluation_precision or c.actor_precision,
                       actors.greedy, True)
    epsilon = actors.linear_schedule(c.epsilon_start, c.epsilon_end, c.epsilon_decay_steps)
    return DQNPolicy(networks.spec, c.actor_precision, actors.epsilon_greedy(epsilon), False)

  def make_optimizer(self) -> optax.GradientTransformation:
    c = self.config
    lr = c.learning_rate
    if c.learning_rate_decay_steps:
      lr = optax.linear_schedule(c.learning_rate, c.learning_rate * c.final_learning_rate_fraction,
                                 c.learning_rate_decay_steps)
    return optax.chain(optax.clip_by_global_norm(c.max_gradient_norm),
                       optax.adam(lr, eps=c.adam_eps))

  def make_learner(self, random_key: jax.Array, networks: networks_lib.DQNNetworks,
                   dataset: Iterator[reverb.ReplaySample], logger_fn,
                   environment_spec: specs.EnvironmentSpec,
                   replay_client: Optional[reverb.Client] = None,
                   counter=None) -> learning.DQNLearner:
    del replay_client
    c = self.config
    transform = None
    if c.qat_bits is not None:
      from actorq.quantization import qat
      transform = lambda p: qat.fake_quant_params(p, bits=c.qat_bits)
    dummy = np.zeros(environment_spec.observations.shape, environment_spec.observations.dtype)
    return learning.DQNLearner(
        networks.network, dataset, random_key, dummy, self.make_optimizer(), c.discount,
        c.target_update_period, c.huber_delta, c.double_q, transform,
        logger=logger_fn("learner"), counter=counter)
