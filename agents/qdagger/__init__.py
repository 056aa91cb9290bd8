"""QDagger (Agarwal et al. 2022, "Reincarnating Reinforcement Learning"): a DQN student of
any size distilled from a trained DQN teacher run, with int8 actors from the start if asked.

`from actorq.agents import qdagger`: qdagger.QDaggerConfig, qdagger.QDaggerBuilder,
qdagger.QDaggerLearner, qdagger.distillation_loss, qdagger.distillation_coefficient,
qdagger.load_teacher, qdagger.make_networks (DQN's)."""
from actorq.agents.qdagger.config import QDaggerConfig
from actorq.agents.qdagger.learning import (QDaggerLearner, distillation_coefficient,
                                            distillation_loss)
from actorq.agents.qdagger.networks import Teacher, load_teacher, make_networks
from actorq.agents.qdagger.builder import QDaggerBuilder, greedy_return
