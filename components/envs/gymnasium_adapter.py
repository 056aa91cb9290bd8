"""Gymnasium environments as `dm_env.Environment`: spaces checked and mapped once.

Every step's observation has the spec's dtype (float32, or uint8 for images) and every
reward and discount is float32, first and last timesteps included.

Gymnasium's (terminated, truncated) is mapped to dm_env as (handed case E2):

  =========== ========== ========= ========
  terminated  truncated  step type discount
  =========== ========== ========= ========
  False       False      MID       1.0
  False       True       LAST      1.0  (time limit: the learner bootstraps)
  True        any        LAST      0.0  (true termination: no bootstrap)
  =========== ========== ========= ========

Gymnasium spaces are checked and mapped once, when `GymnasiumToDmEnv` is built:

  Action spaces (what the agent sees -> what the env receives):
    * ``Discrete(n, start=s)`` -> ``DiscreteArray(n)`` int32 over {0..n-1}; index ``a`` is
      sent as ``a + s`` in the space's dtype (case B1).
    * ``MultiDiscrete(nvec, start)``, ``MultiBinary(n)`` and integer or bool ``Box`` ->
      one flattened ``DiscreteArray(prod)`` (an integer Box is the MultiDiscrete with
      ``nvec = high - low + 1, start = low``); index ``i`` is the row-major (C order)
      position of the vector ``v - start``, i.e. ``np.unravel_index(i, nvec)`` gives
      ``v - start`` and the last component varies fastest. At most `MAX_FLAT_ACTIONS`
      (1024) values: one Q-value (or logit) per value is what a flat head can learn.
    * float ``Box`` (float16/32/64) -> float32 ``BoundedArray`` with the space's bounds as
      float32, infinite bounds kept (the agents that need finite bounds, DDPG and D4PG,
      refuse them through `actorq.components.acting.continuous.bounds`); a 0-d Box is shown as
      shape (1,). The action is checked against the spec (shape, finite, inside the
      bounds), cast to the space's dtype and clipped to the space's own bounds (which
      only moves a value by the float32 rounding of a bound).
    * anything else (Text, Graph, Sequence, OneOf, Dict, Tuple): refused.
  Observation spaces:
    * ``Box``: uint8 stays uint8 (images), any other dtype becomes float32; a 0-d Box is
      shown as shape (1,).
    * ``Discrete(n, start)`` -> one-hot float32 [n]; ``MultiDiscrete``/``MultiBinary`` ->
      their values as a float32 vector [size].
    * ``Dict``/``Tuple`` of vector-like parts (the above, non-image Boxes flattened) ->
      one float32 vector, the parts concatenated depth-first in sorted-key (Dict) or
      index (Tuple) order. A Dict/Tuple whose only part is an image is that image; an
      image part (a 3-d Box, or a 2-d uint8 Box) mixed with other parts is refused.
    * anything else (Text, Graph, Sequence, OneOf): refused.
  A refused space raises `UnsupportedSpaceError`, one line naming the space and listing
  what is supported.
"""
from __future__ import annotations

import math
from typing import Any, Callable, List, Optional, Tuple

import dm_env
import numpy as np
from dm_env import specs as dm_specs

from actorq import core

# The largest flattened discrete action (MultiDiscrete, MultiBinary, integer Box): a flat
# Q-head (DQN) or categorical policy has one output per value, and past ~1k values each
# one is tried too rarely to learn; 1024 also allows MultiBinary(10) and 32x32 grids.
MAX_FLAT_ACTIONS = 1024


class UnsupportedSpaceError(core.UnsupportedEnvironmentError):
  """A Gymnasium observation or action space that actorq cannot map (see the module
  docstring)."""


class InvalidActionError(ValueError):
  """An action outside the environment's action spec (wrong shape, dtype kind, out of
  range or non-finite); raised before anything reaches the environment."""


def _describe(space) -> str:
  """`repr(space)` on one line and at most ~200 characters."""
  text = " ".join(repr(space).split())
  return text if len(text) <= 200 else text[:197] + "..."


