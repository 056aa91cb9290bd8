"""`agents.population.program` (issue 52): a population on the builder contract a program's
nodes use, stepped here in one process without Launchpad: its family's actor loop writes
each member's rows into the member's own table, the learner steps every member on the
zipped dataset, the actor pulls the learner's members, and `record_round` records a ready
round and exploits (learner-side) and round-trips through the learner's checkpoint."""
import dataclasses

import jax
import numpy as np
from acme.utils import counting

from actorq.agents import population
from actorq.agents.dqn import builder as dqn_builder
from actorq.agents.population import program
from actorq.components.replay import local_replay
from actorq.launch import experiment


def _population():
  member = dqn_builder.DQNBuilder(dataclasses.replace(
      dqn_builder.DQNBuilder.config_class(), hidden_sizes=(16,), min_replay_size=20,
      batch_size=8))
  builder = population.PopulationBuilder(member, population.PopulationConfig(
      size=2, quantile=0.5), seed=3)
  return experiment.ExperimentConfig(builder=builder, env_id="gym:CartPole-v1",
                                     num_steps=400, eval_every=200, eval_episodes=1, seed=3)


def test_a_population_acts_learns_and_records_rounds_through_the_builder_contract():
  config = _population()
  builder, family = config.builder, experiment.environments_of(config)
  assert isinstance(family, program.PopulationEnvironments)
  env = family.make(config, config.seed)
  parts = experiment.parts_for(config, env)
  tables = builder.make_replay_tables(parts.environment_spec, parts.policy, rate_limited=True)
  assert [t.name for t in tables] == ["priority_table_member0", "priority_table_member1"]
  client = local_replay.LocalReplayClient(
      builder.make_replay_tables(parts.environment_spec), seed=0)
  counter = counting.Counter()
  learner = builder.make_learner(jax.random.PRNGKey(0), parts.networks,
                                 builder.make_dataset_iterator(client), None,
                                 parts.environment_spec, client, counter)
  adders, actor = family.make_actor(config, parts, jax.random.PRNGKey(1), client, learner)
  calls = iter(range(10**6))
  loop = family.make_loop(config, env, actor, [], should_stop=lambda: next(calls) >= 60)
  loop.run()
  family.close(env)
  # One actor step per moving row: 60 vector steps of 2 rows, less the resets.
  assert loop.steps == int(actor.actor_steps.sum()) and 50 < min(actor.actor_steps) <= 60
  info = client.server_info()
  assert [info[t.name].current_size for t in tables] == [a.items_written for a in adders]
  assert min(a.items_written for a in adders) >= 20
  for _ in range(3):
    learner.step()
  assert learner.step_count == 3 and learner.learner_steps.tolist() == [3, 3]
  assert counter.get_counts()["steps"] == 3
  learner.values[1]["actor_precision"] = "int8"  # (as an exploit/explore may set it)
  actor.update()
  assert actor.policy_version == 3 and actor.learner.precision(1) == "int8"
  observations = np.zeros((2,) + parts.environment_spec.observations.shape, np.float32)
  assert actor.act(observations).shape == (2,)
  assert actor.runtimes[1][0] == "int8" and 0 not in actor.runtimes  # member 0: batched fp32
  params = learner.get_variables(["policy"])[0]
  assert {x.shape[0] for x in jax.tree_util.tree_leaves(params)} == {2}

  rows = learner.record_round([1.0, 5.0], 200, 400)  # summed actor steps: 100 each
  assert [(r["member"], r["actor_steps"], r["learner_steps"], r["episode_return"],
           r["copied_from"]) for r in rows] == [(0, 100, 3, 1.0, 1), (1, 100, 3, 5.0, "")]
  for a, b in zip(*(jax.tree_util.tree_leaves(jax.tree_util.tree_map(lambda x: x[m],
                                                                     learner.state))
                    for m in (0, 1))):
    np.testing.assert_array_equal(a, b)  # member 0 copied member 1 exactly (no --mutate)

  saved = learner.save()
  assert "replay" not in saved and saved["rows"] == rows
  resumed = builder.make_learner(jax.random.PRNGKey(9), parts.networks, iter(()), None,
                                 parts.environment_spec, client, counting.Counter())
  resumed.restore(saved)
  assert resumed.ready.rows == rows and resumed.step_count == 3
  final = resumed.record_round([5.0, 1.0], 401, 400)  # at the limit: past the last steps
  assert [(r["member"], r["actor_steps"], r["copied_from"]) for r in final] == [
      (0, 200, ""), (1, 200, "")]
  assert resumed.ready.final_returns() == [5.0, 1.0]
