"""A2C builder: the on-policy family's (`onpolicy_common.OnPolicyBuilder`: rollout queue,
sequence adder, stochastic actor) with A2C's networks and update."""
from __future__ import annotations

from actorq.agents import onpolicy_common as onpolicy
from actorq.agents.a2c import config as config_lib
from actorq.agents.a2c import learning
from actorq.agents.a2c import networks


class A2CBuilder(onpolicy.OnPolicyBuilder):
  """The A2C learner: one SGD step of the advantage actor-critic loss per learner step
  (the family's optimizer)."""
  config_class = config_lib.A2CConfig
  networks_lib = networks
  learning_lib = learning
