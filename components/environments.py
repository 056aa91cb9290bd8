"""Environments as `dm_env.Environment`, from an id string.

Ids:
  * ``gym:<Gymnasium id>``, e.g. ``gym:CartPole-v1``;
  * ``dmc:<domain>-<task>``, e.g. ``dmc:cartpole-balance`` (dm_control suite; the
    observation dict is concatenated into one float32 vector);
  * ``atari:<Game>``, e.g. ``atari:Pong`` (see `actorq.components.atari`).

Every adapter emits float32 observations and rewards and float32 discounts, on every
timestep (first and last included).

Gymnasium's (terminated, truncated) is mapped to dm_env as (handed case E2):

  =========== ========== ========= ========
  terminated  truncated  step type discount
  =========== ========== ========= ========
  False       False      MID       1.0
  False       True       LAST      1.0  (time limit: the learner bootstraps)
  True        any        LAST      0.0  (true termination: no bootstrap)
  =========== ========== ========= ========
"""
from __future__ import annotations

from typing import Any, Optional

import dm_env
import numpy as np
from acme import specs
from dm_env import specs as dm_specs

from actorq.core import UnknownEnvironmentError

ALLOWED_PREFIXES = ("gym:", "dmc:", "atari:")


class GymnasiumToDmEnv(dm_env.Environment):
  """Adapts a Gymnasium environment (discrete or Box actions) to `dm_env`."""

  def __init__(self, env, seed: Optional[int] = None):
    import gymnasium
    self._env = env
    self._seed = seed
    self._reset_next = True
    obs_space = env.observation_space
    if not isinstance(obs_space, gymnasium.spaces.Box):
      raise UnknownEnvironmentError(
          f"observation space {obs_space} is not supported; only Box observations are")
    self._obs_dtype = np.uint8 if obs_space.dtype == np.uint8 else np.float32
    self._observation_spec = dm_specs.Array(obs_space.shape, self._obs_dtype, "observation")
    act_space = env.action_space
    if isinstance(act_space, gymnasium.spaces.Discrete):
      self._action_spec = dm_specs.DiscreteArray(int(act_space.n), dtype=np.int32, name="action")
    elif isinstance(act_space, gymnasium.spaces.Box):
      self._action_spec = dm_specs.BoundedArray(
          act_space.shape, np.float32, act_space.low.astype(np.float32),
          act_space.high.astype(np.float32), "action")
    else:
      raise UnknownEnvironmentError(
          f"action space {act_space} is not supported; Discrete and Box are")

  def _obs(self, obs) -> np.ndarray:
    return np.asarray(obs, dtype=self._obs_dtype)

  def reset(self) -> dm_env.TimeStep:
    if self._seed is not None:
      obs, _ = self._env.reset(seed=self._seed)
      self._seed = None  # seed only the first episode; later resets continue the stream
    else:
      obs, _ = self._env.reset()
    self._reset_next = False
    return dm_env.restart(self._obs(obs))

  def step(self, action) -> dm_env.TimeStep:
    if self._reset_next:
      return self.reset()
    if isinstance(self._action_spec, dm_specs.DiscreteArray):
      action = int(np.asarray(action))
    else:
      action = np.asarray(action, dtype=np.float32)
    obs, reward, terminated, truncated, _ = self._env.step(action)
    obs, reward = self._obs(obs), np.float32(reward)
    if terminated or truncated:
      self._reset_next = True
      discount = np.float32(0.0 if terminated else 1.0)
      return dm_env.TimeStep(dm_env.StepType.LAST, reward, discount, obs)
    return dm_env.TimeStep(dm_env.StepType.MID, reward, np.float32(1.0), obs)

  def observation_spec(self):
    return self._observation_spec

  def action_spec(self):
    return self._action_spec

  def reward_spec(self):
    return dm_specs.Array((), np.float32, "reward")

  def discount_spec(self):
    return dm_specs.BoundedArray((), np.float32, 0.0, 1.0, "discount")

  def render(self):
    return self._env.render()

  def close(self):
    self._env.close()


