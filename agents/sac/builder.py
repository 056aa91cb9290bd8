"""SAC builder: replay, dataset, adder and actor from `TransitionReplayBuilder`; optimizers,
QAT and `make_learner` from `dpg_common.builder.ActorCriticBuilder`; the
squashed-Gaussian policies and the SAC learner (`actor_critic_learner`) are its own."""
from __future__ import annotations

import numpy as np
import optax
from acme import specs

from actorq import core
from actorq.agents.dpg_common.builder import ActorCriticBuilder
from actorq.agents.sac import config as config_lib
from actorq.agents.sac import learning
from actorq.agents.sac import networks as networks_lib
from actorq.agents.sac import population
from actorq.components.acting import continuous


class SACBuilder(ActorCriticBuilder):
  """Builds SAC's replay table, dataset, adder, actor, learner and policies."""
  config_class = config_lib.SACConfig

  @staticmethod
  def population_learner():
    """SAC forms a population (`agents.population`): `population.SACPopulation`."""
    return population.SACPopulation

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

  def temperature_optimizer(self, learning_rate) -> optax.GradientTransformation:
    """Adam at `learning_rate` for log(alpha) (no clip; a float, or a traced float32
    scalar: a population member's; the state does not depend on it)."""
    return optax.adam(learning_rate)

  def make_policy(self, networks: networks_lib.SACNetworks,
                  environment_spec: specs.EnvironmentSpec,
                  evaluation: bool = False) -> core.ActorPolicy:
    """The network runs in the actor's runtime at its precision; sampling, tanh and the
    rescale to the bounds in the selector (evaluation: `tanh(mean)`), after
    `random_warmup_steps` uniform actions when acting."""
    c = self.config
    if evaluation:
      return core.ActorPolicy(networks.spec, c.policy_precision(True),
                              continuous.tanh_gaussian_bounded(environment_spec.actions, True),
                              True)
    return core.ActorPolicy(networks.spec, c.policy_precision(False), self.behaviour_selector(
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

  def actor_critic_learner(self, environment_spec: specs.EnvironmentSpec,
                           **common) -> learning.SACLearner:
    c = self.config
    return learning.SACLearner(
        alpha_optimizer=self.temperature_optimizer(c.temperature_learning_rate),
        discount=c.discount,
        target_entropy=self.target_entropy(environment_spec),
        initial_temperature=c.initial_temperature, target_update_period=c.target_update_period,
        target_update_tau=c.target_update_tau, params_transform=self.params_transform(),
        **common)
