"""Builders of the off-policy actor-critic agents: Acme's builder contract plus the
single-process loop's methods; replay, dataset, adder and actor come from
`components.builders.TransitionReplayBuilder`.

`ActorCriticBuilder` adds the optimizers and the QAT transform every actor-critic agent
uses (SAC builds on it). `DPGBuilder` (DDPG, D4PG, TD3) adds the deterministic policies
and the `DPGLearner`; subclasses supply `make_networks`, `critic_functions(networks) ->
(critic_loss, q_value)` and optionally `learner_options()`."""
from __future__ import annotations

from typing import Any, Callable, Dict, Iterator, Optional, Tuple

import jax
import numpy as np
import optax
import reverb
from acme import specs

from actorq import core
from actorq.agents.dpg_common import config as config_lib
from actorq.agents.dpg_common import learning
from actorq.agents.dpg_common import networks as networks_lib
from actorq.components import builders
from actorq.components.acting import continuous
from actorq.quantization import qat


class ActorCriticBuilder(builders.TransitionReplayBuilder):
  """Optimizers and QAT transform from an `ActorCriticConfig`, and Acme's `make_learner`
  over the agent's `actor_critic_learner`."""

  def make_optimizers(self) -> Tuple[optax.GradientTransformation, optax.GradientTransformation]:
    """(policy optimizer, critic optimizer): `optimizer` at the config's learning rates."""
    c = self.config
    return self.optimizer(c.policy_learning_rate), self.optimizer(c.critic_learning_rate)

  def optimizer(self, learning_rate) -> optax.GradientTransformation:
    """The global-norm clip (`max_gradient_norm`), then Adam at `learning_rate` (a float,
    or a traced float32 scalar: a population member's; the state does not depend on it)."""
    return optax.chain(optax.clip_by_global_norm(self.config.max_gradient_norm),
                       optax.adam(learning_rate))

  def params_transform(self) -> Optional[Callable]:
    """What the learner applies to the policy params inside its loss: QAT's fake quant of
    the weights (`qat_bits`), or None."""
    bits = self.config.qat_bits
    return None if bits is None else (lambda p: qat.fake_quant_params(p, bits=bits))

  def behaviour_selector(self, selector: core.Selector,
                         environment_spec: specs.EnvironmentSpec) -> core.Selector:
    """The acting (not evaluation) selector: `selector` after `random_warmup_steps`
    uniform actions (`continuous.uniform_warmup`; counted on a distributed run's summed
    actor steps)."""
    return continuous.uniform_warmup(selector, environment_spec.actions,
                                     self.config.random_warmup_steps)

  def make_learner(self, random_key: jax.Array, networks,
                   dataset: Iterator[reverb.ReplaySample], logger_fn,
                   environment_spec: specs.EnvironmentSpec,
                   replay_client: Optional[reverb.Client] = None, counter=None):
    """Acme's `make_learner`: the agent's `actor_critic_learner` (the replay client is not
    used)."""
    del replay_client
    policy_opt, critic_opt = self.make_optimizers()
    return self.actor_critic_learner(
        environment_spec, networks=networks, iterator=dataset, random_key=random_key,
        dummy_observation=np.zeros(environment_spec.observations.shape, np.float32),
        policy_optimizer=policy_opt, critic_optimizer=critic_opt,
        logger=logger_fn("learner"), counter=counter)

  def actor_critic_learner(self, environment_spec: specs.EnvironmentSpec, **common):
    """The agent's learner, given the keyword arguments every actor-critic learner takes
    (`common`): `networks`, `iterator` (the dataset), `random_key`, `dummy_observation`
    (float32 zeros of the observation shape, to initialise the networks),
    `policy_optimizer` and `critic_optimizer` (`make_optimizers`), `logger`
    (`logger_fn("learner")`) and `counter`."""
    raise NotImplementedError


class DPGBuilder(ActorCriticBuilder):
  """Replay table, dataset, adder, actor, learner and policies of a DPG agent."""

  def __init__(self, config: config_lib.DPGConfig):
    super().__init__(config)

  # --- agent-specific -------------------------------------------------------------
  def make_networks(self, environment_spec: specs.EnvironmentSpec) -> networks_lib.DPGNetworks:
    raise NotImplementedError

  def critic_functions(self, networks) -> Tuple[learning.CriticLoss, learning.QValue]:
    raise NotImplementedError

  def learner_options(self) -> Dict[str, Any]:
    """Extra `DPGLearner` keyword arguments (TD3: `policy_delay`, `target_policy_noise`)."""
    return {}

  # --- Acme's builder contract (replay, dataset, adder and actor are inherited) --------
  def make_policy(self, networks: networks_lib.DPGNetworks,
                  environment_spec: specs.EnvironmentSpec, evaluation: bool = False) -> core.ActorPolicy:
    c = self.config
    if evaluation:
      return core.ActorPolicy(networks.spec, c.policy_precision(True),
                              continuous.deterministic_bounded(environment_spec.actions), True)
    return core.ActorPolicy(networks.spec, c.policy_precision(False), self.behaviour_selector(
        continuous.gaussian_bounded(environment_spec.actions, c.sigma), environment_spec), False)

  def policy_outputs(self, networks: networks_lib.DPGNetworks,
                     environment_spec: specs.EnvironmentSpec) -> core.PolicyOutputs:
    """A deterministic action y in [-1, 1] per action dimension (the policy's tanh),
    rescaled to the bounds by the evaluation selector (`continuous.deterministic_bounded`)."""
    del networks, environment_spec
    return core.PolicyOutputs(
        "tanh_deterministic", None,
        "clip(minimum + (y + 1) / 2 * (maximum - minimum), minimum, maximum)")

  def actor_critic_learner(self, environment_spec: specs.EnvironmentSpec,
                           **common) -> learning.DPGLearner:
    del environment_spec
    c = self.config
    critic_loss, q_value = self.critic_functions(common["networks"])
    return learning.DPGLearner(
        discount=c.discount, critic_loss=critic_loss, q_value=q_value,
        target_update_period=c.target_update_period, target_update_tau=c.target_update_tau,
        dqda_clipping=c.dqda_clipping, params_transform=self.params_transform(),
        preactivation_penalty=c.preactivation_penalty, **common, **self.learner_options())
