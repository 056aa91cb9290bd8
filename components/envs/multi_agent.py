"""Multi-agent environments: PettingZoo's parallel API behind one adapter, from an id.

Ids ``pz:<module>/<env>`` (the ``"pz"`` row of `MULTI_AGENT_PREFIXES`, this module's
table beside the single-agent `environments.PREFIXES`), e.g.
``pz:mpe2/simple_spread_v3``: ``<module>.<env>`` is imported (``mpe2.simple_spread_v3``)
and its ``parallel_env()`` built; a module with only an AEC ``env()`` goes through
PettingZoo's own `pettingzoo.utils.conversions.aec_to_parallel`. Keyword arguments of
`make_multi_agent_environment` go to that constructor (e.g. ``max_cycles=25``).

    env = make_multi_agent_environment("pz:mpe2/simple_spread_v3", seed=0)
    ts = env.reset()                           # MultiAgentTimeStep, every agent FIRST
    ts = env.step({a: 0 for a in ts.observation})

A `MultiAgentTimeStep` holds dicts keyed by agent name, with an entry for each agent that
took part in the step (the agents alive before it; at a reset every agent). Per agent:

  * the observation is of its spec (`observation_spec()[agent]`, mapped as
    `gymnasium_adapter` maps a Gymnasium space: float32 vectors, uint8 images);
  * the reward is float32 (0 on FIRST); the discount float32 (1 on FIRST);
  * the step type follows PettingZoo's (termination, truncation) of that agent as
    `gymnasium_adapter` maps Gymnasium's (case E2): neither -> MID, discount 1;
    truncation only -> LAST, discount 1 (bootstrap); termination -> LAST, discount 0.

An agent whose step was LAST is absent from later steps of the episode (it sends no action
and gets no observation: agents may finish at different times). The environment's own
``step_type`` is LAST when no agent is left (PettingZoo's ``env.agents`` is empty); the
next `step` then resets (FIRST, the actions ignored), as `GymnasiumToDmEnv` does.

Seeding: the first reset is ``reset(seed=seed)``; later resets continue the environment's
random stream, so a seed fixes every episode of an instance.
"""
from __future__ import annotations

import dataclasses
import importlib
import pkgutil
import threading
from typing import Any, Callable, Dict, NamedTuple, Optional, Sequence, Tuple

import dm_env
import numpy as np
from dm_env import specs as dm_specs

from actorq import core
from actorq.components.envs.gymnasium_adapter import (InvalidActionError, _action_map,
                                                      _observation_map)

__all__ = ["MULTI_AGENT_PREFIXES", "MultiAgentPrefix", "MultiAgentTimeStep",
           "ParallelEnvironment", "is_multi_agent", "make_multi_agent_environment",
           "make_parallel", "parse_pz_name", "shared_specs"]


# One environment's construction, render or close at a time in a process. MPE2's
# environments initialise pygame's FreeType module and load a font in their constructor,
# and their close() calls pygame.quit(), which tears pygame's modules (FreeType's library
# included) down for the whole process; neither is thread-safe. The node threads of a
# `local_mt` program build and close environments at once (the replay, learner and
# evaluator nodes close the one they build for the specs): a close during another
# thread's construction corrupted the heap and aborted the process ("malloc(): unsorted
# double linked list corrupted", SIGABRT or SIGSEGV in whichever thread allocated next;
# seen in CI). Re-entrant: `_construct` closes what it built on an error while holding it.
_LIFECYCLE_LOCK = threading.RLock()


class MultiAgentTimeStep(NamedTuple):
  """One step of a multi-agent environment (see the module docstring).

  Attributes:
    step_type: the environment's `dm_env.StepType`: FIRST at a reset, LAST when no agent
      is left, else MID.
    observation: agent -> its observation (of `observation_spec()[agent]`).
    reward: agent -> float32 reward of this step (0 on FIRST).
    discount: agent -> float32 discount (0 after that agent's termination, else 1).
    agent_step_type: agent -> that agent's `dm_env.StepType`.
  """
  step_type: dm_env.StepType
  observation: Dict[str, np.ndarray]
  reward: Dict[str, np.float32]
  discount: Dict[str, np.float32]
  agent_step_type: Dict[str, dm_env.StepType]

  def first(self) -> bool:
    return self.step_type == dm_env.StepType.FIRST

  def last(self) -> bool:
    return self.step_type == dm_env.StepType.LAST


