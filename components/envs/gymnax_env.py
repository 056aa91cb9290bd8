"""gymnax environments (Lange 2022, "gymnax: A JAX-based Reinforcement Learning Environment
Library"): ids ``gymnax:<gymnax id>``, e.g. ``gymnax:CartPole-v1``, ``gymnax:Acrobot-v1``,
``gymnax:Breakout-MinAtar`` (`SUPPORTED`).

Two forms of one task:

  * `make_gymnax(name, seed)`: a `dm_env.Environment` (one environment stepped from Python
    through the jitted gymnax functions), so every launch, `actorq eval`, `quantize` and
    `export` take a gymnax id like any other;
  * `functional(name)`: the task as pure JAX functions (`FunctionalEnvironment`), which
    `--launch anakin` (`actorq.launch.anakin`) compiles into one program with acting and
    learning, vmapped over environments and seeds.

Both step the same functions, so an episode under one seed is the same in both. Ids take
environment arguments, ``gymnax:CartPole-v1?length=0.8&masscart=1.2`` (the task's
``EnvParams`` fields, `parameters`; `actorq.components.envs.arguments`); `bind` makes a
variant whose parameters are JAX values, traced inside a compiled program.

Episode ends: gymnax reports one `done` for a termination and for its time limit
(`params.max_steps_in_episode`, e.g. 500 for CartPole-v1). Here a time-limit end is a
truncation (discount 1, the agent bootstraps), as Gymnasium's TimeLimit makes it: the
termination is `is_terminal` evaluated with the time limit lifted. A step that terminates
exactly at the time limit counts as a termination.

Observations are float32 (MinAtar's boolean [10, 10, C] planes become 0/1 floats, named
``"minatar_cnn"`` so DQN builds the MinAtar network, as `actorq.components.envs.minatar`
does). gymnax's MinAtar games have no sticky actions (the MinAtar paper's default of 0.1,
which the ``minatar:`` prefix applies): scores of the two prefixes are not comparable.
Pinned version: gymnax 0.0.5 (requirements/constraints-py310.txt says why).
"""
from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable, Dict, Mapping, Tuple

import dm_env
import numpy as np
from dm_env import specs as dm_specs

from actorq import core
from actorq.components.envs import arguments as arguments_lib
from actorq.components.envs.gymnasium_adapter import InvalidActionError

# The gymnax ids this prefix offers: discrete actions, vector or image observations.
SUPPORTED = ("CartPole-v1", "Acrobot-v1", "MountainCar-v0", "Breakout-MinAtar",
             "SpaceInvaders-MinAtar", "Asterix-MinAtar", "Freeway-MinAtar", "Catch-bsuite")
MINATAR_NETWORK = "minatar_cnn"  # `network_spec.IMAGE_NETWORKS` key of MinAtar's CNN
NO_TIME_LIMIT = 2**30


@dataclasses.dataclass(frozen=True)
class FunctionalEnvironment:
  """One task as pure, jittable, vmappable JAX functions.

  Attributes:
    name: the gymnax id.
    reset: ``reset(key) -> (state, observation)``; observation float32 `observation_shape`.
    step: ``step(key, state, action) -> (state, observation, reward, discount, last)``:
      the next state and observation (never reset: the caller resets after `last`),
      float32 reward, float32 discount (0 after a termination, else 1), bool `last` (the
      episode ended: terminated or truncated at its time limit).
    observation_shape: the observation's shape.
    num_actions: A (actions are int32 in [0, A)).
    max_episode_steps: the time limit of an episode.
    observation_name: the observation spec's name (``"minatar_cnn"`` for MinAtar).
    storage_dtype: the dtype that holds observations exactly in a replay buffer (uint8
      for MinAtar's 0/1 planes: a quarter of float32's memory).
  """
  name: str
  reset: Callable[..., Tuple[Any, Any]]
  step: Callable[..., Tuple[Any, Any, Any, Any, Any]]
  observation_shape: Tuple[int, ...]
  num_actions: int
  max_episode_steps: int
  observation_name: str = "observation"
  storage_dtype: str = "float32"

  def observation_spec(self) -> dm_specs.Array:
    return dm_specs.Array(self.observation_shape, np.float32, self.observation_name)

  def action_spec(self) -> dm_specs.DiscreteArray:
    return dm_specs.DiscreteArray(self.num_actions, np.int32, name="action")


def _check_name(name: str) -> None:
  if name not in SUPPORTED:
    raise core.UnknownEnvironmentError(
        f"unknown gymnax environment {name!r} in 'gymnax:{name}'; allowed: "
        f"{', '.join(SUPPORTED)}")


def _gymnax(name: str):
  _check_name(name)
  import gymnax  # pylint: disable=g-import-not-at-top
  return gymnax.make(name)


def parameters(name: str) -> Dict[str, Any]:
  """The environment arguments task `name` takes (``gymnax:<name>?arg=value``) with their
  defaults: the numeric fields of its gymnax ``EnvParams`` less the derived constants
  (`arguments.DERIVED`). CartPole-v1: force_mag, gravity, length, masscart, masspole,
  max_steps_in_episode, tau, theta_threshold_radians, x_threshold.

  Raises:
    core.UnknownEnvironmentError: a name outside `SUPPORTED`.
  """
  _, params = _gymnax(name)
  return arguments_lib.parameters(
      name, {f.name: getattr(params, f.name) for f in dataclasses.fields(params)})


