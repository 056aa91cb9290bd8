"""Acting in multi-agent environments: parameter groups and the multi-agent loop.

Agents are split into *parameter groups* (`ParameterGroup`): with parameter sharing one
group holds every agent, whose observations get a one-hot agent id appended (so one
network can tell the agents apart, Gupta et al. 2017; Yu et al. 2022, MAPPO, sec. 4);
without it each agent is its own group. Each group is acted for by one batched actor
(`actors.BatchedFeedForwardActor`, a single-agent builder's actor) whose rows are the
group's *streams*: one per (environment, agent), row ``e * len(group.agents) + k`` for
agent k of the group in environment e. Every step runs ONE policy inference per group over
all of its streams (with sharing: all agents of all environments), then the stochastic
selector per live row from the actor's one seeded generator, so a run is a function of its
seed.

Each stream has its own adder state (`adders.PerEnvAdders` or a batched adder with a row
per stream): the learner sees per-agent time steps. An agent that finished (its step was
LAST, its discount 0 after a termination, 1 after a truncation) sends no action and writes
nothing until its environment resets (agents finishing at different times); its row is
inactive meanwhile (dummy action, no randomness). An environment whose episode reaches
`max_episode_steps` is ended by the loop as a truncation of every agent still alive
(discount 1: the learner bootstraps), as `loop.ActorLoop` does.

One iteration of `MultiAgentLoop`:

    per group: actions = actor.select_actions(observations [R, D], live rows)   # 1 inference
    per environment e: timestep_e = env.step({agent: its action, for its live agents})
    per group: actor.observe(live rows, actions, their next timesteps)          # adders
      (what the adders store is the policy's input, followed by a centralized critic's
      input, e.g. the global state, when the group has one: `ParameterGroup.stored`)
    per environment: steps += 1; hooks.on_step(loop, actions_e, timestep_e)
    per group: actor.update()                       # the variable client's pull
    per environment that ended: hooks.on_episode_end(loop, stats); reset; observe_first

`steps` counts environment steps (joint steps of all agents of one environment), summed
over the environments.
"""
from __future__ import annotations

import dataclasses
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

import dm_env
import numpy as np
from acme import specs

from actorq import core
from actorq.components.acting import loop as loop_lib
from actorq.components.envs import multi_agent as ma_env
from actorq.components.envs import vector_env

FIRST, MID, LAST = dm_env.StepType.FIRST, dm_env.StepType.MID, dm_env.StepType.LAST
SHARED = "shared"


@dataclasses.dataclass(frozen=True)
class ParameterGroup:
  """Agents that act with one set of parameters.

  Attributes:
    name: ``"shared"`` (parameter sharing) or the agent's own name.
    agents: the group's agents, in the environment's agent order.
    agent_ids: each agent's position in the environment's agents (the one-hot id).
    id_size: the one-hot id's length appended to observations (the environment's agent
      count with sharing; 0 without).
    environment_spec: what the group's single-agent builder sees: the agent's
      observation spec (with sharing float32 `[D + id_size]`), action, reward and
      discount specs.
    agent_observations: the spec of the environment's observation of one of the
      group's agents (before the id).
    critic_input: what a centralized critic sees besides the agent id (`CRITIC_INPUTS`):
      "" (none: IPPO), "state" (the environment's global state) or "joint_observation"
      (every agent's observation, concatenated in agent order; zeros for agents that
      finished).
    critic_size: S, the length of that input (0 without one). With one, the stored
      observation (`environment_spec.observations`) is the policy's input followed by it,
      float32 `[D + id_size + S]`; the actors' policy sees the first `D + id_size`.
  """
  name: str
  agents: Tuple[str, ...]
  agent_ids: Tuple[int, ...]
  id_size: int
  environment_spec: specs.EnvironmentSpec
  agent_observations: specs.Array
  critic_input: str = ""
  critic_size: int = 0

  @property
  def policy_input_size(self) -> int:
    """`D + id_size`: the policy's input, the leading part of a stored observation
    (vector observations)."""
    return int(self.environment_spec.observations.shape[0]) - self.critic_size

  def stored(self, observations: np.ndarray, critic: Optional[np.ndarray]) -> np.ndarray:
    """What the adder stores: the policy inputs `[R, D + id_size]`, followed by the
    critic inputs `[R, S]` when the group has a centralized critic."""
    if not self.critic_size:
      return observations
    return np.concatenate([np.asarray(observations, np.float32),
                           np.asarray(critic, np.float32)], axis=1)

  def critic_vector(self, environment: ma_env.ParallelEnvironment,
                    timestep: ma_env.MultiAgentTimeStep) -> Optional[np.ndarray]:
    """float32 `[S]` of `environment` at `timestep` (None without a critic input)."""
    if not self.critic_size:
      return None
    return CRITIC_INPUTS[self.critic_input][1](environment, timestep)

  def blank(self, rows: int) -> np.ndarray:
    """Zero observations `[rows, *agent_observations.shape]` of the agents' dtype."""
    spec = self.agent_observations
    return np.zeros((rows,) + tuple(spec.shape), spec.dtype)

  def observations(self, observations: np.ndarray, index: np.ndarray) -> np.ndarray:
    """float32 `[R, D + id_size]`: `observations` `[R, D]` of the group's agents
    `index` (int `[R]`, positions in `agents`) with their one-hot ids appended."""
    if not self.id_size:
      return np.asarray(observations, self.agent_observations.dtype)
    observations = np.asarray(observations, np.float32)
    ids = np.zeros((len(index), self.id_size), np.float32)
    ids[np.arange(len(index)), np.asarray(self.agent_ids)[np.asarray(index, np.int64)]] = 1.0
    return np.concatenate([observations, ids], axis=1)


