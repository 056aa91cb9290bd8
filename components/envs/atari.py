"""Atari 2600 games through Gymnasium/ALE with the standard DQN preprocessing.

`make_atari("Pong", seed=0)` (the `atari:Pong` id of `make_environment`) returns a
`dm_env.Environment` with uint8 observations `[84, 84, 4]` (the last 4 frames, oldest
first) and int32 actions (the game's minimal action set). Preprocessing, as in Mnih et
al. 2015 ("Methods: preprocessing") with Machado et al. 2018's sticky actions:

  * sticky actions: with probability `sticky_actions` (0.25) the emulator repeats the
    previous action on each frame (ALE's `repeat_action_probability`);
  * frame skip: each agent action is repeated on `frame_skip` (4) emulator frames and
    the rewards summed;
  * max-pool: the observation is the pixel-wise max of the last two of those frames
    (removes Atari sprite flicker);
  * 84x84 grayscale: ALE's luminance frame (210x160) resized with Pillow's
    antialiased bilinear filter;
  * frame stack: the last `frame_stack` (4) preprocessed frames, the reset frame
    repeated at the start of an episode;
  * no-op reset (optional): 1..`noop_max` (30) no-op frames after each reset;
  * episodes are truncated (discount 1) after `max_episode_steps` agent steps
    (27,000 = 108,000 frames, the usual 30 minutes of play), counted by the wrapper: the
    no-op frames of a reset are not charged to it (case B16; ALE's own frame limit,
    which counted them, is set beyond it).

Rewards are the game's, unclipped (clip them in the learner if wanted). ale-py 0.12
ships its ROMs; `gymnasium.register_envs(ale_py)` registers the `ALE/` ids.
"""
from __future__ import annotations

import collections
from typing import Optional

import numpy as np

from actorq import core
from actorq.components.envs import gymnasium_adapter

SCREEN_SIZE = 84


def _register():
  import ale_py
  import gymnasium
  gymnasium.register_envs(ale_py)
  return gymnasium


class AtariPreprocessing:
  """A Gymnasium env wrapper doing the preprocessing above (no OpenCV needed).

  Wraps an `ALE/<Game>-v5` env made with `frameskip=1, obs_type="grayscale"`.
  `observation_space`: Box(0, 255, [84, 84, frame_stack], uint8).
  """

  def __init__(self, env, frame_skip: int = 4, frame_stack: int = 4, noop_max: int = 30,
               screen_size: int = SCREEN_SIZE, seed: Optional[int] = None,
               max_episode_steps: Optional[int] = None):
    import gymnasium
    if frame_skip < 1 or frame_stack < 1 or noop_max < 0:
      raise ValueError(f"frame_skip and frame_stack must be >= 1 and noop_max >= 0, got "
                       f"{frame_skip}, {frame_stack}, {noop_max}")
    if max_episode_steps is not None and max_episode_steps < 1:
      raise ValueError(f"max_episode_steps must be >= 1, got {max_episode_steps}")
    self.env = env
    # Agent steps (each `frame_skip` frames) before an episode is truncated; None: none.
    self.max_episode_steps = max_episode_steps
    self._steps = 0
    self.frame_skip, self.frame_stack, self.noop_max = frame_skip, frame_stack, noop_max
    self.screen_size = screen_size
    self.observation_space = gymnasium.spaces.Box(
        0, 255, (screen_size, screen_size, frame_stack), np.uint8)
    self.action_space = env.action_space
    self._frames = collections.deque(maxlen=frame_stack)
    self._rng = np.random.default_rng(seed)

  @property
  def unwrapped(self):
    return self.env.unwrapped

  def _resize(self, frame: np.ndarray) -> np.ndarray:
    from PIL import Image
    image = Image.fromarray(frame).resize((self.screen_size, self.screen_size), Image.BILINEAR)
    return np.asarray(image, dtype=np.uint8)

  def _observation(self) -> np.ndarray:
    return np.stack(self._frames, axis=-1)

  def reset(self, *, seed: Optional[int] = None, options=None):
    if seed is not None:
      self._rng = np.random.default_rng(seed)
    frame, info = self.env.reset(seed=seed, options=options)
    noops = int(self._rng.integers(1, self.noop_max + 1)) if self.noop_max > 0 else 0
    for _ in range(noops):
      frame, _, terminated, truncated, info = self.env.step(0)
      if terminated or truncated:
        frame, info = self.env.reset()
    self._steps = 0  # the no-op frames above are not agent steps
    processed = self._resize(frame)
    for _ in range(self.frame_stack):
      self._frames.append(processed)
    return self._observation(), info

  def step(self, action):
    total = 0.0
    last_two = collections.deque(maxlen=2)
    terminated = truncated = False
    info = {}
    for _ in range(self.frame_skip):
      frame, reward, terminated, truncated, info = self.env.step(action)
      total += float(reward)
      last_two.append(frame)
      if terminated or truncated:
        break
    pooled = np.maximum(last_two[0], last_two[-1])
    self._frames.append(self._resize(pooled))
    self._steps += 1
    if self.max_episode_steps is not None and self._steps >= self.max_episode_steps:
      truncated = True
    return self._observation(), total, terminated, truncated, info

  def render(self):
    return self.env.render()

  def close(self):
    self.env.close()


