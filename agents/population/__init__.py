"""A population of one agent's members as one agent (issue 52): `PopulationBuilder` holds the
member's builder and a `PopulationConfig`; its learner steps the N members in one vmapped
update and runs PBT's exploit/explore, its actor acts for every member. An agent can form
a population when its builder declares `population_learner()` (`learner_class`)."""
from actorq.agents.population.config import PopulationConfig
from actorq.agents.population.builder import (PopulationBuilder, learner_class, mutable_fields,
                                              supported_agents)
from actorq.agents.population.learning import PopulationLearner
from actorq.agents.population.acting import PopulationActor
from actorq.agents.population.rounds import ReadyRounds
from actorq.agents.population.local_run import PopulationRun
