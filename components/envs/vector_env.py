"""Vectorized environments: B copies of one task stepped in one call (vectorized actors).

    env = make_vector_environment("gym:CartPole-v1", num_envs=32, seed=0)
    ts = env.reset()                  # BatchedTimeStep, every row FIRST
    ts = env.step(actions)            # actions [32, ...]; one row per environment

Backends (`vector_backend(env_id)` names the one an id gets; an id's prefix row in
`environments.PREFIXES` says which, through its `vector` field: `gym_vector`,
`dmc_vector` below, or a registered prefix's own):
  * ``envpool``: EnvPool 0.8.4 (C++; its own thread pool, here one thread) where it has
    the task: `gym:` classic control ids (`ENVPOOL_GYM_IDS`, Gymnasium's API:
    terminated/truncated) and `dmc:<domain>-<task>` ids it ships (dm_env API; the
    observation dict is flattened in dm_control's own key order, as
    `environments.DmControlFlat` does);
  * ``gymnasium``: `gymnasium.vector.SyncVectorEnv` for every other `gym:` id, each
    sub-environment behind `gymnasium_adapter`'s space mapping (the same observations and
    actions as the one-env adapter);
  * none for `atari:` ids (EnvPool's Atari preprocessing is not `components.atari`'s)
    and dm_control tasks EnvPool lacks: `make_vector_environment` refuses them with
    `NoVectorBackendError` (one line);
  * a registered prefix's own (`environments.register_prefix`), or none.

A backend is a `VectorEnvironment` subclass constructed as
``cls(env_id, name, num_envs, single, seed, max_episode_steps)`` (`single`: a one-env
instance of the id, open during the call, for its spec), with a ``backend`` name.

Auto-reset, as both EnvPool and Gymnasium's vector envs (NEXT_STEP mode) define it: the
call after a row's LAST step resets that row; its action is ignored and the row comes back
FIRST (reward 0, discount 1). Rows are independent: each env's episodes, step counts and
seeds are its own (row i is seeded `seed + i`).

Every batch has the one-env spec's dtypes: observations `[B, *shape]` (float32, or uint8
images), float32 rewards and discounts; step types are `dm_env.StepType` values. A time
limit ends an episode as a truncation (LAST, discount 1), a termination has discount 0
(case E2). The episode step cap (`max_episode_steps`) is the backend's own time limit here
(the smaller of it and the task's).
"""
from __future__ import annotations

import contextlib
import io
import re
import warnings
from typing import Any, NamedTuple, Optional

import dm_env
import numpy as np
from acme import specs

from actorq import core
from actorq.components.envs import environments

FIRST, MID, LAST = (int(dm_env.StepType.FIRST), int(dm_env.StepType.MID),
                    int(dm_env.StepType.LAST))

# gym: ids EnvPool 0.8.4 implements with Gymnasium's dynamics, spaces and time limits.
ENVPOOL_GYM_IDS = ("CartPole-v0", "CartPole-v1", "Acrobot-v1", "MountainCar-v0",
                   "MountainCarContinuous-v0", "Pendulum-v1")


class NoVectorBackendError(core.UnsupportedEnvironmentError):
  """An environment id with no vector backend while `num_envs` > 1 needs one."""


class BatchedTimeStep(NamedTuple):
  """One step of B environments.

  Attributes:
    step_type: int8 [B], `dm_env.StepType` values (FIRST: the row was reset in this call).
    reward: float32 [B] (0 on FIRST rows).
    discount: float32 [B] (1 on FIRST rows; 0 after a termination).
    observation: `[B, *shape]` of the spec's dtype.
  """
  step_type: np.ndarray
  reward: np.ndarray
  discount: np.ndarray
  observation: np.ndarray

  def row(self, i: int) -> dm_env.TimeStep:
    """Row i as a `dm_env.TimeStep` (reward and discount None on FIRST, as dm_env)."""
    step_type = dm_env.StepType(int(self.step_type[i]))
    if step_type == dm_env.StepType.FIRST:
      return dm_env.TimeStep(step_type, None, None, self.observation[i])
    return dm_env.TimeStep(step_type, self.reward[i], self.discount[i], self.observation[i])


