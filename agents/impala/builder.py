"""IMPALA builder: Acme's builder contract over the shared rollout-queue machinery
(`actorq.agents.onpolicy_common`); the queue rate-limits actors when several feed it."""
from __future__ import annotations

from actorq.agents import onpolicy_common as onpolicy
from actorq.agents.impala import config as config_lib
from actorq.agents.impala import learning
from actorq.agents.impala import networks


class IMPALABuilder(onpolicy.OnPolicyBuilder):
  """Rollout queue, sequence adder, stochastic actor (extras: behaviour log-probs) and
  the IMPALA (V-trace) learner. One learner step per `batch_size` rollouts of `rollout_length` steps."""
  config_class = config_lib.IMPALAConfig
  networks_lib = networks
  learning_lib = learning
