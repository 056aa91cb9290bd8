"""R2D2 builder: Acme's builder contract, shared by the local and distributed launchers.

    actor (RecurrentActor: RecurrentRuntime at actor_precision, LSTM state kept, zeroed
    at each episode start) -> CountingSequenceAdder (acme's SequenceAdder: sequences of
    L = burn_in + trace + 1 steps every `sequence_period` steps, zero-padded at episode
    ends; extras = LSTM state before each step + `real`) -> prioritized sequence table
    -> batches [B, L] -> R2D2Learner (burn-in, rescaled n-step double-Q, priorities back)
"""
from __future__ import annotations

from typing import Iterator, List, Optional

import jax
import numpy as np
import optax
import reverb
from acme import specs
from acme.adders import reverb as adders_reverb

from actorq import core
from actorq.agents.dqn.builder import q_outputs, q_policy
from actorq.agents.r2d2 import config as config_lib
from actorq.agents.r2d2 import learning
from actorq.agents.r2d2 import networks as networks_lib
from actorq.components import builders
from actorq.components.acting import actors
from actorq.components.replay import adders, reverb_replay as replay


def extras_spec(lstm_size: int):
  """What every step of a sequence carries besides the environment's columns: the
  actor's LSTM state before the step, float32 [H] each, and `real` (1.0 for a step the
  actor acted in; acme's terminal step and the zero padding hold 0)."""
  state = specs.Array((int(lstm_size),), np.float32)
  return {"core_state": {"hidden": state, "cell": state},
          "real": specs.Array((), np.float32)}


class R2D2Builder(builders.ReplayTableBuilder):
  """R2D2's networks, policies, sequence table, adder, recurrent actor and learner (not a
  `TransitionReplayBuilder`: its table holds sequences, and it has no batched adder)."""
  config_class = config_lib.R2D2Config
  actor_class = actors.RecurrentActor  # its runtime executes a `RecurrentSpec`

  def learner_steps_owed(self, progress: core.ReplayProgress) -> int:
    """Samples-per-insert over sequences: one learner step per batch_size /
    samples_per_insert sequences written."""
    c = self.config
    return int(progress.items_written * c.samples_per_insert // c.batch_size)

  # --- Acme's builder contract --------------------------------------------------------
  def make_networks(self, environment_spec: specs.EnvironmentSpec) -> networks_lib.R2D2Networks:
    c = self.config
    return networks_lib.make_networks(environment_spec, c.torso_sizes, c.lstm_size, c.dueling)

  def make_replay_tables(self, environment_spec: specs.EnvironmentSpec, policy=None,
                         rate_limited: bool = False) -> List[reverb.Table]:
    """One prioritized table of sequences (Prioritized(priority_exponent) selector, FIFO
    remover). `rate_limited`: enforce samples_per_insert in Reverb (distributed); the
    single-process loop enforces it itself."""
    del policy
    c = self.config
    signature = adders_reverb.SequenceAdder.signature(
        environment_spec, extras_spec(c.lstm_size), sequence_length=c.sequence_length)
    return [reverb.Table(
        name=c.replay_table_name, sampler=reverb.selectors.Prioritized(c.priority_exponent),
        remover=reverb.selectors.Fifo(), max_size=int(c.max_replay_size),
        rate_limiter=replay.rate_limiter(c.min_replay_size,
                                         c.samples_per_insert if rate_limited else None),
        signature=signature)]

  def make_adder(self, replay_client: reverb.Client, environment_spec: specs.EnvironmentSpec,
                 policy=None) -> replay.ValidatingAdder:
    del policy
    c = self.config
    adder = adders.CountingSequenceAdder(
        replay_client, sequence_length=c.sequence_length, period=c.sequence_period,
        priority_fns={c.replay_table_name: None},
        end_of_episode_behavior=adders_reverb.EndBehavior.ZERO_PAD)
    return replay.ValidatingAdder(adder, environment_spec, extras_spec(c.lstm_size))

  def make_policy(self, networks: networks_lib.R2D2Networks,
                  environment_spec: specs.EnvironmentSpec,
                  evaluation: bool = False) -> core.ActorPolicy:
    del environment_spec
    return q_policy(self.config, networks, evaluation)

  def policy_outputs(self, networks: networks_lib.R2D2Networks,
                     environment_spec: specs.EnvironmentSpec) -> core.PolicyOutputs:
    """The recurrent head's Q-values, dueling-combined when `config.dueling`."""
    del environment_spec
    return q_outputs(networks)

  def make_optimizer(self) -> optax.GradientTransformation:
    c = self.config
    return optax.chain(optax.clip_by_global_norm(c.max_gradient_norm),
                       optax.adam(c.learning_rate, eps=c.adam_eps))

  def make_learner(self, random_key: jax.Array, networks: networks_lib.R2D2Networks,
                   dataset: Iterator[reverb.ReplaySample], logger_fn,
                   environment_spec: specs.EnvironmentSpec,
                   replay_client: Optional[reverb.Client] = None,
                   counter=None) -> learning.R2D2Learner:
    """Raises ValueError when no `replay_client` is given (priorities are written
    through it)."""
    del environment_spec
    if replay_client is None:
      raise ValueError("R2D2's prioritized replay needs the replay_client to update "
                       "priorities through; got None")
    c = self.config
    return learning.R2D2Learner(networks, dataset, random_key, self.make_optimizer(), c,
                                replay_client, c.replay_table_name,
                                logger=logger_fn("learner"), counter=counter)