_SUPPORTED_ACTIONS = ("Discrete, MultiDiscrete, MultiBinary and integer or bool Box (one flat "
                      f"discrete action of at most {MAX_FLAT_ACTIONS} values), float Box")
_SUPPORTED_OBSERVATIONS = ("Box, Discrete, MultiDiscrete, MultiBinary, and Dict or Tuple of "
                           "those (concatenated into one float32 vector; one image at most, "
                           "and only on its own)")


# ---------------------------------------------------------------------------------------
# Actions.


def _index(action: Any, num_values: int) -> int:
  """The int in [0, num_values) that `action` (an integer scalar) is.

  Raises:
    InvalidActionError: for a non-integer, non-scalar or out-of-range action.
  """
  a = np.asarray(action)
  if a.shape not in ((), (1,)) or a.dtype.kind not in "iu":
    raise InvalidActionError(
        f"action {a!r} is not an integer scalar; the action spec is DiscreteArray"
        f"({num_values}) with values 0..{num_values - 1}")
  i = int(a.reshape(()))
  if not 0 <= i < num_values:
    raise InvalidActionError(
        f"action {i} is outside the action spec DiscreteArray({num_values}): "
        f"allowed 0..{num_values - 1}")
  return i


action_index = _index  # the same check for adapters of other discrete games (minatar)


class _ActionMap:
  """An action spec and the map from its actions to the Gymnasium space's actions.

  `to_env(action)` returns the env's action (inside the space) or raises
  `InvalidActionError`; `from_env(env_action)` is its inverse (flat indices only).
  """

  def __init__(self, spec, to_env: Callable[[Any], Any],
               from_env: Optional[Callable[[Any], Any]] = None):
    self.spec, self.to_env, self.from_env = spec, to_env, from_env


def _discrete_action(space) -> _ActionMap:
  n, start, dtype = int(space.n), int(space.start), np.dtype(space.dtype)
  if n > np.iinfo(np.int32).max:
    raise UnsupportedSpaceError(
        f"action space {_describe(space)} has {n} actions; at most "
        f"{np.iinfo(np.int32).max} (int32) are supported")
  spec = dm_specs.DiscreteArray(n, dtype=np.int32, name="action")

  def to_env(action):
    return dtype.type(_index(action, n) + start)

  def from_env(env_action):
    return np.int32(_index(np.asarray(env_action) - start, n))

  return _ActionMap(spec, to_env, from_env)


def _flat_discrete_action(space, nvec: np.ndarray, start: np.ndarray, dtype) -> _ActionMap:
  """One `DiscreteArray(prod(nvec))` over the vectors `start + v`, `0 <= v < nvec`
  (row-major: index = `np.ravel_multi_index(v, nvec)`), each of shape `nvec.shape`."""
  counts = [int(c) for c in np.asarray(nvec, dtype=object).reshape(-1)]
  total = math.prod(counts)
  if total > MAX_FLAT_ACTIONS:
    raise UnsupportedSpaceError(
        f"action space {_describe(space)} flattens to {total} discrete actions, more than "
        f"the {MAX_FLAT_ACTIONS} (MAX_FLAT_ACTIONS) a flat action head allows; supported: "
        f"{_SUPPORTED_ACTIONS}")
  shape = tuple(np.shape(nvec))
  starts = np.asarray(start, dtype=object).reshape(-1)
  if counts:
    offsets = np.stack(np.unravel_index(np.arange(total), counts), axis=-1).astype(object)
  else:
    offsets = np.zeros((1, 0), dtype=object)
  # Python ints until the final cast: `start + offset` fits the space's dtype, the
  # intermediate values might not (e.g. an int8 Box from -128 to 127).
  table = (offsets + starts[None]).astype(dtype).reshape((total,) + shape)
  table.setflags(write=False)
  spec = dm_specs.DiscreteArray(total, dtype=np.int32, name="action")

  def to_env(action):
    return np.array(table[_index(action, total)])  # a copy; an ndarray also when 0-d

  def from_env(env_action):
    v = np.asarray(env_action).astype(object).reshape(-1) - starts
    if v.shape != (len(counts),) or any(not 0 <= int(x) < c for x, c in zip(v, counts)):
      raise InvalidActionError(f"{env_action!r} is not an action of {_describe(space)}")
    return np.int32(np.ravel_multi_index([int(x) for x in v], counts) if counts else 0)

  return _ActionMap(spec, to_env, from_env)