class ParallelEnvironment:
  """A PettingZoo ``ParallelEnv`` with per-agent specs and `MultiAgentTimeStep`s.

  Args:
    env: a `pettingzoo.ParallelEnv` (or anything with its ``possible_agents``,
      ``observation_space(agent)``, ``action_space(agent)``, ``reset(seed=)`` and
      ``step(actions)`` returning (observations, rewards, terminations, truncations,
      infos)).
    seed: seeds the first reset only (None: unseeded).
    name: the id, for messages.

  Attributes:
    agents: every agent's name, in ``possible_agents`` order (the order of every
      per-agent array an agent builds, e.g. one-hot agent ids).

  Raises:
    UnsupportedSpaceError: (at construction) an agent's space cannot be mapped (one
      line naming the space and what is supported).
  """

  def __init__(self, env, seed: Optional[int] = None, name: str = "pz"):
    self._env = env
    self._seed = seed
    self.name = name
    self.agents: Tuple[str, ...] = tuple(env.possible_agents)
    self._observations, self._actions = {}, {}
    for agent in self.agents:
      self._observations[agent] = _observation_map(env.observation_space(agent))
      self._actions[agent] = _action_map(env.action_space(agent))
    self._alive: Tuple[str, ...] = ()
    self._reset_next = True

  @property
  def num_agents(self) -> int:
    return len(self.agents)

  def observation_spec(self) -> Dict[str, dm_specs.Array]:
    return {a: self._observations[a][0] for a in self.agents}

  def action_spec(self) -> Dict[str, dm_specs.Array]:
    return {a: self._actions[a].spec for a in self.agents}

  def reward_spec(self) -> Dict[str, dm_specs.Array]:
    return {a: dm_specs.Array((), np.float32, "reward") for a in self.agents}

  def discount_spec(self) -> Dict[str, dm_specs.BoundedArray]:
    return {a: dm_specs.BoundedArray((), np.float32, 0.0, 1.0, "discount") for a in self.agents}

  def _observe(self, agent: str, observation) -> np.ndarray:
    return self._observations[agent][1](observation)

  def reset(self) -> MultiAgentTimeStep:
    if self._seed is not None:
      observations, _ = self._env.reset(seed=self._seed)
      self._seed = None  # seed only the first episode; later resets continue the stream
    else:
      observations, _ = self._env.reset()
    self._alive = tuple(a for a in self.agents if a in observations)
    self._reset_next = not self._alive
    obs = {a: self._observe(a, observations[a]) for a in self._alive}
    first = dm_env.StepType.FIRST
    return MultiAgentTimeStep(first, obs, {a: np.float32(0.0) for a in self._alive},
                              {a: np.float32(1.0) for a in self._alive},
                              {a: first for a in self._alive})

  def step(self, actions: Dict[str, Any]) -> MultiAgentTimeStep:
    """Steps the agents alive; `actions` maps each of them to an action of its spec.

    Raises:
      InvalidActionError: an alive agent without an action, an action for an agent
        that is not alive, or an action outside its agent's spec (nothing is sent).
    """
    if self._reset_next:
      return self.reset()
    missing = [a for a in self._alive if a not in actions]
    extra = [a for a in actions if a not in self._alive]
    if missing or extra:
      raise InvalidActionError(
          f"{self.name}: actions are needed for exactly the agents alive "
          f"({', '.join(self._alive)}); missing {missing}, not alive {extra}")
    env_actions = {a: self._actions[a].to_env(actions[a]) for a in self._alive}
    observations, rewards, terminations, truncations, _ = self._env.step(env_actions)
    obs, reward, discount, kinds = {}, {}, {}, {}
    for a in self._alive:
      terminated, truncated = bool(terminations.get(a, False)), bool(truncations.get(a, False))
      gone = a not in self._env.agents
      obs[a] = self._observe(a, observations[a])
      reward[a] = np.float32(rewards.get(a, 0.0))
      discount[a] = np.float32(0.0 if terminated else 1.0)
      kinds[a] = (dm_env.StepType.LAST if terminated or truncated or gone
                  else dm_env.StepType.MID)
    self._alive = tuple(a for a in self._alive if kinds[a] == dm_env.StepType.MID)
    self._reset_next = not self._alive
    step_type = dm_env.StepType.LAST if self._reset_next else dm_env.StepType.MID
    return MultiAgentTimeStep(step_type, obs, reward, discount, kinds)

  def state_spec(self) -> Optional[dm_specs.Array]:
    """The global state's spec, float32 `[S]` (from PettingZoo's ``state_space``), or
    None: the environment has no global state."""
    space = getattr(self._env, "state_space", None)
    if space is None:
      return None
    return dm_specs.Array((int(np.prod(space.shape)),), np.float32, "state")

  def state(self) -> np.ndarray:
    """The environment's global state, float32 `[S]` (PettingZoo's ``state()``)."""
    return np.asarray(self._env.state(), np.float32).reshape(-1)

  def render(self):
    """The environment's ``render()`` (under `_LIFECYCLE_LOCK`: pygame draws there)."""
    with _LIFECYCLE_LOCK:
      return self._env.render()

  def close(self) -> None:
    """Closes the environment, under `_LIFECYCLE_LOCK` (MPE2's close quits pygame for the
    whole process, see the lock)."""
    with _LIFECYCLE_LOCK:
      self._env.close()


