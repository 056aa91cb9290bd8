"""Builder shared by DDPG and D4PG: Acme's builder contract plus the single-process
loop's methods; replay, dataset, adder and actor come from
`components.builders.TransitionReplayBuilder`. Subclasses supply `make_networks` and
`critic_functions(networks) -> (critic_loss, q_value)`."""
from __future__ import annotations

from typing import Iterator, Optional, Tuple

import jax
import numpy as np
import optax
import reverb
from acme import specs

from actorq import core
from actorq.agents.dpg_common import config as config_lib
from actorq.agents.dpg_common import learning
from actorq.agents.dpg_common import networks as networks_lib
from actorq.components import builders, continuous
from actorq.quantization import qat


class DPGBuilder(builders.TransitionReplayBuilder):
  """Replay table, dataset, adder, actor, learner and policies of a DPG agent."""

  def __init__(self, config: config_lib.DPGConfig):
    super().__init__(config)

  # --- agent-specific -------------------------------------------------------------
  def make_networks(self, environment_spec: specs.EnvironmentSpec) -> networks_lib.DPGNetworks:
    raise NotImplementedError

  def critic_functions(self, networks) -> Tuple[learning.CriticLoss, learning.QValue]:
    raise NotImplementedError

  # --- Acme's builder contract (replay, dataset, adder and actor are inherited) --------
  def make_policy(self, networks: networks_lib.DPGNetworks,
                  environment_spec: specs.EnvironmentSpec, evaluation: bool = False) -> core.ActorPolicy:
    c = self.config
    if evaluation:
      return core.ActorPolicy(networks.spec, c.evaluation_precision or c.actor_precision,
                       continuous.deterministic_bounded(environment_spec.actions), True)
    return core.ActorPolicy(networks.spec, c.actor_precision,
                     continuous.gaussian_bounded(environment_spec.actions, c.sigma), False)

  def make_optimizers(self) -> Tuple[optax.GradientTransformation, optax.GradientTransformation]:
    """(policy optimizer, critic optimizer): global-norm clip then Adam."""
    c = self.config
    return (optax.chain(optax.clip_by_global_norm(c.max_gradient_norm),
                        optax.adam(c.policy_learning_rate)),
            optax.chain(optax.clip_by_global_norm(c.max_gradient_norm),
                        optax.adam(c.critic_learning_rate)))

  def make_learner(self, random_key: jax.Array, networks: networks_lib.DPGNetworks,
                   dataset: Iterator[reverb.ReplaySample], logger_fn,
                   environment_spec: specs.EnvironmentSpec,
                   replay_client: Optional[reverb.Client] = None,
                   counter=None) -> learning.DPGLearner:
    del replay_client
    c = self.config
    transform = None
    if c.qat_bits is not None:
      transform = lambda p: qat.fake_quant_params(p, bits=c.qat_bits)
    critic_loss, q_value = self.critic_functions(networks)
    policy_opt, critic_opt = self.make_optimizers()
    dummy = np.zeros(environment_spec.observations.shape, np.float32)
    return learning.DPGLearner(
        networks, dataset, random_key, dummy, policy_opt, critic_opt, c.discount,
        critic_loss, q_value, c.target_update_period, c.target_update_tau, c.dqda_clipping,
        transform, logger=logger_fn("learner"), counter=counter)
