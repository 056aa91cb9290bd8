"""Independent DQN's learner: DQN's (`agents/dqn/learning.py`: double Q, n-step returns,
prioritized replay), one per parameter group, on that group's agents' own transitions
(an agent's termination ends its n-step return with discount 0, a truncation keeps 1)."""
from actorq.agents.dqn.learning import DQNLearner, dqn_loss

__all__ = ["DQNLearner", "dqn_loss"]