def parse_pz_name(name: str) -> Tuple[str, str]:
  """``"mpe2/simple_spread_v3"`` -> ``("mpe2", "simple_spread_v3")``.

  Raises:
    UnknownEnvironmentError: not ``<module>/<env>`` (both dotted Python names).
  """
  module, sep, env = name.partition("/")
  if not sep or not all(p.isidentifier() for p in module.split(".") + [env]):
    raise core.UnknownEnvironmentError(
        f"PettingZoo id 'pz:{name}' must be 'pz:<module>/<env>', e.g. "
        "pz:mpe2/simple_spread_v3")
  return module, env


def _known_envs(package) -> str:
  names = sorted(m.name for m in pkgutil.iter_modules(getattr(package, "__path__", [])))
  return ", ".join(n for n in names if not n.startswith("_"))[:300] or "none found"


def make_parallel(name: str, seed: int = 0, **kwargs: Any) -> ParallelEnvironment:
  """``pz:<name>``'s `ParallelEnvironment` (the ``"pz"`` row's multi-agent factory).

  Raises:
    UnknownEnvironmentError: a malformed name, a module that cannot be imported, or an
      env the module does not have (one line listing the module's envs), or an AEC env
      PettingZoo cannot convert to the parallel API.
    UnsupportedSpaceError: an agent's space cannot be mapped.
  """
  module_name, env_name = parse_pz_name(name)
  try:
    package = importlib.import_module(module_name)
  except ModuleNotFoundError as e:
    raise core.UnknownEnvironmentError(
        f"'pz:{name}': no module {e.name!r}; PettingZoo ids are 'pz:<module>/<env>' with "
        "an installed module, e.g. pz:mpe2/simple_spread_v3") from None
  try:
    module = importlib.import_module(f"{module_name}.{env_name}")
  except ModuleNotFoundError:
    module = getattr(package, env_name, None)
  if module is None or not (hasattr(module, "parallel_env") or hasattr(module, "env")):
    raise core.UnknownEnvironmentError(
        f"'pz:{name}': module {module_name!r} has no PettingZoo environment {env_name!r}; "
        f"it has: {_known_envs(package)}")
  # One construction (or close, `ParallelEnvironment.close`) at a time in a process: see
  # `_LIFECYCLE_LOCK`.
  with _LIFECYCLE_LOCK:
    return _construct(name, module, seed, kwargs)


