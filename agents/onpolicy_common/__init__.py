"""The on-policy family (PPO, A2C, IMPALA): config, networks, learning and builder shared by
the three agents, which add their losses. `from actorq.agents import onpolicy_common as
onpolicy` gives the public names of the four modules in one namespace."""
from actorq.agents.onpolicy_common.config import (ACTIVATIONS, CorrectedOnPolicyConfig,
                                                  OnPolicyConfig)
from actorq.agents.onpolicy_common.networks import (
    LOG_STD_MAX, LOG_STD_MIN, ActorCriticNetworks, PolicyHead, behaviour_actions,
    categorical_selector, entropy, extras_spec, gaussian_selector, log_prob,
    make_actor_critic_networks, make_selector, policy_head, split_gaussian)
from actorq.agents.onpolicy_common.learning import (
    OnPolicyLearner, TrainingState, behaviour_kl, gradient_update, learning_rate_schedule,
    make_optimizer, masked_mean, minibatch_indices, normalize_advantages, rollout_forward,
    rollout_loss_update, trace_lambda, transition_mask, truncated_importance_weights)
from actorq.agents.onpolicy_common.builder import OnPolicyBuilder
