"""Environments as `dm_env.Environment`, from an id string.

Ids:
  * ``gym:<Gymnasium id>``, e.g. ``gym:CartPole-v1``, or a partially observable variant
    of `PARTIALLY_OBSERVED`: ``gym:CartPole-v1-po`` (CartPole-v1 observing only the cart
    position and the pole angle, float32 [2]);
  * ``dmc:<domain>-<task>``, e.g. ``dmc:cartpole-balance`` (dm_control suite; the
    observation dict is concatenated into one float32 vector);
  * ``atari:<Game>``, e.g. ``atari:Pong`` (see `actorq.components.envs.atari`);
  * ``minatar:<game>``, e.g. ``minatar:breakout`` (MinAtar, Young and Tian 2019: float32
    [10, 10, C] observations; see `actorq.components.envs.minatar`);
  * ``gymnax:<gymnax id>``, e.g. ``gymnax:CartPole-v1``, ``gymnax:Breakout-MinAtar`` (JAX
    environments: `actorq.components.envs.gymnax_env`; the ones ``--launch anakin``
    compiles, `EnvironmentPrefix.functional`);
  * a prefix registered since (`register_prefix`);
  * any of these with environment arguments, ``?name=value&name=value`` after the name:
    a task variant, e.g. ``gym:CartPole-v1?length=0.8&masscart=1.2`` or
    ``gymnax:CartPole-v1?gravity=12`` (prefixes whose row `takes_arguments`; the names a
    task takes are its numeric physical parameters, derived constants recomputed:
    `actorq.components.envs.arguments`; an unknown name is a one-line error listing them);
  * any of these with ``@repeat=K`` appended (after the arguments), e.g. ``dmc:cartpole-swingup@repeat=8``: action
    repeat (frame skip), K >= 2 (`ActionRepeat`). One agent step is then K environment
    steps of the base id (fewer at an episode's end): actorq's step counts (``--steps``,
    `actor_steps`, evaluation points, episode lengths) count agent steps, so 100,000 base
    environment steps at K = 8 are ``--steps 12500``. The PlaNet/DrQ convention for
    dm_control at small budgets (cartpole K = 8: Hafner et al. 2019, PlaNet).

Every adapter emits float32 rewards and discounts and observations of the spec's dtype
(float32, or uint8 for images), on every timestep (first and last included).

Gymnasium environments go through `actorq.components.envs.gymnasium_adapter.GymnasiumToDmEnv`
(spaces checked and mapped once, the terminated/truncated table of case E2).

Episodes that never end are capped where episodes run (`actorq.components.acting.loop`), not
here.

Prefixes are one table, `PREFIXES` (``"gym"`` -> `EnvironmentPrefix(make, usage, vector,
no_vector)`): the one-environment factory and the vector backend of each prefix
(`actorq.components.envs.vector_env` builds ``num_envs > 1`` from it). `parse_id` is the one
parser of an id (prefix, name, action repeat); an unknown prefix is the one-line
`UnknownEnvironmentError` listing the table's usages. A new backend is one factory plus
one entry (`register_prefix`; docs/guides/add-an-environment-backend.md).
"""
from __future__ import annotations

import dataclasses
import importlib
from typing import Any, Callable, Dict, NamedTuple, Optional, Tuple, Union

import dm_env
import numpy as np
from acme import specs
from dm_env import specs as dm_specs

from actorq import core
from actorq.components.envs import arguments as arguments_lib
from actorq.components.envs import atari
from actorq.components.envs import gymnax_env
from actorq.components.envs import minatar
from actorq.components.envs.gymnasium_adapter import (MAX_FLAT_ACTIONS, GymnasiumToDmEnv,
                                                 InvalidActionError, UnsupportedSpaceError)

__all__ = [
    "MAX_FLAT_ACTIONS", "PREFIXES",
    "ActionRepeat", "DmControlFlat", "EnvironmentId", "EnvironmentPrefix", "GymnasiumToDmEnv",
    "InvalidActionError", "UnknownEnvironmentError", "UnsupportedEnvironmentError",
    "UnsupportedSpaceError", "allowed_prefixes", "environment_spec", "make_environment",
    "parse_id", "register_prefix", "split_action_repeat",
]

