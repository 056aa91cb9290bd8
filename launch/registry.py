"""Agent names -> (config class, builder class). New agents register here."""
from __future__ import annotations

import importlib
from typing import Dict, Tuple

# name -> (module with the config class, config class, module with the builder, builder class)
_AGENTS: Dict[str, Tuple[str, str, str, str]] = {
    "dqn": ("actorq.agents.dqn.config", "DQNConfig", "actorq.agents.dqn.builder", "DQNBuilder"),
    "d4pg": ("actorq.agents.d4pg.config", "D4PGConfig", "actorq.agents.d4pg.builder",
             "D4PGBuilder"),
    "ddpg": ("actorq.agents.ddpg.config", "DDPGConfig", "actorq.agents.ddpg.builder",
             "DDPGBuilder"),
    "td3": ("actorq.agents.td3.config", "TD3Config", "actorq.agents.td3.builder", "TD3Builder"),
    "sac": ("actorq.agents.sac.config", "SACConfig", "actorq.agents.sac.builder", "SACBuilder"),
    "ppo": ("actorq.agents.ppo.config", "PPOConfig", "actorq.agents.ppo.builder", "PPOBuilder"),
    "a2c": ("actorq.agents.a2c.config", "A2CConfig", "actorq.agents.a2c.builder", "A2CBuilder"),
    "impala": ("actorq.agents.impala.config", "IMPALAConfig", "actorq.agents.impala.builder",
               "IMPALABuilder"),
    "r2d2": ("actorq.agents.r2d2.config", "R2D2Config", "actorq.agents.r2d2.builder",
             "R2D2Builder"),
}


class UnknownAgentError(ValueError):
  """An agent name that is not registered."""


def names():
  return sorted(_AGENTS)


def get(name: str):
  """Returns `(ConfigClass, BuilderClass)` for an agent name.

  Raises:
    UnknownAgentError: naming the allowed agents.
  """
  if name not in _AGENTS:
    raise UnknownAgentError(f"unknown agent {name!r}; allowed: {', '.join(names())}")
  cmod, cname, bmod, bname = _AGENTS[name]
  return (getattr(importlib.import_module(cmod), cname),
          getattr(importlib.import_module(bmod), bname))
