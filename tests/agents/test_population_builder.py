"""`agents.population` (issue 52): which agents can form a population is a property of the
agent's builder (declared in its own class body, not inherited), and a population's own
settings are a checked config that round-trips through the run directory's JSON; PBT's
synchronous ready rounds (`ReadyRounds`) are population logic, tested here on their own."""
import json

import numpy as np
import pytest

from actorq.agents import population
from actorq.agents.dqn import builder as dqn_builder
from actorq.agents.dqn import population as dqn_population
from actorq.agents.qdagger import builder as qdagger_builder
from actorq.agents.sac import population as sac_population
from actorq.agents.td3 import population as td3_population
from actorq.agents import registry


def test_the_agents_that_form_a_population_are_those_whose_builders_declare_one():
  found = {name: population.learner_class(registry.get(name)[1]) for name in registry.names()}
  assert {name: cls for name, cls in found.items() if cls is not None} == {
      "dqn": dqn_population.DQNPopulation, "td3": td3_population.TD3Population,
      "sac": sac_population.SACPopulation}


def test_a_subclass_does_not_inherit_it_and_opts_in_with_one_method():
  # QDagger extends DQN's builder with another loss: another agent, no population.
  assert issubclass(qdagger_builder.QDaggerBuilder, dqn_builder.DQNBuilder)
  assert population.learner_class(qdagger_builder.QDaggerBuilder) is None

  class OptedIn(dqn_builder.DQNBuilder):

    @staticmethod
    def population_learner():
      return dqn_population.DQNPopulation

  assert population.learner_class(OptedIn) is dqn_population.DQNPopulation
  member = OptedIn(dqn_builder.DQNBuilder.config_class())
  built = population.PopulationBuilder(member, population.PopulationConfig(size=3))
  assert built.learner_class() is dqn_population.DQNPopulation
  assert built.min_replay_size() == member.min_replay_size()
  with pytest.raises(ValueError, match="QDaggerBuilder declares no population learner"):
    population.PopulationBuilder(qdagger_builder.QDaggerBuilder(
        qdagger_builder.QDaggerBuilder.config_class()), population.PopulationConfig(size=3))


def test_population_config_round_trips_and_refuses_bad_values():
  config = population.PopulationConfig(size=4, mutate=["learning_rate", "discount"],
                                       quantile=0.5, resample_probability=0.0)
  assert config.mutate == ("learning_rate", "discount")
  assert population.PopulationConfig.from_json(config.to_json()) == config
  assert population.PopulationConfig.from_json({"size": 2}) == population.PopulationConfig(2)
  for kwargs, message in [({"size": 0}, "population size must be an integer >= 1, got 0"),
                          ({"size": 2, "mutate": ("discount", "discount")}, "repeats a field"),
                          ({"size": 2, "quantile": 0.6}, r"quantile 0.6: allowed \(0, 0.5\]"),
                          ({"size": 2, "resample_probability": 2.0},
                           r"resample probability 2.0: allowed \[0, 1\]")]:
    with pytest.raises(ValueError, match=message):
      population.PopulationConfig(**kwargs)


def test_supported_agents_and_their_mutable_fields_come_from_the_builders():
  assert population.supported_agents() == ["dqn", "sac", "td3"]
  assert population.mutable_fields()["dqn"] == list(dqn_population.DQNPopulation.HYPERPARAMETERS)


class _Learner:
  """What `ReadyRounds` reads of a population learner: values, step counts, exploit
  (bottom member copies the top one, as truncation selection at quantile 1/N)."""

  class _State:
    steps = [10, 11, 12, 13]

  class _Members:
    LEARNER_FIELDS = ("learning_rate",)

  def __init__(self):
    self.n, self.state, self.members = 4, self._State(), self._Members()
    self.values = [{"learning_rate": 1e-3 * (m + 1), "actor_precision": "fp32"}
                   for m in range(4)]
    self.exploits = []

  def precision(self, m):
    return self.values[m]["actor_precision"]

  def exploit(self, fitness, frozen):
    self.exploits.append((list(fitness), list(frozen)))
    loser, winner = int(np.argmin(fitness)), int(np.argmax(fitness))
    return [] if frozen[loser] else [(loser, winner)]


class _Actor:

  def __init__(self):
    self.actor_steps = np.zeros(4, np.int64)
    self.updated = []

  def take_cost(self, m):
    return 1e-6 * (m + 1)

  def update_member(self, m):
    self.updated.append(m)


def test_ready_rounds_exploit_whole_rounds_only_and_round_trip_a_checkpoint():
  learner, actor = _Learner(), _Actor()
  rounds = population.ReadyRounds(learner, actor, ready_every=100, steps=200)
  actor.actor_steps[:] = [100, 99, 100, 100]
  assert rounds.due() == [0, 2, 3] and rounds.evaluating()
  scalars = rounds.record([0, 2, 3], np.array([5.0, 9.0, 7.0]))
  assert [s["member"] for s in scalars] == [0, 2, 3] and learner.exploits == []
  assert scalars[1]["actor_us_per_step"] == pytest.approx(3.0)
  assert rounds.due() == [] and list(rounds.next_ready) == [200, 100, 200, 200]
  saved = rounds.save()
  actor.actor_steps[1] = 100
  rounds.record([1], np.array([0.5]))  # the round is whole: member 1 copies member 2
  assert learner.exploits == [([5.0, 0.5, 9.0, 7.0], [False] * 4)]
  assert actor.updated == [1]
  assert [(r["member"], r["actor_steps"], r["learner_steps"], r["copied_from"])
          for r in rounds.rows] == [(0, 100, 10, ""), (2, 100, 12, ""), (3, 100, 13, ""),
                                    (1, 100, 11, 2)]
  assert rounds.rows[0]["learning_rate"] == 1e-3 and "actor_precision" not in rounds.rows[0]
  assert rounds.rows[0]["precision"] == "fp32"
  # A checkpoint taken before member 1's evaluation continues to the same rows.
  again = population.ReadyRounds(_Learner(), actor, ready_every=100, steps=200)
  again.restore(json.loads(json.dumps(saved)))
  again.record([1], np.array([0.5]))
  assert again.rows == rounds.rows
  # The last round (at `steps`): every member frozen, nothing copied, nothing more due.
  actor.actor_steps[:] = 200
  rounds.record([0, 1, 2, 3], np.array([1.0, 2.0, 3.0, 4.0]))
  assert learner.exploits[-1][1] == [True] * 4
  assert rounds.final_returns() == [1.0, 2.0, 3.0, 4.0]
  assert rounds.due() == [] and not rounds.evaluating()