REPEAT_SUFFIX = "@repeat="

# The same classes as `actorq.core`'s (importable from here as they always were).
UnknownEnvironmentError = core.UnknownEnvironmentError
UnsupportedEnvironmentError = core.UnsupportedEnvironmentError


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


# Partially observable variants: ``gym:<name>`` -> (the Gymnasium id, the observation
# entries kept). CartPole-v1's observation is (cart position, cart velocity, pole angle,
# pole angular velocity); "-po" keeps (cart position, pole angle), so the velocities must
# be inferred from the history (a recurrent agent's test bed, e.g. R2D2).
PARTIALLY_OBSERVED = {"CartPole-v1-po": ("CartPole-v1", (0, 2))}


def _KeepObservationEntries(env, keep):
  """`env` (a Gymnasium env with a 1-d Box observation) observing only entries `keep`."""
  import gymnasium
  idx = np.asarray(keep, np.int64)
  space = env.observation_space
  low, high = np.asarray(space.low)[idx], np.asarray(space.high)[idx]

  class KeepEntries(gymnasium.ObservationWrapper):

    def __init__(self, inner):
      super().__init__(inner)
      self.observation_space = gymnasium.spaces.Box(low, high, dtype=space.dtype)

    def observation(self, observation):
      return np.asarray(observation)[idx]

  return KeepEntries(env)


class ActionRepeat(dm_env.Environment):
  """Each action applied `num_repeats` times, or until the episode ends: the reward is the
  sum of the repeats' rewards, each weighted by the product of the earlier repeats'
  environment discounts, and the discount is their product (float32 both).

  Acme's `wrappers.ActionRepeatWrapper` computes the same; it is not used because importing
  anything from `acme.wrappers` runs that package's `__init__`, which imports the
  unmaintained `gym` (a warning on stderr at every start, breaking one-line CLI errors) and
  the Atari wrappers.
  """

  def __init__(self, environment: dm_env.Environment, num_repeats: int):
    self._env = environment
    self._num_repeats = int(num_repeats)

  def step(self, action) -> dm_env.TimeStep:
    reward, discount = np.float32(0.0), np.float32(1.0)
    for _ in range(self._num_repeats):
      ts = self._env.step(action)
      reward = np.float32(reward + discount * np.float32(ts.reward))
      discount = np.float32(discount * np.float32(ts.discount))
      if ts.last():
        break
    return ts._replace(reward=reward, discount=discount)

  def reset(self) -> dm_env.TimeStep:
    return self._env.reset()

  def observation_spec(self):
    return self._env.observation_spec()

  def action_spec(self):
    return self._env.action_spec()

  def reward_spec(self):
    return self._env.reward_spec()

  def discount_spec(self):
    return self._env.discount_spec()

  def render(self, *args, **kwargs):
    return self._env.render(*args, **kwargs)

  def close(self):
    self._env.close()


def split_action_repeat(env_id: str) -> Tuple[str, int]:
  """``"dmc:cartpole-swingup@repeat=8"`` -> ``("dmc:cartpole-swingup", 8)``; an id without
  the suffix -> ``(env_id, 1)``.

  Raises:
    UnknownEnvironmentError: a suffix that is not ``@repeat=K`` with an integer K >= 2.
  """
  if not isinstance(env_id, str) or "@" not in env_id:
    return env_id, 1
  base, sep, count = env_id.partition(REPEAT_SUFFIX)
  if not sep or "@" in base or not count.isdigit():
    raise UnknownEnvironmentError(
        f"environment id {env_id!r}: the only suffix allowed is '@repeat=K' (action repeat, K an "
        "integer >= 2), e.g. dmc:cartpole-swingup@repeat=8")
  repeat = int(count)
  if repeat < 2:
    raise UnknownEnvironmentError(
        f"environment id {env_id!r}: action repeat must be an integer >= 2 (leave the suffix "
        "out for none), e.g. dmc:cartpole-swingup@repeat=8")
  return base, repeat


