"""A2C builder: Acme's builder contract over the shared rollout-queue machinery
(`actorq.agents.onpolicy_common`)."""
from __future__ import annotations

from actorq.agents.a2c import config as config_lib
from actorq.agents.a2c import learning
from actorq.agents.a2c import networks
from actorq.agents import onpolicy_common as onpolicy


class A2CBuilder(onpolicy.OnPolicyBuilder):
  """Rollout queue, sequence adder, stochastic actor (extras: behaviour log-probs) and
  the A2C learner. One learner step per `batch_size` rollouts of `rollout_length` steps."""
  config_class = config_lib.A2CConfig
  networks_lib = networks
  learning_lib = learning
