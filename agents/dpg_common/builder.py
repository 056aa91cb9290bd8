"""Builder shared by DDPG and D4PG: Acme's builder contract plus the single-process
loop's `min_replay_size`, `replay_table_name` and `learner_steps_owed`. Subclasses
supply `make_networks` and `critic_functions(networks) -> (critic_loss, q_value)`."""
from __future__ import annotations

import dataclasses
from typing import Iterator, List, Optional, Tuple

import jax
import numpy as np
import optax
import reverb
from acme import adders as acme_adders
from acme import core, specs

from actorq.agents.dpg_common import config as config_lib
from actorq.agents.dpg_common import learning
from actorq.agents.dpg_common import networks as networks_lib
from actorq.components import actors, adders, continuous, replay
from actorq.components import variable_client as vc
from actorq.quantization import network_spec as ns


@dataclasses.dataclass
class DPGPolicy:
  """What an actor needs: the policy spec, a precision and a bounded action selector."""
  spec: ns.NetworkSpec
  precision: str
  selector: actors.Selector
  evaluation: bool


class DPGBuilder:
  """Replay table, dataset, adder, actor, learner and policies of a DPG agent."""

  def __init__(self, config: config_lib.DPGConfig):
    self.config = config

  # --- agent-specific -------------------------------------------------------------
  def make_networks(self, environment_spec: specs.EnvironmentSpec) -> networks_lib.DPGNetworks:
    raise NotImplementedError

  def critic_functions(self, networks) -> Tuple[learning.CriticLoss, learning.QValue]:
    raise NotImplementedError

  # --- single-process loop --------------------------------------------------------
  def min_replay_size(self) -> int:
    return self.config.min_replay_size

  def replay_table_name(self) -> str:
    return self.config.replay_table_name

  def learner_steps_owed(self, actor_steps_since_start: int) -> int:
    """Samples-per-insert: one learner step per batch_size / samples_per_insert actor steps."""
    c = self.config
    return int(actor_steps_since_start * c.samples_per_insert // c.batch_size)

  # --- Acme's builder contract ----------------------------------------------------
  def make_policy(self, networks: networks_lib.DPGNetworks,
                  environment_spec: specs.EnvironmentSpec, evaluation: bool = False) -> DPGPolicy:
    c = self.config
    if evaluation:
      return DPGPolicy(networks.spec, c.evaluation_precision or c.actor_precision,
                       continuous.deterministic_bounded(environment_spec.actions), True)
    return DPGPolicy(networks.spec, c.actor_precision,
                     continuous.gaussian_bounded(environment_spec.actions, c.sigma), False)

  def make_replay_tables(self, environment_spec: specs.EnvironmentSpec,
                         policy: Optional[DPGPolicy] = None,
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
                 policy: Optional[DPGPolicy] = None) -> acme_adders.Adder:
    del policy
    adder = adders.NStepTransitionAdder(
        replay_client, n_step=self.config.n_step, discount=self.config.discount,
        priority_fns={self.config.replay_table_name: None})
    return replay.ValidatingAdder(adder, environment_spec)

  def make_actor(self, random_key: jax.Array, policy: DPGPolicy,
                 environment_spec: specs.EnvironmentSpec, variable_source: core.VariableSource,
                 adder: Optional[acme_adders.Adder] = None) -> actors.FeedForwardActor:
    del environment_spec
    seed = int(jax.random.randint(random_key, (), 0, 2**31 - 1))
    runtime = vc.make_runtime(policy.precision, policy.spec)
    client = vc.VariableClient(variable_source, runtime, self.config.variable_update_period)
    client.update_and_wait()
    return actors.FeedForwardActor(runtime, policy.selector, client, adder, seed=seed)

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
      from actorq.quantization import qat
      transform = lambda p: qat.fake_quant_params(p, bits=c.qat_bits)
    critic_loss, q_value = self.critic_functions(networks)
    policy_opt, critic_opt = self.make_optimizers()
    dummy = np.zeros(environment_spec.observations.shape, np.float32)
    return learning.DPGLearner(
        networks, dataset, random_key, dummy, policy_opt, critic_opt, c.discount,
        critic_loss, q_value, c.target_update_period, c.target_update_tau, c.dqda_clipping,
        transform, logger=logger_fn("learner"), counter=counter)