# A vector backend of one task: ``factory(env_id, name, num_envs, single, seed,
# max_episode_steps) -> vector_env.VectorEnvironment`` (`single`: a one-env instance of the
# id, open during the call, for its spec), with a ``backend`` attribute naming it.
VectorFactory = Callable[..., Any]


@dataclasses.dataclass(frozen=True)
class EnvironmentPrefix:
  """One row of `PREFIXES`: how ids ``<prefix>:<name>`` are built.

  Attributes:
    make: ``make(name, seed, **kwargs) -> dm_env.Environment``: the one-environment
      factory (float32 rewards and discounts; observations float32 or uint8). Raises
      `UnknownEnvironmentError` for a name it does not know, one line naming what is.
    usage: the prefix's form and an example for the unknown-id error, e.g.
      ``"'gym:<Gymnasium id>' (e.g. gym:CartPole-v1)"``.
    vector: the vector backend of a name, ``vector(name) -> VectorFactory or None`` (None:
      that name has none), or a ``"module:function"`` path to such a function (imported
      when first asked, as Gymnasium's entry points are), or None: the prefix has no vector
      backend (``num_envs`` must be 1).
    no_vector: why a name has no vector backend (`vector_env.check_num_envs`' error).
    functional: the task as pure JAX functions, ``functional(name) ->
      gymnax_env.FunctionalEnvironment`` (what ``--launch anakin`` compiles), or a
      ``"module:function"`` path to it, or None: the prefix has no JAX form. With
      `takes_arguments`, ``functional(name, arguments)`` as well.
    takes_arguments: ids of the prefix take environment arguments
      (``<prefix>:<name>?length=0.8``): `make` (and `functional`) then take
      ``arguments=((name, value), ...)`` (`arguments.Arguments`).
  """
  make: Callable[..., dm_env.Environment]
  usage: str
  vector: Union[None, str, Callable[[str], Optional[VectorFactory]]] = None
  no_vector: str = "no vector backend is registered for it"
  functional: Union[None, str, Callable[..., Any]] = None
  takes_arguments: bool = False

  def functional_environment(self, name: str, arguments: arguments_lib.Arguments = ()):
    """The JAX form of `name` with `arguments` (`functional`), or None when the prefix
    has none."""
    functional = self.functional
    if isinstance(functional, str):
      module, _, attr = functional.partition(":")
      functional = getattr(importlib.import_module(module), attr)
    if functional is None:
      return None
    return functional(name, tuple(arguments)) if arguments else functional(name)

  def vector_factory(self, name: str) -> Optional[VectorFactory]:
    """The vector backend of `name` (None: it has none)."""
    vector = self.vector
    if isinstance(vector, str):
      module, _, attr = vector.partition(":")
      vector = getattr(importlib.import_module(module), attr)
    return None if vector is None else vector(name)


class EnvironmentId(NamedTuple):
  """A parsed id: ``dmc:cartpole-swingup@repeat=8`` -> ("dmc", "cartpole-swingup", 8,
  its `PREFIXES` row, ()); ``gym:CartPole-v1?length=0.8`` -> ("gym", "CartPole-v1", 1,
  row, (("length", 0.8),))."""
  prefix: str
  name: str
  repeat: int
  entry: EnvironmentPrefix
  arguments: arguments_lib.Arguments = ()


def _make_gym(name: str, seed: int = 0, arguments: arguments_lib.Arguments = (),
              **kwargs: Any) -> dm_env.Environment:
  """``gym:<id>``: `gymnasium.make` (or a `PARTIALLY_OBSERVED` variant) behind
  `GymnasiumToDmEnv`; `arguments` set on the unwrapped env (`_set_gym_arguments`)."""
  import gymnasium
  base, keep = PARTIALLY_OBSERVED.get(name, (name, None))
  try:
    env = gymnasium.make(base, **kwargs)
  except gymnasium.error.Error as e:
    raise UnknownEnvironmentError(
        f"unknown Gymnasium environment {name!r} in 'gym:{name}': {e}") from None
  if arguments:
    try:
      _set_gym_arguments(env.unwrapped, name, arguments)
    except UnknownEnvironmentError:
      env.close()
      raise
  if keep is not None:
    env = _KeepObservationEntries(env, keep)
  try:
    return GymnasiumToDmEnv(env, seed=seed)
  except UnsupportedSpaceError:
    env.close()
    raise


