"""MinAtar games (Young and Tian 2019) as `dm_env.Environment`s: the `minatar:<game>` ids.

MinAtar ("MinAtar: An Atari-Inspired Testbed for Thorough and Reproducible Reinforcement
Learning Experiments", K. Young and T. Tian, arXiv 1903.03176; the `MinAtar` package, import
name `minatar`) plays five Atari-like games on a 10 x 10 grid. `make_minatar("breakout",
seed=0)` returns a `MinAtarEnvironment`:

  * observation: float32 [10, 10, C], each entry 0 or 1, one channel per kind of object
    (`GAMES`: C = 4 asterix, 4 breakout, 7 freeway, 10 seaquest, 6 space_invaders); the
    spec is named ``"minatar_cnn"``, which makes DQN build the paper's network
    (`actorq.quantization.network_spec.minatar_cnn`) instead of the Nature CNN, which needs
    at least 36 x 36 pixels;
  * actions: int32 in [0, 6): MinAtar's full set of 6 actions (no-op, left, up, right, down,
    fire), which the paper's agents use (`Environment.num_actions()`, examples/dqn.py);
    `minimal_action_set=True` gives the game's own subset instead (e.g. breakout's 3:
    no-op, left, right; `Environment.minimal_action_set()`);
  * rewards float32 (+1 per brick, alien, treasure...; seaquest's surfacing bonus more),
    discount float32 1, and 0 on the terminal step (the game's own termination; freeway
    ends on its 2,501st step, its time limit, also a termination in the package);
  * the paper's defaults: sticky actions with probability `sticky_action_prob` = 0.1 (the
    previous action is repeated instead of the chosen one) and difficulty ramping on. No
    step cap: the paper runs every episode to its end (`actorq.components.acting.loop`
    still caps any episode at its `max_episode_steps`, 27,000 by default).

Seeding: one `numpy.random.RandomState(seed)` drives the game's randomness and the sticky
actions (`minatar.Environment.seed`); the first `reset` after construction starts the seeded
sequence, and later episodes continue it, so a seeded rollout repeats exactly.
"""
from __future__ import annotations

import importlib
from typing import Dict

import dm_env
import numpy as np
from dm_env import specs as dm_specs

from actorq import core
from actorq.components.envs import gymnasium_adapter

# The network this environment declares (a key of `network_spec.IMAGE_NETWORKS`), as its
# observation spec's name: DQN builds the MinAtar network for it (`network_spec.image_network`).
NETWORK = "minatar_cnn"

# The games as the package spells them (its `minatar.environments.<game>` modules) -> the
# channels C of their observations [10, 10, C].
GAMES: Dict[str, int] = {
    "asterix": 4,
    "breakout": 4,
    "freeway": 7,
    "seaquest": 10,
    "space_invaders": 6,
}
NUM_ACTIONS = 6  # MinAtar's full action set: n, l, u, r, d, f
STICKY_ACTION_PROB = 0.1  # the paper's default (Young and Tian 2019)
PACKAGE = "MinAtar==1.0.15"


def _key(name: str) -> str:
  return name.lower().replace("_", "").replace("-", "")


# Every spelling accepted for a game: the package's (space_invaders), its Gymnasium ids'
# (SpaceInvaders, as in MinAtar/SpaceInvaders-v1) and ALE's (atari:SpaceInvaders), in any case.
_ALIASES = {_key(game): game for game in GAMES}


def game_name(name: str) -> str:
  """The package's name of a game: ``"SpaceInvaders"``, ``"space-invaders"`` ->
  ``"space_invaders"``.

  Raises:
    actorq.core.UnknownEnvironmentError: not a MinAtar game, listing the five.
  """
  game = _ALIASES.get(_key(name)) if isinstance(name, str) else None
  if game is None:
    raise core.UnknownEnvironmentError(
        f"unknown MinAtar game {name!r} in 'minatar:{name}': use one of "
        f"{', '.join(GAMES)} (e.g. minatar:breakout)")
  return game