class VectorEnvironment:
  """B environments of one task (see the module docstring).

  Attributes:
    num_envs: B.
    backend: "envpool" or "gymnasium".
    env_id: the actorq environment id.
  """
  backend = ""

  def __init__(self, env_id: str, num_envs: int, spec: specs.EnvironmentSpec):
    self.env_id = env_id
    self.num_envs = int(num_envs)
    self._spec = spec
    self._last = np.zeros(self.num_envs, bool)  # rows whose previous step was LAST

  def environment_spec(self) -> specs.EnvironmentSpec:
    """The spec of ONE environment (rows have its shapes and dtypes)."""
    return self._spec

  def reset(self) -> BatchedTimeStep:
    """Resets every row (all FIRST)."""
    obs = self._reset()
    self._last[:] = False
    b = self.num_envs
    return BatchedTimeStep(np.full(b, FIRST, np.int8), np.zeros(b, np.float32),
                           np.ones(b, np.float32), obs)

  def step(self, actions) -> BatchedTimeStep:
    """Steps every row; rows that were LAST are reset instead (FIRST, action ignored).

    Raises:
      ValueError: `actions` without B rows.
    """
    actions = np.asarray(actions)
    if actions.shape[:1] != (self.num_envs,):
      raise ValueError(f"actions of shape {actions.shape}; expected [{self.num_envs}, ...]")
    obs, reward, discount, last = self._step(actions)
    resetting = self._last
    step_type = np.where(resetting, FIRST, np.where(last, LAST, MID)).astype(np.int8)
    reward = np.where(resetting, 0.0, reward).astype(np.float32)
    discount = np.where(resetting, 1.0, discount).astype(np.float32)
    self._last = last & ~resetting
    return BatchedTimeStep(step_type, reward, discount, obs)

  def _reset(self) -> np.ndarray:
    raise NotImplementedError

  def _step(self, actions):
    """(observation [B, ...], reward [B], discount [B], last bool [B]) of the backend."""
    raise NotImplementedError

  def close(self) -> None:
    pass


def _envpool_seed(seed: int) -> int:
  """EnvPool takes its seed as a C++ int: a derived seed above 2**31 - 1 (a run's seed near
  `core.MAX_SEED` plus an evaluation or resume offset) is taken modulo 2**31."""
  return int(seed) % 2**31


class _EnvPoolGym(VectorEnvironment):
  backend = "envpool"

  def __init__(self, env_id, task, num_envs, single, seed, max_episode_steps):
    envpool = _envpool()
    spec = environments.environment_spec(single)
    super().__init__(env_id, num_envs, spec)
    default = int(envpool.make_spec(task).config.max_episode_steps)
    self._env = envpool.make_gymnasium(
        task, num_envs=num_envs, batch_size=num_envs, seed=_envpool_seed(seed), num_threads=1,
        max_episode_steps=min(int(max_episode_steps), default))
    self._obs_dtype = np.dtype(spec.observations.dtype)
    actions = spec.actions
    self._action_dtype = (np.int32 if isinstance(actions, specs.DiscreteArray)
                          else np.dtype(actions.dtype))

  def _reset(self):
    obs, _ = self._env.reset()
    return np.asarray(obs, self._obs_dtype)

  def _step(self, actions):
    obs, reward, terminated, truncated, _ = self._env.step(
        np.asarray(actions, self._action_dtype))
    terminated = np.asarray(terminated, bool)
    discount = np.where(terminated, 0.0, 1.0)
    return (np.asarray(obs, self._obs_dtype), np.asarray(reward, np.float32), discount,
            terminated | np.asarray(truncated, bool))

  def close(self):
    self._env.close()


class _EnvPoolDmc(VectorEnvironment):
  backend = "envpool"

  def __init__(self, env_id, name, num_envs, single, seed, max_episode_steps):
    envpool = _envpool()
    super().__init__(env_id, num_envs, environments.environment_spec(single))
    task = _dmc_task(name)
    keys = list(single._env.observation_spec().keys())  # pylint: disable=protected-access
    default = int(envpool.make_spec(task).config.max_episode_steps)
    self._env = envpool.make_dm(task, num_envs=num_envs, batch_size=num_envs, seed=_envpool_seed(seed),
                                num_threads=1,
                                max_episode_steps=min(int(max_episode_steps), default))
    self._keys = tuple(keys)

  def _flat(self, observation) -> np.ndarray:
    parts = [np.asarray(getattr(observation, k), np.float32).reshape(self.num_envs, -1)
             for k in self._keys]
    return np.concatenate(parts, axis=1)

  def _reset(self):
    return self._flat(self._env.reset().observation)

  def _step(self, actions):
    ts = self._env.step(np.asarray(actions, np.float64))
    last = np.asarray(ts.step_type) == LAST
    return (self._flat(ts.observation), np.asarray(ts.reward, np.float32),
            np.asarray(ts.discount, np.float32), last)

  def close(self):
    self._env.close()


