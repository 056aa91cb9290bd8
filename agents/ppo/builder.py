"""PPO builder: the on-policy family's (`onpolicy_common.OnPolicyBuilder`: rollout queue,
sequence adder, stochastic actor) with PPO's networks, clipped-surrogate update and its
own optimizer schedule."""
from __future__ import annotations

from actorq.agents import onpolicy_common as onpolicy
from actorq.agents.ppo import config as config_lib
from actorq.agents.ppo import learning
from actorq.agents.ppo import networks


class PPOBuilder(onpolicy.OnPolicyBuilder):
  """The PPO learner: `num_epochs` passes of minibatch SGD on the clipped surrogate per
  learner step."""
  config_class = config_lib.PPOConfig
  networks_lib = networks
  learning_lib = learning

  def make_optimizer(self):
    """`num_epochs` x minibatches optimizer updates per learner step (PPO's schedule
    counts them: `learning.make_optimizer`)."""
    return learning.make_optimizer(self.config)