class MinAtarEnvironment(dm_env.Environment):
  """A `minatar.Environment` behind the dm_env interface (see the module docstring).

  Args:
    game: the package's game name (`GAMES`).
    seed: seeds the game and its sticky actions.
    sticky_action_prob: probability in [0, 1] that the previous action is repeated.
    difficulty_ramping: the game gets harder as it goes (the paper's default).
    minimal_action_set: act with the game's own minimal subset of the 6 actions.
  """

  def __init__(self, game: str, seed: int = 0, sticky_action_prob: float = STICKY_ACTION_PROB,
               difficulty_ramping: bool = True, minimal_action_set: bool = False):
    try:
      minatar = importlib.import_module("minatar")
    except ImportError:
      raise core.UnsupportedEnvironmentError(
          f"'minatar:' ids need the MinAtar package: pip install {PACKAGE} (./dev setup "
          "installs it)") from None
    if not 0.0 <= float(sticky_action_prob) <= 1.0:
      raise ValueError(f"sticky_action_prob must be in [0, 1], got {sticky_action_prob}")
    self._game = game
    self._env = minatar.Environment(game, sticky_action_prob=float(sticky_action_prob),
                                    difficulty_ramping=bool(difficulty_ramping))
    self._env.seed(int(seed))
    self._actions = (tuple(int(a) for a in self._env.minimal_action_set())
                     if minimal_action_set else tuple(range(NUM_ACTIONS)))
    shape = tuple(int(s) for s in self._env.state_shape())
    self._observation_spec = dm_specs.Array(shape, np.float32, NETWORK)
    self._action_spec = dm_specs.DiscreteArray(len(self._actions), np.int32, name="action")
    self._needs_reset = True

  @property
  def game(self) -> str:
    return self._game

  @property
  def actions(self):
    """The MinAtar action (0..5: n, l, u, r, d, f) of each of this environment's actions."""
    return self._actions

  def _observation(self) -> np.ndarray:
    return np.asarray(self._env.state(), np.float32)

  def reset(self) -> dm_env.TimeStep:
    self._env.reset()
    self._needs_reset = False
    return dm_env.restart(self._observation())

  def step(self, action) -> dm_env.TimeStep:
    """Raises `gymnasium_adapter.InvalidActionError` (a ValueError) for an action that is
    not an integer scalar in [0, num_actions), before it reaches the game."""
    if self._needs_reset:
      return self.reset()
    index = gymnasium_adapter.action_index(action, len(self._actions))
    reward, terminal = self._env.act(self._actions[index])
    reward = np.float32(reward)
    if terminal:
      self._needs_reset = True
      return dm_env.termination(reward, self._observation())._replace(discount=np.float32(0.0))
    return dm_env.transition(reward, self._observation(), np.float32(1.0))

  def observation_spec(self):
    return self._observation_spec

  def action_spec(self):
    return self._action_spec

  def reward_spec(self):
    return dm_specs.Array((), np.float32, "reward")

  def discount_spec(self):
    return dm_specs.BoundedArray((), np.float32, 0.0, 1.0, "discount")

  def close(self):
    pass


def make_minatar(name: str, seed: int = 0, *, sticky_action_prob: float = STICKY_ACTION_PROB,
                 difficulty_ramping: bool = True,
                 minimal_action_set: bool = False) -> MinAtarEnvironment:
  """The MinAtar game `name` (the `minatar:<game>` id; see the module docstring).

  Args:
    name: a game of `GAMES` as the package spells it (``space_invaders``) or as its
      Gymnasium ids do (``SpaceInvaders``), in any case.
    seed: seeds the game and its sticky actions.
    sticky_action_prob, difficulty_ramping, minimal_action_set: see `MinAtarEnvironment`
      (the defaults are the paper's).

  Raises:
    actorq.core.UnknownEnvironmentError: an unknown game (one line listing the five).
    actorq.core.UnsupportedEnvironmentError: the MinAtar package is not installed.
  """
  return MinAtarEnvironment(game_name(name), seed=seed, sticky_action_prob=sticky_action_prob,
                            difficulty_ramping=difficulty_ramping,
                            minimal_action_set=minimal_action_set)
