"""studies/reward_parity.py: what reward_parity refuses."""
import pytest

from actorq.agents.r2d2 import networks as r2d2_networks
from actorq.studies import reward_parity as evaluation


def test_reward_parity_refuses_a_recurrent_spec():
  # Its agreement replays single observations, which a recurrent policy cannot act on.
  spec = r2d2_networks.recurrent_spec(2, 2, (8,), 4, dueling=False)
  with pytest.raises(ValueError, match="feed-forward NetworkSpec"):
    evaluation.reward_parity(lambda: None, {}, spec, None, ("fp32", "int8"), 1)
