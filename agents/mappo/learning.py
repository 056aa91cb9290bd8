"""MAPPO's learner: PPO's (`agents/ppo/learning.py`), unchanged, per parameter group: its
value targets and GAE use the centralized value function of `mappo.networks` (the
networks decide what each part of the stored observation feeds)."""
from actorq.agents.onpolicy_common.learning import OnPolicyLearner
from actorq.agents.ppo.learning import make_update, rollout_targets

__all__ = ["OnPolicyLearner", "make_update", "rollout_targets"]