def gym_parameters(unwrapped, name: str) -> Dict[str, Any]:
  """The environment arguments of a Gymnasium env (``gym:<name>?arg=value``) with their
  values: the numeric attributes of its unwrapped instance less the derived constants
  (`arguments.DERIVED`). CartPole-v1: force_mag, gravity, length, masscart, masspole,
  tau, theta_threshold_radians, x_threshold (and the renderer's screen sizes)."""
  return arguments_lib.parameters(
      name, {k: v for k, v in vars(unwrapped).items() if not k.startswith("_")})


def _set_gym_arguments(unwrapped, name: str, arguments: arguments_lib.Arguments) -> None:
  """Sets `arguments` on `unwrapped` and recomputes its derived constants (CartPole's
  total_mass, polemass_length), as the env's constructor computes them."""
  defaults = gym_parameters(unwrapped, name)
  values = arguments_lib.resolve(f"gym:{name}", arguments, defaults)
  for key, value in values.items():
    setattr(unwrapped, key, value)
  for key, value in arguments_lib.derived(name, {**defaults, **values}).items():
    setattr(unwrapped, key, value)


def _make_dmc(name: str, seed: int = 0, **kwargs: Any) -> dm_env.Environment:
  """``dmc:<domain>-<task>``: `dm_control.suite.load`, flattened (`DmControlFlat`)."""
  from dm_control import suite
  if "-" not in name:
    raise UnknownEnvironmentError(
        f"dm_control id 'dmc:{name}' must be 'dmc:<domain>-<task>', e.g. dmc:cartpole-balance")
  domain, task = name.split("-", 1)
  if (domain, task) not in suite.ALL_TASKS:
    raise UnknownEnvironmentError(
        f"unknown dm_control task {domain}-{task}; known e.g. cartpole-balance, walker-stand, "
        "cheetah-run (see dm_control.suite.ALL_TASKS)")
  env = suite.load(domain, task, task_kwargs={"random": seed}, **kwargs)
  return DmControlFlat(env)


# The table: prefix (without the colon) -> how its ids are built, in the order the
# unknown-id error lists them.
PREFIXES: Dict[str, EnvironmentPrefix] = {
    "gym": EnvironmentPrefix(
        _make_gym, "'gym:<Gymnasium id>' (e.g. gym:CartPole-v1)",
        vector="actorq.components.envs.vector_env:gym_vector",
        no_vector="EnvPool 0.8.4 does not ship this task", takes_arguments=True),
    "dmc": EnvironmentPrefix(
        _make_dmc, "'dmc:<domain>-<task>' (e.g. dmc:cartpole-balance)",
        vector="actorq.components.envs.vector_env:dmc_vector",
        no_vector="EnvPool 0.8.4 does not ship this task"),
    "atari": EnvironmentPrefix(
        atari.make_atari, "'atari:<Game>' (e.g. atari:Pong)",
        no_vector="EnvPool's Atari preprocessing differs from actorq's atari: adapter"),
    "minatar": EnvironmentPrefix(
        minatar.make_minatar, "'minatar:<game>' (e.g. minatar:breakout)",
        no_vector="EnvPool does not ship MinAtar"),
    "gymnax": EnvironmentPrefix(
        gymnax_env.make_gymnax, "'gymnax:<gymnax id>' (e.g. gymnax:CartPole-v1)",
        no_vector="a gymnax task runs vectorised compiled: use --launch anakin",
        functional="actorq.components.envs.gymnax_env:functional", takes_arguments=True),
}