def _mapped_env(name: str, max_episode_steps: int):
  """A Gymnasium env whose spaces and values are `GymnasiumToDmEnv`'s mapping of `name`
  (float32 observations of the spec's shape, actions as the agent gives them)."""
  import gymnasium  # pylint: disable=g-import-not-at-top
  from gymnasium import spaces  # pylint: disable=g-import-not-at-top

  env = gymnasium.make(name)
  limit = env.spec.max_episode_steps if env.spec is not None else None
  env.close()
  env = gymnasium.make(name, max_episode_steps=min(int(max_episode_steps),
                                                   int(limit or max_episode_steps)))
  adapter = environments.GymnasiumToDmEnv(env)
  obs_spec, act_spec = adapter.observation_spec(), adapter.action_spec()

  class Mapped(gymnasium.Wrapper):

    def __init__(self):
      super().__init__(env)
      dtype = np.dtype(obs_spec.dtype)
      bound = (0, 255) if dtype == np.uint8 else (-np.inf, np.inf)
      self.observation_space = spaces.Box(bound[0], bound[1], obs_spec.shape, dtype)
      if isinstance(act_spec, specs.DiscreteArray):
        self.action_space = spaces.Discrete(int(act_spec.num_values))
      else:
        self.action_space = spaces.Box(act_spec.minimum, act_spec.maximum, act_spec.shape,
                                       np.float32)

    def reset(self, **kwargs):
      obs, info = self.env.reset(**kwargs)
      return adapter.observation(obs), info

    def step(self, action):
      obs, reward, terminated, truncated, info = self.env.step(adapter.env_action(action))
      return adapter.observation(obs), np.float32(reward), terminated, truncated, info

  return Mapped()


class _GymnasiumVector(VectorEnvironment):
  backend = "gymnasium"

  def __init__(self, env_id, name, num_envs, single, seed, max_episode_steps):
    import gymnasium  # pylint: disable=g-import-not-at-top
    spec = environments.environment_spec(single)
    super().__init__(env_id, num_envs, spec)
    self._env = gymnasium.vector.SyncVectorEnv(
        [lambda: _mapped_env(name, max_episode_steps)] * num_envs,
        autoreset_mode=gymnasium.vector.AutoresetMode.NEXT_STEP)
    self._seed = int(seed)
    self._obs_dtype = np.dtype(spec.observations.dtype)

  def _reset(self):
    seed, self._seed = self._seed, None  # seed the first reset only (rows: seed + i)
    obs, _ = self._env.reset(seed=seed)
    return np.asarray(obs, self._obs_dtype)

  def _step(self, actions):
    obs, reward, terminated, truncated, _ = self._env.step(actions)
    terminated = np.asarray(terminated, bool)
    return (np.asarray(obs, self._obs_dtype), np.asarray(reward, np.float32),
            np.where(terminated, 0.0, 1.0), terminated | np.asarray(truncated, bool))

  def close(self):
    self._env.close()


def _envpool():
  """The envpool module. Its import imports gym 0.23, whose gym_notices package prints a
  deprecation notice to stderr, and whose `gym.logger` turns on every library's
  DeprecationWarnings for the whole process (``warnings.simplefilter("once",
  DeprecationWarning)``); the notice is kept out of actorq's output and the process's
  warning filters are restored as they were."""
  with contextlib.redirect_stderr(io.StringIO()), warnings.catch_warnings():
    import envpool  # pylint: disable=g-import-not-at-top
  return envpool


def _envpool_ids() -> frozenset:
  return frozenset(_envpool().list_all_envs())


def _dmc_task(name: str) -> str:
  """``cartpole-balance`` -> ``CartpoleBalance-v1`` (EnvPool's dm_control ids)."""
  return "".join(p[:1].upper() + p[1:] for p in re.split(r"[-_]", name) if p) + "-v1"


