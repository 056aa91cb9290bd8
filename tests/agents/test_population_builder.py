"""`agents.population` (issue 52): which agents can form a population is a property of the
agent's builder (declared in its own class body, not inherited), and a population's own
settings are a checked config that round-trips through the run directory's JSON."""
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