def register_prefix(prefix: str, entry: EnvironmentPrefix) -> None:
  """Adds ids ``<prefix>:<name>`` built by `entry` (`make_environment`, and
  `vector_env.make_vector_environment` when `entry.vector` gives a backend).

  Raises:
    ValueError: `prefix` is not a word of letters, digits and ``_`` starting with a letter,
      or is already registered.
  """
  if not isinstance(prefix, str) or not prefix.isidentifier():
    raise ValueError(f"an environment prefix must be a word of letters, digits and '_' "
                     f"(without the ':'), got {prefix!r}")
  if prefix in PREFIXES:
    raise ValueError(f"environment prefix {prefix!r} is already registered")
  if not isinstance(entry, EnvironmentPrefix):
    raise ValueError(f"an environment prefix's entry must be an EnvironmentPrefix, got "
                     f"{type(entry).__name__}")
  PREFIXES[prefix] = entry


def allowed_prefixes() -> Tuple[str, ...]:
  """The registered prefixes with their colon: ``("gym:", "dmc:", "atari:", ...)``."""
  return tuple(f"{p}:" for p in PREFIXES)


def _unknown_id(env_id: Any) -> UnknownEnvironmentError:
  usages = [entry.usage for entry in PREFIXES.values()]
  listed = usages[0] if len(usages) == 1 else f"{', '.join(usages[:-1])} or {usages[-1]}"
  return UnknownEnvironmentError(f"unknown environment id {env_id!r}: use {listed}")


def parse_id(env_id: Any) -> EnvironmentId:
  """The one parser of environment ids: prefix, name, action repeat, the table row and
  the environment arguments (``?name=value&...``).

  Raises:
    UnknownEnvironmentError: not a string with a registered prefix (the message lists
      each prefix's form), a suffix other than ``@repeat=K`` with K >= 2, arguments that
      are not ``name=number`` pairs, or arguments for a prefix that takes none.
  """
  if not isinstance(env_id, str) or not env_id.startswith(allowed_prefixes()):
    raise _unknown_id(env_id)
  base_id, repeat = split_action_repeat(env_id)
  prefix, name = base_id.split(":", 1)
  name, query = arguments_lib.split(name)
  parsed_arguments = arguments_lib.parse(query, env_id)
  entry = PREFIXES[prefix]
  if parsed_arguments and not entry.takes_arguments:
    takes = ", ".join(f"{p}:" for p, e in PREFIXES.items() if e.takes_arguments)
    raise UnknownEnvironmentError(
        f"environment id {env_id!r}: {prefix}: ids take no environment arguments (?...); "
        f"the prefixes that do: {takes}")
  return EnvironmentId(prefix, name, repeat, entry, parsed_arguments)


def make_environment(env_id: str, seed: int = 0, **kwargs: Any) -> dm_env.Environment:
  """Builds the environment named by `env_id` (see the module docstring).

  Args:
    env_id: ``gym:<id>``, ``dmc:<domain>-<task>``, ``atari:<Game>``, ``minatar:<game>``
      or another registered prefix's id (`PREFIXES`), each optionally with ``@repeat=K``
      (action repeat K), and ``?name=value&...`` arguments where the prefix takes them.
    seed: seeds the environment's first episode.
    **kwargs: passed to the prefix's factory (`gymnasium.make`, `dm_control.suite.load`,
      `atari.make_atari`, `minatar.make_minatar`).

  Raises:
    UnknownEnvironmentError: for an id with an unknown prefix or suffix or a name the
      backend does not know; the message lists what is allowed.
    UnsupportedSpaceError: (an `UnsupportedEnvironmentError`) for a Gymnasium env whose
      observation or action space cannot be mapped.
  """
  parsed = parse_id(env_id)
  if parsed.arguments:
    kwargs = {**kwargs, "arguments": parsed.arguments}
  env = parsed.entry.make(parsed.name, seed=seed, **kwargs)
  if parsed.repeat > 1:
    return ActionRepeat(env, num_repeats=parsed.repeat)
  return env


def environment_spec(env: dm_env.Environment) -> specs.EnvironmentSpec:
  """acme's `EnvironmentSpec` of an environment."""
  return specs.make_environment_spec(env)