def gym_vector(name: str):
  """`gym:` ids' vector backend (`environments.PREFIXES["gym"].vector`): EnvPool where it
  implements the task (`ENVPOOL_GYM_IDS`), Gymnasium's `SyncVectorEnv` otherwise."""
  return _EnvPoolGym if name in ENVPOOL_GYM_IDS and name in _envpool_ids() else _GymnasiumVector


def dmc_vector(name: str):
  """`dmc:` ids' vector backend: EnvPool for the tasks it ships, else None."""
  return _EnvPoolDmc if _dmc_task(name) in _envpool_ids() else None


def _factory(env_id: Any):
  """(the vector backend of a well-formed `env_id` or None, why there is none).

  Raises:
    environments.UnknownEnvironmentError: a suffix other than ``@repeat=K``.
  """
  try:
    parsed = environments.parse_id(env_id)
  except environments.UnknownEnvironmentError:
    environments.split_action_repeat(env_id)  # a bad suffix is the error
    return None, "EnvPool 0.8.4 does not ship this task"  # an unknown prefix
  if parsed.repeat > 1:
    return None, "action repeat (@repeat=K) runs only on the one-env path"
  if parsed.arguments:
    return None, "environment arguments (?name=value) run only on the one-env path"
  factory = parsed.entry.vector_factory(parsed.name)
  return factory, (None if factory is not None else parsed.entry.no_vector)


def vector_backend(env_id: str) -> Optional[str]:
  """"envpool", "gymnasium" (or a registered prefix's backend name) or None (no vector
  backend) for a well-formed `env_id`; None for an action-repeat id (``@repeat=K``: the
  vector backends do not apply it).

  Raises:
    environments.UnknownEnvironmentError: a suffix other than ``@repeat=K``.
  """
  factory, _ = _factory(env_id)
  return None if factory is None else factory.backend


def check_num_envs(env_id: str, num_envs: Any) -> int:
  """`num_envs` as an int after checking it and that `env_id` has a vector backend when
  it is > 1 (1 needs none: the one-env path).

  Raises:
    ValueError: `num_envs` not an integer >= 1.
    NoVectorBackendError: `num_envs` > 1 and `env_id` has no vector backend.
  """
  if isinstance(num_envs, bool) or not isinstance(num_envs, (int, np.integer)) or num_envs < 1:
    raise ValueError(f"num_envs must be an integer >= 1, got {num_envs!r}")
  if num_envs > 1:
    factory, why = _factory(env_id)
    if factory is None:
      raise NoVectorBackendError(
          f"{env_id} has no vector backend ({why}); num_envs > 1 needs a gym: id (EnvPool or "
          "Gymnasium's vector envs) or a dmc: task EnvPool ships (e.g. dmc:cartpole-balance, "
          "dmc:walker-stand); use num_envs 1 for it")
  return int(num_envs)


def make_vector_environment(env_id: str, num_envs: int, seed: int = 0,
                            max_episode_steps: int = 27_000) -> VectorEnvironment:
  """B = `num_envs` environments of `env_id` on its vector backend (module docstring).

  Args:
    env_id: ``gym:<id>``, ``dmc:<domain>-<task>`` or a registered prefix's id whose row
      gives a vector backend.
    num_envs: B >= 1.
    seed: row i is seeded `seed + i`.
    max_episode_steps: the episode step cap (a truncation), at most the task's own limit.

  Raises:
    core.UnknownEnvironmentError: an id nothing can build.
    NoVectorBackendError: an id without a vector backend.
    core.UnsupportedEnvironmentError: spaces the one-env adapter refuses, or a backend
      whose spaces differ from the one-env spec's.
  """
  check_num_envs(env_id, num_envs)
  single = environments.make_environment(env_id, seed=seed)  # the spec, and a valid id
  try:
    factory, _ = _factory(env_id)
    if factory is None:
      check_num_envs(env_id, 2)  # raises, naming why
    spec = environments.environment_spec(single)
    env = factory(env_id, environments.parse_id(env_id).name, num_envs, single, seed,
                  max_episode_steps)
  finally:
    single.close()
  first = env.reset()
  want = (num_envs,) + tuple(spec.observations.shape)
  if first.observation.shape != want:
    env.close()
    raise core.UnsupportedEnvironmentError(
        f"{env_id}: the {env.backend} backend gives observations {first.observation.shape}, "
        f"the one-env spec {want}")
  return env
