"""PPO builder: Acme's builder contract over the shared rollout-queue machinery
(`actorq.agents.onpolicy_common`)."""
from __future__ import annotations

from actorq.agents.ppo import config as config_lib
from actorq.agents.ppo import learning
from actorq.agents.ppo import networks
from actorq.agents import onpolicy_common as onpolicy


class PPOBuilder(onpolicy.OnPolicyBuilder):
  """Rollout queue, sequence adder, stochastic actor (extras: behaviour log-probs) and
  the PPO learner. One learner step per `batch_size` rollouts of `rollout_length` steps."""
  config_class = config_lib.PPOConfig
  networks_lib = networks
  learning_lib = learning

  def make_optimizer(self):
    """`num_epochs` x minibatches optimizer updates per learner step (PPO's schedule
    counts them: `learning.make_optimizer`)."""
    return learning.make_optimizer(self.config)