def _box_action(space) -> _ActionMap:
  dtype = np.dtype(space.dtype)
  if dtype.kind == "b":  # {False, True}^shape: MultiBinary in disguise
    return _flat_discrete_action(space, np.full(space.shape, 2), np.zeros(space.shape, int),
                                 dtype)
  if dtype.kind in "iu":
    low = space.low.astype(object)
    high = space.high.astype(object)
    return _flat_discrete_action(space, high - low + 1, low, dtype)
  shape = tuple(space.shape) or (1,)
  low = np.asarray(space.low, np.float32).reshape(shape)
  high = np.asarray(space.high, np.float32).reshape(shape)
  spec = dm_specs.BoundedArray(shape, np.float32, low, high, "action")
  space_low, space_high = space.low, space.high
  # NaN fails every comparison, so only infinite bounds need their own isfinite; and a
  # float32 action inside float32 bounds is inside a float32 space, so only other dtypes
  # need the clip (float32 rounding of a float64 bound can put it just outside).
  bounded = bool(np.isfinite(low).all() and np.isfinite(high).all())
  clip = dtype != np.float32

  def to_env(action):
    a = np.asarray(action)
    if a.shape != shape or a.dtype.kind not in "fiu":
      raise InvalidActionError(
          f"action of shape {a.shape} and dtype {a.dtype} does not match the action spec: "
          f"float32 of shape {shape}")
    a = a.astype(np.float32, copy=False)
    if not (((a >= low) & (a <= high)).all() and (bounded or np.isfinite(a).all())):
      raise InvalidActionError(
          f"action {a.tolist()} is non-finite or outside the action spec's bounds "
          f"[{low.tolist()}, {high.tolist()}]")
    if clip:
      a = np.clip(a.astype(dtype), space_low, space_high)
    return a.reshape(space.shape)

  return _ActionMap(spec, to_env)


def _action_map(space) -> _ActionMap:
  """The action spec and map of a Gymnasium action space (see the module docstring).

  Raises:
    UnsupportedSpaceError: for a space not listed there, or too many flat actions.
  """
  from gymnasium import spaces
  if isinstance(space, spaces.Discrete):
    return _discrete_action(space)
  if isinstance(space, spaces.MultiDiscrete):
    return _flat_discrete_action(space, space.nvec, space.start, space.dtype)
  if isinstance(space, spaces.MultiBinary):
    return _flat_discrete_action(space, np.full(space.shape, 2), np.zeros(space.shape, int),
                                 space.dtype)
  if isinstance(space, spaces.Box):
    return _box_action(space)
  raise UnsupportedSpaceError(
      f"action space {_describe(space)} is not supported; supported: {_SUPPORTED_ACTIONS}")


# ---------------------------------------------------------------------------------------
# Observations.


def _is_image(space) -> bool:
  """A Box that is a frame: [H, W, C], or a uint8 [H, W]."""
  from gymnasium import spaces
  return isinstance(space, spaces.Box) and (
      len(space.shape) == 3 or (len(space.shape) == 2 and space.dtype == np.uint8))


def _array(x: Any, dtype, space, shape: Tuple[int, ...]) -> np.ndarray:
  """`x` as `dtype`, after checking it has the space's shape; reshaped to `shape`."""
  a = np.asarray(x, dtype=dtype)
  if a.shape != space.shape:
    raise ValueError(f"the environment returned an observation of shape {a.shape}; its "
                     f"observation space {_describe(space)} has shape {space.shape}")
  return a.reshape(shape)