def _state_size(env: ma_env.ParallelEnvironment) -> int:
  spec = env.state_spec()
  if spec is None:
    raise core.UnsupportedEnvironmentError(
        f"{env.name} has no global state (no state_space); a centralized critic on "
        "'state' needs one: use critic_input joint_observation")
  return int(spec.shape[0])


def _joint_size(env: ma_env.ParallelEnvironment) -> int:
  return int(sum(int(np.prod(s.shape)) for s in env.observation_spec().values()))


def _state(env: ma_env.ParallelEnvironment, timestep) -> np.ndarray:
  del timestep
  return env.state()


def _joint_observation(env: ma_env.ParallelEnvironment, timestep) -> np.ndarray:
  specs_ = env.observation_spec()
  return np.concatenate([
      np.asarray(timestep.observation[a], np.float32).reshape(-1) if a in timestep.observation
      else np.zeros(int(np.prod(specs_[a].shape)), np.float32) for a in env.agents])


# A centralized critic's input: name -> (its size S for an environment, its value
# `[S]` for an environment at a timestep).
CRITIC_INPUTS = {
    "state": (_state_size, _state),
    "joint_observation": (_joint_size, _joint_observation),
}


def make_groups(env: ma_env.ParallelEnvironment, share_parameters: bool,
                critic_input: str = "") -> Tuple[ParameterGroup, ...]:
  """The parameter groups of `env`'s agents: one shared group, or one per agent; with a
  `critic_input` (`CRITIC_INPUTS`), each stores it after the policy's input.

  Raises:
    UnsupportedEnvironmentError: parameter sharing with agents whose observation or
      action specs differ (`multi_agent.shared_specs`), or with observations that are not
      float32 vectors (a one-hot id is appended to a vector); a critic input with
      observations that are not float32 vectors, or "state" for an environment without a
      global state.
    ValueError: an unknown `critic_input`.
  """
  if critic_input and critic_input not in CRITIC_INPUTS:
    raise ValueError(f"critic_input must be one of {', '.join(CRITIC_INPUTS)} (or empty), "
                     f"got {critic_input!r}")
  reward = specs.Array((), np.float32, "reward")
  discount = specs.BoundedArray((), np.float32, 0.0, 1.0, "discount")
  critic = CRITIC_INPUTS[critic_input][0](env) if critic_input else 0
  vector_only = share_parameters or critic_input
  for agent, obs in env.observation_spec().items():
    if vector_only and (len(obs.shape) != 1 or obs.dtype != np.float32):
      raise core.UnsupportedEnvironmentError(
          f"{env.name}: parameter sharing and a centralized critic need float32 vector "
          f"observations (an agent id or critic input is appended); agent {agent!r} "
          f"observes {obs!r}: use independent parameters without a centralized critic")
  if share_parameters:
    obs, action = ma_env.shared_specs(env)
    n = env.num_agents
    spec = specs.EnvironmentSpec(
        specs.Array((obs.shape[0] + n + critic,), np.float32, "observation"), action, reward,
        discount)
    return (ParameterGroup(SHARED, env.agents, tuple(range(n)), n, spec, obs, critic_input,
                           critic),)
  obs, act = env.observation_spec(), env.action_spec()
  groups = []
  for i, a in enumerate(env.agents):
    stored = obs[a] if not critic else specs.Array((obs[a].shape[0] + critic,), np.float32,
                                                   "observation")
    groups.append(ParameterGroup(a, (a,), (i,), 0,
                                 specs.EnvironmentSpec(stored, act[a], reward, discount),
                                 obs[a], critic_input, critic))
  return tuple(groups)


@dataclasses.dataclass(frozen=True)
class MultiAgentEpisodeStats(loop_lib.EpisodeStats):
  """`loop.EpisodeStats` of one environment's episode: `episode_return` is the team
  return (the sum of the agents' undiscounted returns), `agent_returns` each agent's."""
  agent_returns: Dict[str, float] = dataclasses.field(default_factory=dict)