class DmControlFlat(dm_env.Environment):
  """dm_control suite task with its observation dict flattened to float32 `[D]`.

  Actions are float32 within the task's bounds; rewards and discounts float32.
  """

  def __init__(self, env):
    self._env = env
    obs_spec = env.observation_spec()
    size = int(sum(int(np.prod(s.shape)) for s in obs_spec.values()))
    self._observation_spec = dm_specs.Array((size,), np.float32, "observation")
    a = env.action_spec()
    self._action_spec = dm_specs.BoundedArray(
        a.shape, np.float32, a.minimum.astype(np.float32), a.maximum.astype(np.float32), "action")

  def _convert(self, ts: dm_env.TimeStep) -> dm_env.TimeStep:
    obs = np.concatenate([np.asarray(v, np.float32).reshape(-1) for v in ts.observation.values()])
    reward = None if ts.reward is None else np.float32(ts.reward)
    discount = None if ts.discount is None else np.float32(ts.discount)
    return ts._replace(observation=obs, reward=reward, discount=discount)

  def reset(self):
    return self._convert(self._env.reset())

  def step(self, action):
    return self._convert(self._env.step(np.asarray(action, np.float64)))

  def observation_spec(self):
    return self._observation_spec

  def action_spec(self):
    return self._action_spec

  def reward_spec(self):
    return dm_specs.Array((), np.float32, "reward")

  def discount_spec(self):
    return dm_specs.BoundedArray((), np.float32, 0.0, 1.0, "discount")

  def render(self, height: int = 240, width: int = 320):
    return self._env.physics.render(height=height, width=width, camera_id=0)

  def close(self):
    self._env.close()


def make_environment(env_id: str, seed: int = 0, **kwargs: Any) -> dm_env.Environment:
  """Builds the environment named by `env_id` (see the module docstring).

  Raises:
    UnknownEnvironmentError: for an id with an unknown prefix or a name the backend
      does not know; the message lists what is allowed.
  """
  if not isinstance(env_id, str) or not env_id.startswith(ALLOWED_PREFIXES):
    raise UnknownEnvironmentError(
        f"unknown environment id {env_id!r}: use 'gym:<Gymnasium id>' (e.g. gym:CartPole-v1), "
        "'dmc:<domain>-<task>' (e.g. dmc:cartpole-balance) or 'atari:<Game>' (e.g. atari:Pong)")
  kind, name = env_id.split(":", 1)
  if kind == "gym":
    import gymnasium
    try:
      env = gymnasium.make(name, **kwargs)
    except gymnasium.error.Error as e:
      raise UnknownEnvironmentError(f"unknown Gymnasium environment {name!r} in {env_id!r}: {e}") from None
    return GymnasiumToDmEnv(env, seed=seed)
  if kind == "dmc":
    from dm_control import suite
    if "-" not in name:
      raise UnknownEnvironmentError(
          f"dm_control id {env_id!r} must be 'dmc:<domain>-<task>', e.g. dmc:cartpole-balance")
    domain, task = name.split("-", 1)
    if (domain, task) not in suite.ALL_TASKS:
      raise UnknownEnvironmentError(
          f"unknown dm_control task {domain}-{task}; known e.g. cartpole-balance, walker-stand, "
          "cheetah-run (see dm_control.suite.ALL_TASKS)")
    env = suite.load(domain, task, task_kwargs={"random": seed}, **kwargs)
    return DmControlFlat(env)
  from actorq.components import atari  # atari:
  return atari.make_atari(name, seed=seed, **kwargs)


def environment_spec(env: dm_env.Environment) -> specs.EnvironmentSpec:
  """acme's `EnvironmentSpec` of an environment."""
  return specs.make_environment_spec(env)
