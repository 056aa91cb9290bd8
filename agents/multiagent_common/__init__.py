"""What the multi-agent agents share: a builder composed from a single-agent builder per
parameter group (`IndependentBuilder`) and its config field (`MultiAgentSettings`)."""
from actorq.agents.multiagent_common.builder import IndependentBuilder
from actorq.agents.multiagent_common.config import MultiAgentSettings