def _construct(name: str, module: Any, seed: int,
               kwargs: Dict[str, Any]) -> ParallelEnvironment:
  """`module`'s environment (its `parallel_env`, or its AEC `env` converted), wrapped."""
  if hasattr(module, "parallel_env"):
    env = module.parallel_env(**kwargs)
  else:
    from pettingzoo.utils.conversions import aec_to_parallel
    aec = module.env(**kwargs)
    try:
      env = aec_to_parallel(aec)
    except AssertionError as e:
      aec.close()
      raise core.UnknownEnvironmentError(
          f"'pz:{name}' is an AEC environment PettingZoo cannot run in parallel ({e}); "
          "allowed: parallel environments or parallelizable AEC ones") from None
  try:
    return ParallelEnvironment(env, seed=seed, name=f"pz:{name}")
  except core.UnsupportedEnvironmentError:
    env.close()
    raise


@dataclasses.dataclass(frozen=True)
class MultiAgentPrefix:
  """One row of `MULTI_AGENT_PREFIXES`: how ids ``<prefix>:<name>`` are built.

  Attributes:
    make: ``make(name, seed, **kwargs) -> ParallelEnvironment``; raises
      `UnknownEnvironmentError` for a name it does not know (one line naming what is).
    usage: the prefix's form and an example, for the unknown-id error.
  """
  make: Callable[..., ParallelEnvironment]
  usage: str


# The multi-agent table (beside the single-agent `environments.PREFIXES`, whose ids and
# messages it leaves as they are): prefix (without the colon) -> its row.
MULTI_AGENT_PREFIXES: Dict[str, MultiAgentPrefix] = {
    "pz": MultiAgentPrefix(make_parallel, "'pz:<module>/<env>' (e.g. pz:mpe2/simple_spread_v3)"),
}


def is_multi_agent(env_id: Any) -> bool:
  """Whether `env_id` has a prefix of `MULTI_AGENT_PREFIXES`."""
  return isinstance(env_id, str) and env_id.partition(":")[0] in MULTI_AGENT_PREFIXES \
      and ":" in env_id


def make_multi_agent_environment(env_id: str, seed: int = 0, **kwargs: Any
                                 ) -> ParallelEnvironment:
  """The multi-agent environment of `env_id` (``<prefix>:<name>`` with a prefix of
  `MULTI_AGENT_PREFIXES`, e.g. ``pz:mpe2/simple_spread_v3``).

  Raises:
    UnknownEnvironmentError: an id without a multi-agent prefix (one line listing the
      multi-agent forms), a suffix (``@repeat=K`` is single-agent only), or a name the
      prefix's factory does not know.
    UnsupportedSpaceError: an agent's space cannot be mapped.
  """
  if not is_multi_agent(env_id):
    listed = " or ".join(row.usage for row in MULTI_AGENT_PREFIXES.values())
    raise core.UnknownEnvironmentError(
        f"{env_id!r} is not a multi-agent environment id: use {listed}")
  prefix, _, name = env_id.partition(":")
  if "@" in name:
    raise core.UnknownEnvironmentError(
        f"environment id {env_id!r}: suffixes such as '@repeat=K' are not supported for "
        "multi-agent environments; leave the suffix out")
  return MULTI_AGENT_PREFIXES[prefix].make(name, seed=seed, **kwargs)


def shared_specs(env: ParallelEnvironment, agents: Optional[Sequence[str]] = None):
  """(observation spec, action spec) shared by `agents` (default: all).

  Raises:
    UnsupportedEnvironmentError: the agents' observation or action specs differ (one
      line naming the first two that differ).
  """
  agents = tuple(agents or env.agents)
  obs, act = env.observation_spec(), env.action_spec()
  for a in agents[1:]:
    for what, s in (("observation", obs), ("action", act)):
      if s[a] != s[agents[0]]:
        raise core.UnsupportedEnvironmentError(
            f"{env.name}: agents {agents[0]!r} and {a!r} have different {what} specs "
            f"({s[agents[0]]!r} vs {s[a]!r}); parameter sharing needs the same for every "
            "agent: use independent parameters (share_parameters false)")
  return obs[agents[0]], act[agents[0]]
