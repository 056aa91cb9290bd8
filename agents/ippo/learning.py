"""IPPO's learner: PPO's (`agents/ppo/learning.py`: GAE and the clipped surrogate, the
importance correction against the actors' int8 behaviour log-probs), one per parameter
group, on that group's rollouts (each an agent's own time steps, `[B, T + 1]`)."""
from actorq.agents.onpolicy_common.learning import OnPolicyLearner
from actorq.agents.ppo.learning import make_update, rollout_targets

__all__ = ["OnPolicyLearner", "make_update", "rollout_targets"]
