"""DQN builder: Acme's builder contract, shared by the local and distributed launchers."""
from __future__ import annotations

import dataclasses
from typing import Iterator, List, Optional

import jax
import numpy as np
import optax
import reverb
from acme import adders as acme_adders
from acme import core, specs
from acme.adders import reverb as adders_reverb

from actorq.agents.dqn import config as config_lib
from actorq.agents.dqn import learning
from actorq.agents.dqn import networks as networks_lib
from actorq.components import actors, adders, replay
from actorq.components import variable_client as vc
from actorq.quantization import network_spec as ns


@dataclasses.dataclass
class DQNPolicy:
  """What an actor needs: the network spec, a precision and an action selector."""
  spec: ns.NetworkSpec
  precision: str
  selector: actors.Selector
  evaluation: bool


class DQNBuilder:
  """Builds DQN's replay table, dataset, adder, actor, learner and policies."""

  def __init__(self, config: config_lib.DQNConfig):
    self.config = config

  def min_replay_size(self) -> int:
    return self.config.min_replay_size

  def replay_table_name(self) -> str:
    return self.config.replay_table_name

  def learner_steps_owed(self, actor_steps_since_start: int) -> int:
    """Samples-per-insert: one learner step per batch_size / samples_per_insert actor steps."""
    c = self.config
    return int(actor_steps_since_start * c.samples_per_insert // c.batch_size)

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

  def make_replay_tables(self, environment_spec: specs.EnvironmentSpec,
                         policy: Optional[DQNPolicy] = None,
                         rate_limited: bool = False) -> List[reverb.Table]:
    """One transition table. `rate_limited`: enforce samples_per_insert in Reverb
    (distributed); the single-process loop enforces it itself and uses MinSize."""
    del policy
    c = self.config
    return [replay.transition_table(
        c.replay_table_name, environment_spec, max_size=c.max_replay_size,
        min_size=c.min_replay_size,
        samples_per_insert=c.samples_per_insert if rate_limited else None)]

  def make_dataset_iterator(self, replay_client: reverb.Client) -> Iterator[reverb.ReplaySample]:
    ds = replay.make_dataset(replay_client.server_address, self.config.replay_table_name,
                             self.config.batch_size)
    return replay.numpy_iterator(ds)

  def make_adder(self, replay_client: reverb.Client, environment_spec: specs.EnvironmentSpec,
                 policy: Optional[DQNPolicy] = None) -> acme_adders.Adder:
    del policy
    adder = adders.NStepTransitionAdder(
        replay_client, n_step=self.config.n_step, discount=self.config.discount,
        priority_fns={self.config.replay_table_name: None})
    return replay.ValidatingAdder(adder, environment_spec)

  def make_actor(self, random_key: jax.Array, policy: DQNPolicy,
                 environment_spec: specs.EnvironmentSpec, variable_source: core.VariableSource,
                 adder: Optional[acme_adders.Adder] = None) -> actors.FeedForwardActor:
    del environment_spec
    seed = int(jax.random.randint(random_key, (), 0, 2**31 - 1))
    runtime = vc.make_runtime(policy.precision, policy.spec)
    client = vc.VariableClient(variable_source, runtime, self.config.variable_update_period)
    client.update_and_wait()
    return actors.FeedForwardActor(runtime, policy.selector, client, adder, seed=seed)

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
