"""PPO (Schulman et al. 2017): the clipped surrogate objective with GAE.

As in Acme, the package is the agent's public face:

    from actorq.agents import ppo
    config = ppo.PPOConfig(...)
    builder = ppo.PPOBuilder(config)

Exports the config, networks, learner (with its losses) and builder; results: README.md.

The learner is `actorq.agents.onpolicy_common.OnPolicyLearner`, re-exported here, driven by
this package's `make_update`."""
from actorq.agents.ppo.config import PPOConfig
from actorq.agents.ppo.networks import PPONetworks, make_networks
from actorq.agents.ppo.learning import (
    MAX_LOG_RATIO, gae_advantages, learning_rate_schedule, make_optimizer, make_update,
    ppo_loss, sgd_updates_per_learner_step)
from actorq.agents.ppo.builder import PPOBuilder
from actorq.agents.onpolicy_common.learning import OnPolicyLearner

__all__ = [
    "MAX_LOG_RATIO",
    "OnPolicyLearner",
    "PPOBuilder",
    "PPOConfig",
    "PPONetworks",
    "gae_advantages",
    "learning_rate_schedule",
    "make_networks",
    "make_optimizer",
    "make_update",
    "ppo_loss",
    "sgd_updates_per_learner_step",
]
