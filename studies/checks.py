"""What the study commands (`actorq export`, `actorq quantize`) can study: one feed-forward
policy of a single-agent run; anything else is refused in one line naming what does work."""
from __future__ import annotations

from actorq import core
from actorq.components.envs import multi_agent
from actorq.quantization import network_spec

def check_feed_forward(networks, agent: str, command: str) -> None:
  """`actorq export` and `quantize` execute one feed-forward `NetworkSpec`; a recurrent
  policy (R2D2's `RecurrentSpec`) is refused in one line (`actorq eval` runs it).

  Raises:
    core.UsageError: naming the agent, the command and what does work.
  """
  if isinstance(networks.spec, network_spec.RecurrentSpec):
    raise core.UsageError(
        f"actorq {command} does not support recurrent policies yet (agent "
        f"{agent!r}: an LSTM Q-network); 'actorq eval --checkpoint RUN "
        "--precision P' evaluates it at fp32, fp16, bf16 or int8")


def check_single_agent(env_id: str, run_path: str, command: str) -> None:
  """`actorq quantize` studies one single-agent policy; a multi-agent run (a ``pz:`` id) is
  refused in one line (`actorq eval` evaluates it).

  Raises:
    core.UsageError: naming the environment, the command and what does work.
  """
  if multi_agent.is_multi_agent(env_id):
    raise core.UsageError(
        f"{env_id} is a multi-agent run: actorq {command} studies single-agent policies only "
        f"for now; evaluate it with: actorq eval --checkpoint {run_path}")
