"""SAC builder: replay, dataset, adder and actor from `TransitionReplayBuilder`, optimizers
and QAT from `dpg_common.builder.ActorCriticBuilder`; the squashed-Gaussian policies and
the SAC learner are its own."""
from __future__ import annotations

from typing import Iterator, Optional

import jax
import numpy as np
import optax
import reverb
from acme import specs

from actorq import core
from actorq.agents.dpg_common.builder import ActorCriticBuilder
from actorq.agents.sac import config as config_lib
from actorq.agents.sac import learning
from actorq.agents.sac import networks as networks_lib
from actorq.components.acting import continuous


class SACBuilder(ActorCriticBuilder):
  """Builds SAC's replay table, dataset, adder, actor, learner and policies."""
  config_class = config_lib.SACConfig

  def __init__(self, config: config_lib.SACConfig):
    super().__init__(config)

  def make_networks(self, environment_spec: specs.EnvironmentSpec) -> networks_lib.SACNetworks:
    c = self.config
    return networks_lib.make_networks(environment_spec, c.policy_hidden_sizes,
                                      c.critic_hidden_sizes, c.critic_layer_norm,
                                      c.policy_output_init_scale)

  def target_entropy(self, environment_spec: specs.EnvironmentSpec) -> float:
    """|A| * `config.target_entropy_per_dimension` (nats; -|A| by default)."""
    size = int(np.prod(environment_spec.actions.shape))
    return size * float(self.config.target_entropy_per_dimension)

  def make_policy(self, networks: networks_lib.SACNetworks,
                  environment_spec: specs.EnvironmentSpec,
                  evaluation: bool = False) -> core.ActorPolicy:
    """The network runs in the actor's runtime at its precision; sampling, tanh and the
    rescale to the bounds in the selector (evaluation: `tanh(mean)`), after
    `random_warmup_steps` uniform actions when acting."""
    c = self.config
    if evaluation:
      return core.ActorPolicy(networks.spec, c.evaluation_precision or c.actor_precision,
                              continuous.tanh_gaussian_bounded(environment_spec.actions, True),
                              True)
    return core.ActorPolicy(networks.spec, c.actor_precision, self.behaviour_selector(
        continuous.tanh_gaussian_bounded(environment_spec.actions), environment_spec), False)

  def policy_outputs(self, networks: networks_lib.SACNetworks,
                     environment_spec: specs.EnvironmentSpec) -> core.PolicyOutputs:
    """A Gaussian y = [mean[A], log_std[A]] squashed by tanh; the greedy action is
    tanh(mean) rescaled to the bounds (`continuous.tanh_gaussian_bounded`)."""
    del networks, environment_spec
    return core.PolicyOutputs(
        "tanh_gaussian", None,
        "clip(minimum + (tanh(y[:A]) + 1) / 2 * (maximum - minimum), minimum, maximum) "
        "(y = [mean, log_std])")

  def make_learner(self, random_key: jax.Array, networks: networks_lib.SACNetworks,
                   dataset: Iterator[reverb.ReplaySample], logger_fn,
                   environment_spec: specs.EnvironmentSpec,
                   replay_client: Optional[reverb.Client] = None,
                   counter=None) -> learning.SACLearner:
    del replay_client
    c = self.config
    policy_opt, critic_opt = self.make_optimizers()
    dummy = np.zeros(environment_spec.observations.shape, np.float32)
    return learning.SACLearner(
        networks, dataset, random_key, dummy, policy_opt, critic_opt,
        optax.adam(c.temperature_learning_rate), c.discount,
        self.target_entropy(environment_spec), c.initial_temperature,
        c.target_update_period, c.target_update_tau, self.params_transform(),
        logger=logger_fn("learner"), counter=counter)
