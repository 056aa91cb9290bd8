"""PPO (Schulman et al. 2017): the clipped surrogate objective with GAE.

`from actorq.agents import ppo` as in Acme: ppo.PPOConfig, ppo.PPOBuilder,
ppo.make_networks, ppo.OnPolicyLearner (the family's, driven by make_update) and its
losses."""
from actorq.agents.ppo.config import PPOConfig
from actorq.agents.ppo.networks import PPONetworks, make_networks
from actorq.agents.ppo.learning import (
    MAX_LOG_RATIO, gae_advantages, learning_rate_schedule, make_optimizer, make_update,
    ppo_loss, rollout_targets, sgd_updates_per_learner_step)
from actorq.agents.onpolicy_common.learning import OnPolicyLearner
from actorq.agents.ppo.builder import PPOBuilder