@functools.lru_cache(maxsize=None)
def functional(name: str, arguments: arguments_lib.Arguments = ()) -> FunctionalEnvironment:
  """The gymnax task `name` (one of `SUPPORTED`) as a `FunctionalEnvironment`, with the
  environment arguments `arguments` (``(("length", 0.8), ...)``, `arguments.parse`).

  Raises:
    core.UnknownEnvironmentError: a name outside `SUPPORTED` (one line listing them), an
      argument the task does not take (one line listing the ones it does).
  """
  values = arguments_lib.resolve(f"gymnax:{name}", arguments, parameters(name))
  return bind(name, values)


def bind(name: str, values: Mapping[str, Any]) -> FunctionalEnvironment:
  """Task `name` with the parameters `values` (names of `parameters(name)`; Python numbers
  or JAX scalars, which may be traced: a compiled program can take a task variant's
  physics as an input and run every variant without recompiling), the derived constants
  recomputed (`arguments.DERIVED`). `values` are not checked: `functional` checks ids.
  ``max_steps_in_episode`` must be a Python int when given (it sizes the time limit).
  """
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  env, params = _gymnax(name)
  if values:
    merged = {f.name: getattr(params, f.name) for f in dataclasses.fields(params)}
    merged.update(values)
    params = params.replace(**values, **arguments_lib.derived(name, merged))
  unlimited = params.replace(max_steps_in_episode=NO_TIME_LIMIT)
  obs_shape = tuple(int(d) for d in env.observation_space(params).shape)
  minatar = name.endswith("-MinAtar")

  def to_obs(obs):
    return jnp.asarray(obs, jnp.float32).reshape(obs_shape)

  def reset(key):
    obs, state = env.reset_env(key, params)
    return state, to_obs(obs)

  def step(key, state, action):
    obs, state, reward, done, _ = env.step_env(key, state, action, params)
    terminated = jnp.logical_and(done, env.is_terminal(state, unlimited))
    return (state, to_obs(obs), jnp.asarray(reward, jnp.float32),
            1.0 - terminated.astype(jnp.float32), jnp.asarray(done, bool))

  return FunctionalEnvironment(name, reset, step, obs_shape, int(env.num_actions),
                               int(params.max_steps_in_episode),
                               MINATAR_NETWORK if minatar else "observation",
                               "uint8" if minatar else "float32")


class GymnaxToDmEnv(dm_env.Environment):
  """A gymnax task as a `dm_env.Environment`: the `functional` form's jitted `reset` and
  `step` called one step at a time (float32 observations, rewards and discounts; int
  actions in [0, A)). Seeded: episode k's randomness comes from the key of `seed`.

  Raises:
    InvalidActionError: (`step`) an action outside [0, A).
  """

  def __init__(self, name: str, seed: int = 0, arguments: arguments_lib.Arguments = ()):
    import jax  # pylint: disable=g-import-not-at-top
    self._fn = functional(name, tuple(arguments))
    self._jax = jax
    self._reset = jax.jit(self._fn.reset)
    self._step = jax.jit(self._fn.step)
    self._key = jax.random.PRNGKey(int(seed))
    self._state = None
    self._last = True

  def _next_key(self):
    self._key, key = self._jax.random.split(self._key)
    return key

  def reset(self) -> dm_env.TimeStep:
    self._state, obs = self._reset(self._next_key())
    self._last = False
    return dm_env.restart(np.asarray(obs, np.float32))

  def step(self, action) -> dm_env.TimeStep:
    if self._last:
      return self.reset()
    a = int(np.asarray(action).reshape(()))
    if not 0 <= a < self._fn.num_actions:
      raise InvalidActionError(f"action {a} is outside gymnax:{self._fn.name}'s actions; allowed: "
                       f"0..{self._fn.num_actions - 1}")
    self._state, obs, reward, discount, last = self._step(self._next_key(), self._state,
                                                          np.int32(a))
    obs = np.asarray(obs, np.float32)
    reward = np.float32(reward)
    if not bool(last):
      return dm_env.transition(reward, obs, np.float32(1.0))
    self._last = True
    if float(discount) == 0.0:
      return dm_env.termination(reward, obs)
    return dm_env.truncation(reward, obs, np.float32(1.0))

  def observation_spec(self):
    return self._fn.observation_spec()

  def action_spec(self):
    return self._fn.action_spec()

  def reward_spec(self):
    return dm_specs.Array((), np.float32, "reward")

  def discount_spec(self):
    return dm_specs.BoundedArray((), np.float32, 0.0, 1.0, "discount")


def make_gymnax(name: str, seed: int = 0, arguments: arguments_lib.Arguments = (),
                **kwargs: Any) -> dm_env.Environment:
  """``gymnax:<id>``: `GymnaxToDmEnv` (the `EnvironmentPrefix` factory); `arguments` are
  the id's (``gymnax:CartPole-v1?length=0.8``, `functional`).

  Raises:
    core.UnknownEnvironmentError: a name outside `SUPPORTED`, an argument the task does
      not take, or keyword arguments (gymnax tasks take their parameters from the id).
  """
  _check_name(name)
  if kwargs:
    raise core.UnknownEnvironmentError(
        f"gymnax:{name} takes no keyword arguments, got {', '.join(sorted(kwargs))}; set "
        "its parameters in the id, e.g. gymnax:CartPole-v1?length=0.8")
  return GymnaxToDmEnv(name, seed, arguments)
