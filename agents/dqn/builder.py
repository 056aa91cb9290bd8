"""DQN builder: Acme's builder contract, shared by the local and distributed launchers."""
from __future__ import annotations

from typing import Iterator, List, Optional

import jax
import numpy as np
import optax
import reverb
from acme import specs

from actorq import core
from actorq.agents.dqn import config as config_lib
from actorq.agents.dqn import learning
from actorq.agents.dqn import networks as networks_lib
from actorq.agents.dqn import population
from actorq.components import builders
from actorq.components.acting import actors
from actorq.components.replay import reverb_replay as replay
from actorq.quantization import qat


def q_value_selector(selector: actors.Selector) -> actors.Selector:
  """`selector` applied to `networks.dueling_q(outputs)`: an actor running a dueling
  spec (outputs [V, A_1..A_n]) selects from Q-values [n] (batch form: [K, n])."""

  inner = actors.batch_form(selector)

  def select(outputs: np.ndarray, rng: np.random.Generator, step: int):
    return selector(networks_lib.dueling_q(np.asarray(outputs)), rng, step)

  return actors.with_batch(select, lambda outputs, rng, steps: inner(
      networks_lib.dueling_q(np.asarray(outputs)), rng, steps))


def q_policy(config, networks, evaluation: bool = False) -> core.ActorPolicy:
  """The policy of a Q-network (DQN's, and R2D2's recurrent one): greedy at
  `evaluation_precision` (None: `actor_precision`) for evaluation, else epsilon-greedy with
  epsilon from `epsilon_start` to `epsilon_end` over `epsilon_decay_steps` actor steps;
  over `dueling_q` of the outputs when `networks.dueling`. `networks.spec` is what the
  actors run."""
  c = config
  wrap = q_value_selector if networks.dueling else (lambda selector: selector)
  if evaluation:
    return core.ActorPolicy(networks.spec, c.policy_precision(True), wrap(actors.greedy),
                            True)
  epsilon = actors.linear_schedule(c.epsilon_start, c.epsilon_end, c.epsilon_decay_steps)
  return core.ActorPolicy(networks.spec, c.policy_precision(False),
                          wrap(actors.epsilon_greedy(epsilon)), False)


def q_outputs(networks) -> core.PolicyOutputs:
  """What a Q-network's outputs mean (DQN's, and R2D2's recurrent one): Q-values, or with
  `networks.dueling` the dueling head's [V, A_1..A_n] whose Q is `dueling_q`."""
  if networks.dueling:
    return core.PolicyOutputs("q_values", networks_lib.dueling_q,
                              "argmax(y[1:]) (y = [V, A_1..A_n]; argmax Q = argmax A)")
  return core.PolicyOutputs("q_values", None, "argmax(y)")


class DQNBuilder(builders.TransitionReplayBuilder):
  """DQN's networks, policies, replay table and learner; dataset, adder and actor come
  from `TransitionReplayBuilder`."""
  config_class = config_lib.DQNConfig

  @staticmethod
  def population_learner():
    """DQN forms a population (`agents.population`): N members in one vmapped
    `DQNUpdate` (`population.DQNPopulation`)."""
    return population.DQNPopulation

  def make_networks(self, environment_spec: specs.EnvironmentSpec) -> networks_lib.DQNNetworks:
    return networks_lib.make_networks(environment_spec, self.config.hidden_sizes,
                                      dueling=self.config.dueling)

  def make_replay_tables(self, environment_spec: specs.EnvironmentSpec, policy=None,
                         rate_limited: bool = False) -> List[reverb.Table]:
    """One transition table; Reverb's Prioritized(priority_exponent) selector when
    `prioritized_replay`, else uniform (see `TransitionReplayBuilder`)."""
    c = self.config
    if not c.prioritized_replay:
      return super().make_replay_tables(environment_spec, policy, rate_limited)
    return [replay.transition_table(
        c.replay_table_name, environment_spec, max_size=c.max_replay_size,
        min_size=c.min_replay_size,
        samples_per_insert=c.samples_per_insert if rate_limited else None,
        prioritized=True, priority_exponent=c.priority_exponent)]

  def make_policy(self, networks: networks_lib.DQNNetworks,
                  environment_spec: specs.EnvironmentSpec, evaluation: bool = False) -> core.ActorPolicy:
    del environment_spec
    return q_policy(self.config, networks, evaluation)

  def policy_outputs(self, networks: networks_lib.DQNNetworks,
                     environment_spec: specs.EnvironmentSpec) -> core.PolicyOutputs:
    """Q-values, dueling-combined when `config.dueling` (`q_outputs`)."""
    del environment_spec
    return q_outputs(networks)

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
    """Raises ValueError when `prioritized_replay` is set and no `replay_client` is
    given (priorities are written through it)."""
    c = self.config
    transform = None
    if c.qat_bits is not None:
      transform = lambda p: qat.fake_quant_params(p, bits=c.qat_bits)
    dummy = np.zeros(environment_spec.observations.shape, environment_spec.observations.dtype)
    return learning.DQNLearner(
        networks.network, dataset, random_key, dummy, self.make_optimizer(), c.discount,
        c.target_update_period, c.huber_delta, c.double_q, transform,
        logger=logger_fn("learner"), counter=counter,
        prioritized=self.make_prioritized_replay(replay_client),
        td_operator=self.make_td_operator())

  def make_prioritized_replay(self, replay_client: Optional[reverb.Client]
                              ) -> Optional[learning.PrioritizedReplay]:
    """The learner's priority updates and importance weights (Schaul et al. 2016) when
    `prioritized_replay`, else None; every learner built on DQN's config takes it from here.

    Raises:
      ValueError: `prioritized_replay` is set and `replay_client` is None (priorities are
        written through it).
    """
    c = self.config
    if not c.prioritized_replay:
      return None
    if replay_client is None:
      raise ValueError("prioritized_replay=True needs the replay_client to update "
                       "priorities through; got None")
    return learning.PrioritizedReplay(
        replay_client, c.replay_table_name, c.importance_sampling_exponent,
        c.importance_sampling_annealing_steps, c.priority_epsilon)

  def make_td_operator(self) -> learning.TDOperator:
    """The TD target's operator of the config (`td_operator`, its alpha, Munchausen's
    temperature), as every learner built on DQN's config takes it."""
    return learning.TDOperator.of_config(self.config)