def _leaves(space, path: Tuple[Any, ...] = ()) -> List[Tuple[Tuple[Any, ...], Any]]:
  """The (path, space) leaves of a (nested) Dict/Tuple, depth-first in sorted-key / index
  order; `path` is the keys/indices that lead from an observation to the leaf's value."""
  from gymnasium import spaces
  if isinstance(space, spaces.Dict):
    return [leaf for key in sorted(space.spaces, key=str)
            for leaf in _leaves(space.spaces[key], path + (key,))]
  if isinstance(space, spaces.Tuple):
    return [leaf for i, sub in enumerate(space.spaces) for leaf in _leaves(sub, path + (i,))]
  return [(path, space)]


def _where(path: Tuple[Any, ...]) -> str:
  return "".join(f"[{key!r}]" for key in path)


def _get(x: Any, path: Tuple[Any, ...]) -> Any:
  for key in path:
    x = x[key]
  return x


def _leaf_vector(space, path, top) -> Tuple[int, Callable[[Any], np.ndarray]]:
  """(size, x -> float32 [size]) of one vector-like leaf of the observation space `top`."""
  from gymnasium import spaces
  if isinstance(space, (spaces.Box, spaces.MultiDiscrete, spaces.MultiBinary)):
    size = int(np.prod(space.shape, dtype=np.int64))
    return size, lambda x: _array(x, np.float32, space, (size,))
  if isinstance(space, spaces.Discrete):
    n, start = int(space.n), int(space.start)

    def one_hot(x):
      i = int(np.asarray(x).reshape(())) - start
      if not 0 <= i < n:
        raise ValueError(f"the environment returned observation {i + start}, outside its "
                         f"observation space {_describe(space)}")
      out = np.zeros(n, np.float32)
      out[i] = 1.0
      return out

    return n, one_hot
  part = f" (part {_where(path)}: {_describe(space)})" if path else ""
  raise UnsupportedSpaceError(
      f"observation space {_describe(top)}{part} is not supported; supported: "
      f"{_SUPPORTED_OBSERVATIONS}")


def _observation_map(space) -> Tuple[dm_specs.Array, Callable[[Any], np.ndarray]]:
  """The observation spec of a Gymnasium observation space and the map of its values
  (see the module docstring).

  Raises:
    UnsupportedSpaceError: for a space not listed there, or an image mixed with vectors.
  """
  from gymnasium import spaces
  if isinstance(space, spaces.Box):
    dtype = np.uint8 if space.dtype == np.uint8 else np.float32
    shape = tuple(space.shape) or (1,)
    return (dm_specs.Array(shape, dtype, "observation"),
            lambda x: _array(x, dtype, space, shape))
  leaves = _leaves(space)
  images = [(path, leaf) for path, leaf in leaves if _is_image(leaf)]
  if images and len(leaves) == 1:  # e.g. Dict(pixels=Box(0, 255, (84, 84, 3), uint8))
    path, image = images[0]
    spec, convert = _observation_map(image)
    return spec, lambda x: convert(_get(x, path))
  if images:
    path, image = images[0]
    raise UnsupportedSpaceError(
        f"observation space {_describe(space)} mixes an image part ({_where(path)}: "
        f"{_describe(image)}) with other parts; supported: {_SUPPORTED_OBSERVATIONS}")
  converters = []
  total = 0
  for path, leaf in leaves:
    size, convert = _leaf_vector(leaf, path, space)
    converters.append((path, convert))
    total += size

  def flat(x):
    if not converters:
      return np.zeros(0, np.float32)
    return np.concatenate([convert(_get(x, path)) for path, convert in converters])

  return dm_specs.Array((total,), np.float32, "observation"), flat


# ---------------------------------------------------------------------------------------
# Adapters and wrappers.