def game_names():
  """Games ALE ships ROMs for, as `make_atari` names them (e.g. "Pong", "SpaceInvaders")."""
  from ale_py import roms
  return sorted("".join(part.capitalize() for part in rom.split("_"))
                for rom in roms.get_all_rom_ids())


def make_atari(name: str, seed: int = 0, *, frame_skip: int = 4, frame_stack: int = 4,
               sticky_actions: float = 0.25, noop_max: int = 30,
               max_episode_steps: int = 27_000, full_action_space: bool = False,
               render_mode: Optional[str] = None) -> gymnasium_adapter.GymnasiumToDmEnv:
  """The preprocessed game `name` (e.g. "Pong") as a dm_env (see the module docstring).

  Args:
    name: game name as in `ALE/<name>-v5`.
    seed: seeds ALE (and its sticky actions) and the no-op count.
    max_episode_steps: agent steps (each `frame_skip` frames) before truncation; a reset's
      no-op frames are not counted.
    render_mode: "rgb_array" to make `render()` return RGB frames [210, 160, 3].

  Raises:
    actorq.core.UnknownEnvironmentError: for a game ALE does not know (lists some).
  """
  gymnasium = _register()
  if not 0.0 <= sticky_actions <= 1.0:
    raise ValueError(f"sticky_actions must be in [0, 1], got {sticky_actions}")
  if max_episode_steps < 1:
    raise ValueError(f"max_episode_steps must be >= 1, got {max_episode_steps}")
  try:
    env = gymnasium.make(f"ALE/{name}-v5", frameskip=1, obs_type="grayscale",
                         repeat_action_probability=float(sticky_actions),
                         full_action_space=full_action_space,
                         # (never binding: the wrapper counts agent steps, the no-op
                         # frames of a reset not charged; ALE's count includes them)
                         max_num_frames_per_episode=int((max_episode_steps + 1) * frame_skip
                                                        + noop_max),
                         render_mode=render_mode)
  except gymnasium.error.Error as e:
    known = game_names()
    raise core.UnknownEnvironmentError(
        f"unknown Atari game {name!r} ({e}); e.g. {', '.join(known[:8])} "
        f"({len(known)} games, see actorq.components.envs.atari.game_names())") from None
  wrapped = AtariPreprocessing(env, frame_skip, frame_stack, noop_max, seed=seed,
                               max_episode_steps=max_episode_steps)
  return gymnasium_adapter.GymnasiumToDmEnv(wrapped, seed=seed)
