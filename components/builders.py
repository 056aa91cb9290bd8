"""The builder methods every off-policy agent on n-step transitions shares.

`TransitionReplayBuilder` implements, from fields of `self.config`, the parts of Acme's
builder contract that do not depend on the agent (the replay table, dataset, adder and
actor) and the three methods actorq's single-process loop asks for. An agent subclasses
it and adds `make_networks`, `make_policy` and `make_learner`.

Config fields read: `replay_table_name`, `min_replay_size`, `max_replay_size`,
`samples_per_insert` (sampled items per inserted item), `batch_size`, `n_step`,
`discount`, `variable_update_period` (actor steps between parameter pulls).
A policy passed to `make_actor` has `spec` (its `NetworkSpec`), `precision` and
`selector` (see `actorq.components.acting.actors`).
"""
from __future__ import annotations

from typing import Iterator, List, Optional

import jax
import reverb
from acme import adders as acme_adders
from acme import specs

from actorq import core

from actorq.components.acting import actors
from actorq.components.acting import variable_client as vc
from actorq.components.replay import adders, local_replay, reverb_replay as replay


class ReplayTableBuilder:
  """What the single-process loop asks every replay-table builder (launch/local.py),
  from `config.min_replay_size` and `config.replay_table_name`; a subclass adds
  `learner_steps_owed` and Acme's builder methods. Its dataset iterator and actor serve
  every such builder; `actor_class` is the actor `make_actor` builds (its constructor
  takes `(runtime, selector, variable_client, adder, seed=)`)."""
  actor_class = actors.FeedForwardActor

  def __init__(self, config):
    self.config = config

  def min_replay_size(self) -> int:
    return self.config.min_replay_size

  def replay_table_name(self) -> str:
    return self.config.replay_table_name

  # --- Acme's builder contract --------------------------------------------------------
  def make_dataset_iterator(self, replay_client: reverb.Client) -> Iterator[reverb.ReplaySample]:
    """Batches of `batch_size` items (transitions, or R2D2's sequences) from Reverb, or
    from the single-process run's seeded in-process replay (`replay.make_iterator`)."""
    return replay.make_iterator(replay_client, self.config.replay_table_name,
                                self.config.batch_size)

  def make_actor(self, random_key: jax.Array, policy, environment_spec: specs.EnvironmentSpec,
                 variable_source: core.VariableSource,
                 adder: Optional[acme_adders.Adder] = None) -> actors.FeedForwardActor:
    """An `actor_class` actor whose runtime executes `policy.spec` at `policy.precision`,
    refreshed from `variable_source` every `variable_update_period` actor steps."""
    del environment_spec
    seed = int(jax.random.randint(random_key, (), 0, 2**31 - 1))
    runtime = vc.make_runtime(policy.precision, policy.spec)
    client = vc.VariableClient(variable_source, runtime, self.config.variable_update_period)
    client.update_and_wait()
    return self.actor_class(runtime, policy.selector, client, adder, seed=seed)


class TransitionReplayBuilder(ReplayTableBuilder):
  """Replay, dataset, adder and actor of an agent learning from n-step transitions."""

  def learner_steps_owed(self, progress: core.ReplayProgress) -> int:
    """Samples-per-insert: one learner step per batch_size / samples_per_insert actor steps."""
    c = self.config
    return int(progress.actor_steps * c.samples_per_insert // c.batch_size)

  # --- Acme's builder contract --------------------------------------------------------
  def make_replay_tables(self, environment_spec: specs.EnvironmentSpec, policy=None,
                         rate_limited: bool = False) -> List[reverb.Table]:
    """One transition table. `rate_limited`: enforce samples_per_insert in Reverb
    (distributed); the single-process loop enforces it itself and uses MinSize."""
    del policy
    c = self.config
    return [replay.transition_table(
        c.replay_table_name, environment_spec, max_size=c.max_replay_size,
        min_size=c.min_replay_size,
        samples_per_insert=c.samples_per_insert if rate_limited else None)]

  def make_adder(self, replay_client: reverb.Client, environment_spec: specs.EnvironmentSpec,
                 policy=None) -> acme_adders.Adder:
    """The n-step transition adder of one environment: acme's (checked by
    `replay.ValidatingAdder`) to a Reverb server; to the single-process run's
    `LocalReplayClient`, `adders.SingleEnvAdder` (the same items, same checks, written at
    the same steps, several times cheaper per step)."""
    c = self.config
    if isinstance(replay_client, local_replay.LocalReplayClient):
      return adders.SingleEnvAdder(self.make_batched_adder(replay_client, environment_spec,
                                                           policy, num_envs=1))
    adder = adders.NStepTransitionAdder(replay_client, n_step=c.n_step, discount=c.discount,
                                        priority_fns={c.replay_table_name: None})
    return replay.ValidatingAdder(adder, environment_spec)

  def make_batched_adder(self, replay_client: reverb.Client,
                         environment_spec: specs.EnvironmentSpec, policy=None,
                         num_envs: int = 1) -> adders.BatchedNStepTransitionAdder:
    """The n-step transitions of `num_envs` environments, each through its own window,
    written in one batched call per actor step (vectorized actors; see
    `adders.BatchedNStepTransitionAdder`)."""
    del policy
    c = self.config
    return adders.BatchedNStepTransitionAdder(replay_client, c.replay_table_name, num_envs,
                                              c.n_step, c.discount, environment_spec)