class GymnasiumToDmEnv(dm_env.Environment):
  """Adapts a Gymnasium environment to `dm_env`, its spaces mapped as the module
  docstring says.

  Args:
    env: a `gymnasium.Env` (or anything with its `reset`/`step`/spaces interface).
    seed: seeds the first `reset` only; later resets continue the env's stream.

  Raises:
    UnsupportedSpaceError: (at construction) for an observation or action space that
      cannot be mapped; one line naming the space and listing what is supported.
  """

  def __init__(self, env, seed: Optional[int] = None):
    self._env = env
    self._seed = seed
    self._reset_next = True
    self._observation_spec, self._convert_observation = _observation_map(
        env.observation_space)
    self._actions = _action_map(env.action_space)

  def mapped_spaces(self) -> List[str]:
    """The spaces whose values the adapter maps (not the identity), described: an
    observation space other than a Box (one-hot, flattened Dict/Tuple parts), an action
    space other than a Discrete from 0 or a float Box (a `Discrete(n, start)` index is
    shifted by start; MultiDiscrete, MultiBinary and integer Box actions are flat
    indices). [] when a model fed the env's raw observations and acting with the spec's
    actions acts in the environment itself (what `actorq export` needs, case B17)."""
    from gymnasium import spaces
    obs, act = self._env.observation_space, self._env.action_space
    mapped = []
    if not isinstance(obs, spaces.Box):
      mapped.append(f"observation space {_describe(obs)} (fed as {self._observation_spec.dtype}"
                    f"{list(self._observation_spec.shape)}, flattened)")
    identity = ((isinstance(act, spaces.Discrete) and int(act.start) == 0) or
                (isinstance(act, spaces.Box) and np.dtype(act.dtype).kind == "f"))
    if not identity:
      mapped.append(f"action space {_describe(act)} (acted as flat indices 0.."
                    f"{self._actions.spec.num_values - 1})")
    return mapped

  def env_action(self, action) -> Any:
    """The action the Gymnasium env receives for `action` of the action spec.

    Raises:
      InvalidActionError: for an action outside the action spec (nothing is sent).
    """
    return self._actions.to_env(action)

  def observation(self, env_observation) -> np.ndarray:
    """The environment's observation as the spec's array (what every timestep holds)."""
    return self._convert_observation(env_observation)

  def agent_action(self, env_action) -> np.int32:
    """The inverse of `env_action` for a discrete action spec: the int32 index of an
    action of the Gymnasium space (e.g. to replay logged actions).

    Raises:
      InvalidActionError: for a value that is not an action of the space.
      TypeError: for a continuous action spec (there the two are the same numbers).
    """
    if self._actions.from_env is None:
      raise TypeError("agent_action maps discrete actions only; this action spec is "
                      f"continuous: {self._actions.spec!r}")
    return self._actions.from_env(env_action)

  def reset(self) -> dm_env.TimeStep:
    if self._seed is not None:
      obs, _ = self._env.reset(seed=self._seed)
      self._seed = None  # seed only the first episode; later resets continue the stream
    else:
      obs, _ = self._env.reset()
    self._reset_next = False
    return dm_env.restart(self._convert_observation(obs))

  def step(self, action) -> dm_env.TimeStep:
    if self._reset_next:
      return self.reset()
    obs, reward, terminated, truncated, _ = self._env.step(self._actions.to_env(action))
    obs, reward = self._convert_observation(obs), np.float32(reward)
    if terminated or truncated:
      self._reset_next = True
      discount = np.float32(0.0 if terminated else 1.0)
      return dm_env.TimeStep(dm_env.StepType.LAST, reward, discount, obs)
    return dm_env.TimeStep(dm_env.StepType.MID, reward, np.float32(1.0), obs)

  def observation_spec(self):
    return self._observation_spec

  def action_spec(self):
    return self._actions.spec

  def reward_spec(self):
    return dm_specs.Array((), np.float32, "reward")

  def discount_spec(self):
    return dm_specs.BoundedArray((), np.float32, 0.0, 1.0, "discount")

  def render(self):
    return self._env.render()

  def close(self):
    self._env.close()