class MultiAgentLoop:
  """Batched actors (one per parameter group) acting in multi-agent environments (see
  the module docstring).

  Args:
    environments: E `multi_agent.ParallelEnvironment`s of one task.
    groups: the parameter groups (`make_groups` of that task).
    actors: one `actors.BatchedFeedForwardActor` per group, with `E * len(group.agents)`
      rows (with `learn`, its adder has one state per row).
    hooks: `loop.Hook`s; `on_step(loop, actions, timestep)` gets environment e's actions
      (agent -> action) and its `MultiAgentTimeStep`; `on_episode_end` gets
      `MultiAgentEpisodeStats`; `on_episode_start` the FIRST timestep.
    learn: training (adders observe, variable clients update) or evaluation.
    should_stop: asked after every environment step; True ends `run` at once.
    max_episode_steps: the step cap of an episode (>= 1).

  Attributes:
    steps: environment steps taken, summed over the environments.
    episodes: episodes finished.
    group_steps: per group, the agent steps (transitions) its agents took: what each
      group's single-agent builder counts as actor steps.
    actor: the first group's actor (what `loop.EpisodeLogger` reads the version of).

  Raises:
    ValueError: no environment, or not one actor per group.
  """

  def __init__(self, environments: Sequence[ma_env.ParallelEnvironment],
               groups: Sequence[ParameterGroup], actors: Sequence[Any], *,
               hooks: Sequence[loop_lib.Hook] = (), learn: bool = True, should_stop=None,
               max_episode_steps: int = loop_lib.DEFAULT_MAX_EPISODE_STEPS):
    if not environments:
      raise ValueError("MultiAgentLoop needs at least one environment")
    if len(actors) != len(groups):
      raise ValueError(f"one actor per parameter group: {len(groups)} groups, "
                       f"{len(actors)} actors")
    if int(max_episode_steps) < 1:
      raise ValueError(f"max_episode_steps must be >= 1, got {max_episode_steps}")
    self.environments = list(environments)
    self.groups, self.actors = list(groups), list(actors)
    self.actor = self.actors[0]
    self._hooks = list(hooks)
    self._learn = bool(learn)
    self._should_stop = should_stop or (lambda: False)
    self._cap = int(max_episode_steps)
    self.steps = 0
    self.episodes = 0
    self.group_steps = [0] * len(self.groups)
    # Per group: (env index, agent, position in group) of each row, in row order.
    self._rows = [[(e, a, k) for e in range(len(self.environments))
                   for k, a in enumerate(g.agents)] for g in self.groups]

  def _failure(self, call: str, error: Exception, e: int) -> core.EnvironmentFailure:
    return core.EnvironmentFailure(
        f"the environment raised in {call}() at actor step {self.steps + 1} (environment "
        f"{e}, episode {self.episodes + 1}): {type(error).__name__}: {error}")

  def _reset(self, e: int) -> ma_env.MultiAgentTimeStep:
    try:
      return self.environments[e].reset()
    except Exception as err:  # pylint: disable=broad-except
      raise self._failure("reset", err, e) from err

  def _observe_first(self, e: int, timestep: ma_env.MultiAgentTimeStep) -> None:
    if not self._learn:
      return
    for group, actor, rows in zip(self.groups, self.actors, self._rows):
      live = [(i, k, timestep.observation[a]) for i, (env, a, k) in enumerate(rows)
              if env == e and a in timestep.observation]
      if live:
        critic = group.critic_vector(self.environments[e], timestep)
        inputs = group.observations(np.stack([o for _, _, o in live]),
                                    np.asarray([k for _, k, _ in live]))
        actor.observe_first(np.asarray([i for i, _, _ in live], np.int64),
                            group.stored(inputs, None if critic is None else
                                         np.tile(critic, (len(live), 1))))

  def _cap_episode(self, ts: ma_env.MultiAgentTimeStep) -> ma_env.MultiAgentTimeStep:
    """The step cap: every agent still alive ends as a truncation (discount kept)."""
    kinds = {a: LAST for a in ts.agent_step_type}
    return ts._replace(step_type=LAST, agent_step_type=kinds)

  def run(self, num_episodes: Optional[int] = None,
          num_steps: Optional[int] = None) -> List[MultiAgentEpisodeStats]:
    """Acts until `num_episodes` episodes end or `num_steps` environment steps are
    taken (either may be None; both None: until `should_stop`); returns the finished
    episodes, in the order they end.

    Raises:
      ValueError: `num_episodes` or `num_steps` < 1.
      core.EnvironmentFailure: an environment raised in `reset()` or `step()`.
    """
    for name, value in (("num_episodes", num_episodes), ("num_steps", num_steps)):
      if value is not None and int(value) < 1:
        raise ValueError(f"{name} must be >= 1, got {value}")
    envs, hooks = self.environments, self._hooks
    timesteps = [self._reset(e) for e in range(len(envs))]
    for e, ts in enumerate(timesteps):
      self._observe_first(e, ts)
      for hook in hooks:
        hook.on_episode_start(self, ts)
    returns = [dict.fromkeys(env.agents, 0.0) for env in envs]
    lengths = [0] * len(envs)
    starts = [time.time()] * len(envs)
    finished: List[MultiAgentEpisodeStats] = []
    taken = 0
    while True:
      # One inference per group over all of its rows; rows of finished agents idle.
      group_actions, group_live = [], []
      for group, actor, rows in zip(self.groups, self.actors, self._rows):
        obs = group.blank(len(rows))
        live = np.zeros(len(rows), bool)
        for i, (e, a, _) in enumerate(rows):
          ts = timesteps[e]
          if a in ts.observation and ts.agent_step_type[a] != LAST:
            obs[i], live[i] = ts.observation[a], True
        index = np.asarray([k for _, _, k in rows])
        group_actions.append(actor.select_actions(group.observations(obs, index), live))
        group_live.append(live)
      env_actions: List[Dict[str, Any]] = [{} for _ in envs]
      for actions, live, rows in zip(group_actions, group_live, self._rows):
        for i in np.flatnonzero(live).tolist():
          e, a, _ = rows[i]
          env_actions[e][a] = actions[i]
      nexts = []
      for e, env in enumerate(envs):
        try:
          ts = env.step(env_actions[e])
        except Exception as err:  # pylint: disable=broad-except
          raise self._failure("step", err, e) from err
        lengths[e] += 1
        if lengths[e] >= self._cap and not ts.last():
          ts = self._cap_episode(ts)
        nexts.append(ts)
      if num_steps is not None:  # environments past the budget are not counted or written
        keep = max(num_steps - taken, 0)
      else:
        keep = len(envs)
      for g, (group, actor, actions, live, rows) in enumerate(zip(
          self.groups, self.actors, group_actions, group_live, self._rows)):
        moving = np.asarray([i for i in np.flatnonzero(live).tolist() if rows[i][0] < keep],
                            np.int64)
        self.group_steps[g] += len(moving)
        if self._learn:
          actor.observe(moving, actions, self._batch(group, rows, nexts))
      timesteps = nexts
      for e in range(min(keep, len(envs))):
        ts = timesteps[e]
        for a, r in ts.reward.items():
          returns[e][a] += float(r)
        self.steps += 1
        taken += 1
        for hook in hooks:
          hook.on_step(self, env_actions[e], ts)
        if self._learn:
          for actor in self.actors:
            actor.update()
        if ts.last():
          self.episodes += 1
          stats = MultiAgentEpisodeStats(
              float(sum(returns[e].values())), lengths[e], time.time() - starts[e],
              bool(lengths[e] >= self._cap), agent_returns=dict(returns[e]))
          finished.append(stats)
          for hook in hooks:
            hook.on_episode_end(self, stats)
          if num_episodes is not None and len(finished) >= num_episodes:
            return finished
        if (num_steps is not None and taken >= num_steps) or self._should_stop():
          return finished
      for e in range(len(envs)):
        if timesteps[e].last():
          timesteps[e] = self._reset(e)
          returns[e] = dict.fromkeys(envs[e].agents, 0.0)
          lengths[e], starts[e] = 0, time.time()
          self._observe_first(e, timesteps[e])
          for hook in hooks:
            hook.on_episode_start(self, timesteps[e])

  def _batch(self, group: ParameterGroup, rows, timesteps) -> vector_env.BatchedTimeStep:
    """The group's rows of `timesteps` as a `vector_env.BatchedTimeStep` of what the adder
    stores (rows of agents without a step hold zeros; the actor writes only live rows)."""
    n = len(rows)
    obs = group.blank(n)
    reward, discount = np.zeros(n, np.float32), np.ones(n, np.float32)
    step_type = np.full(n, int(MID), np.int8)
    for i, (e, a, _) in enumerate(rows):
      ts = timesteps[e]
      if a in ts.observation:
        obs[i], reward[i], discount[i] = ts.observation[a], ts.reward[a], ts.discount[a]
        step_type[i] = int(ts.agent_step_type[a])
    index = np.asarray([k for _, _, k in rows])
    critic = None
    if group.critic_size:
      per_env = [group.critic_vector(env, ts) for env, ts in zip(self.environments, timesteps)]
      critic = np.stack([per_env[e] for e, _, _ in rows])
    return vector_env.BatchedTimeStep(step_type, reward, discount,
                                      group.stored(group.observations(obs, index), critic))
