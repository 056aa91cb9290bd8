"""The builder of the on-policy family: Acme's builder contract over a rollout queue."""
from __future__ import annotations

from typing import Any, Iterator, List, Optional

import jax
import numpy as np
import reverb
from acme import specs
from acme.adders import base as adders_base

from actorq import core
from actorq.agents.onpolicy_common import learning
from actorq.agents.onpolicy_common import networks as networks_lib
from actorq.components.acting import actors
from actorq.components.acting import variable_client as vc
from actorq.components.replay import adders, rollouts


class OnPolicyBuilder:
  """Acme's builder methods for a rollout-queue agent (stateless: one builder serves
  every launch mode and any number of actors): rollout queue, sequence adder, stochastic
  actor (extras: behaviour log-probs) and the agent's learner, one learner step per
  `batch_size` rollouts of `rollout_length` steps.

  A subclass names its agent's modules as class attributes:
    networks_lib: has `make_networks(environment_spec, config) -> ActorCriticNetworks`;
    learning_lib: has `make_update(networks, optimizer, config)` (the pure, jitted update
      `OnPolicyLearner` runs).
  `make_optimizer()` is the family's (`learning.make_optimizer`: one Adam update per learner
  step); an agent with several updates per learner step (PPO) overrides it.
  The config is an `actorq.agents.onpolicy_common.config.OnPolicyConfig`.
  """
  networks_lib: Any = None
  learning_lib: Any = None

  def __init__(self, config):
    self.config = config

  # --- what the single-process loop asks -------------------------------------------
  def min_replay_size(self) -> int:
    return 0

  def replay_table_name(self) -> str:
    return self.config.replay_table_name

  def learner_steps_owed(self, progress: core.ReplayProgress) -> int:
    """One learner step per `batch_size` rollouts *written* (`progress.items_written`).

    On-policy rollouts are consumed once, so the count is the adder's (rollouts
    written: (actor steps + episode ends) per T, see `rollouts.CountingAdder`) rather
    than the actor steps', which would let episode ends pile rollouts up in the queue
    (stale data) or, rounded the other way, wait for a rollout never written.
    """
    return int(progress.items_written) // self.config.batch_size

  def make_optimizer(self):
    """The optimizer of one Adam update per learner step (`learning.make_optimizer`)."""
    return learning.make_optimizer(self.config)

  # --- Acme's builder contract ------------------------------------------------------
  def make_networks(self, environment_spec: specs.EnvironmentSpec
                    ) -> networks_lib.ActorCriticNetworks:
    return self.networks_lib.make_networks(environment_spec, self.config)

  def make_learner(self, random_key: jax.Array, networks: networks_lib.ActorCriticNetworks,
                   dataset: Iterator[reverb.ReplaySample], logger_fn,
                   environment_spec: specs.EnvironmentSpec,
                   replay_client: Optional[reverb.Client] = None,
                   counter=None) -> learning.OnPolicyLearner:
    del replay_client
    key_init, key_learn = jax.random.split(random_key)
    dummy = np.zeros(environment_spec.observations.shape, np.float32)
    params = networks.init(key_init, dummy)
    optimizer = self.make_optimizer()
    update = self.learning_lib.make_update(networks, optimizer, self.config)
    return learning.OnPolicyLearner(update, params, optimizer, dataset, key_learn,
                                    logger=logger_fn("learner"), counter=counter)

  def make_policy(self, networks: networks_lib.ActorCriticNetworks,
                  environment_spec: specs.EnvironmentSpec,
                  evaluation: bool = False) -> core.ActorPolicy:
    del environment_spec
    c = self.config
    return core.ActorPolicy(networks.spec, c.policy_precision(evaluation),
                            networks_lib.make_selector(networks.head, evaluation), evaluation)

  def policy_outputs(self, networks: networks_lib.ActorCriticNetworks,
                     environment_spec: specs.EnvironmentSpec) -> core.PolicyOutputs:
    """Discrete actions: the categorical policy's logits (greedy: argmax). Continuous: a
    Gaussian y = [mean[A], log_std[A]] whose greedy action is the mean clipped to the
    bounds (`networks.make_selector`)."""
    del environment_spec
    if networks.head.discrete:
      return core.PolicyOutputs("logits", None, "argmax(y)")
    return core.PolicyOutputs("tanh_gaussian", None,
                              "clip(y[:A], minimum, maximum) (y = [mean, log_std])")

  def make_replay_tables(self, environment_spec: specs.EnvironmentSpec,
                         policy: Optional[core.ActorPolicy] = None,
                         rate_limited: bool = True) -> List[reverb.Table]:
    """The rollout queue. `rate_limited` (the distributed launcher's argument) changes
    nothing: a queue is always rate-limited (a full queue blocks the actors)."""
    del policy, rate_limited
    c = self.config
    head = networks_lib.policy_head(environment_spec)
    return [rollouts.rollout_queue(c.replay_table_name, environment_spec,
                                   networks_lib.extras_spec(head), c.rollout_length,
                                   c.max_queue_size)]

  def make_dataset_iterator(self, replay_client: reverb.Client) -> Iterator[reverb.ReplaySample]:
    return rollouts.make_iterator(replay_client, self.config.replay_table_name,
                                  self.config.batch_size)

  def make_adder(self, replay_client: reverb.Client, environment_spec: specs.EnvironmentSpec,
                 policy: Optional[core.ActorPolicy] = None) -> rollouts.CountingAdder:
    del policy
    head = networks_lib.policy_head(environment_spec)
    return rollouts.make_rollout_adder(replay_client, self.config.replay_table_name,
                                       environment_spec, networks_lib.extras_spec(head),
                                       self.config.rollout_length)

  def make_batched_adder(self, replay_client: reverb.Client,
                         environment_spec: specs.EnvironmentSpec,
                         policy: Optional[core.ActorPolicy] = None,
                         num_envs: int = 1) -> adders.PerEnvAdders:
    """One rollout adder per environment (`num_envs`), each writing its env's rollouts:
    rollouts of a batch of envs are B independent sequences, queued as they complete."""
    return adders.PerEnvAdders([self.make_adder(replay_client, environment_spec, policy)
                                for _ in range(int(num_envs))])

  def make_actor(self, random_key: jax.Array, policy: core.ActorPolicy,
                 environment_spec: specs.EnvironmentSpec, variable_source: core.VariableSource,
                 adder: Optional[adders_base.Adder] = None) -> actors.FeedForwardActor:
    """A feed-forward actor that pulls synchronously (`SynchronousVariableClient`): an
    on-policy actor acts with the policy the learner just produced."""
    del environment_spec
    seed = int(jax.random.randint(random_key, (), 0, 2**31 - 1))
    runtime = vc.make_runtime(policy.precision, policy.spec)
    client = vc.SynchronousVariableClient(variable_source, runtime,
                                          self.config.variable_update_period)
    client.update_and_wait()
    return actors.FeedForwardActor(runtime, policy.selector, client, adder, seed=seed)
