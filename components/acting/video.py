"""Videos of episodes: `FrameRecorder`, a loop hook holding the first episode's RGB frames,
and `write_video`, which writes them as a GIF or MP4 (what `actorq eval --video` records).
Rendering needs the environment's `rgb_array` frames (Gymnasium's classic-control envs need
pygame; dm_control renders offscreen through MuJoCo)."""
from __future__ import annotations

import os
from typing import List, Optional

import numpy as np

from actorq.components import atomic
from actorq.components.acting import loop as loop_lib

SUFFIXES = (".gif", ".mp4")
MAX_VIDEO_FRAMES = 5_000


class FrameRecorder(loop_lib.Hook):
  """Records the first episode's RGB frames (uint8 [H, W, 3]) until rendering fails (the
  reason goes to `error`) or `MAX_VIDEO_FRAMES` frames are held."""

  def __init__(self):
    self.frames: List[np.ndarray] = []
    self.error: Optional[str] = None

  def _grab(self, loop) -> None:
    if loop.episodes > 0 or self.error or len(self.frames) >= MAX_VIDEO_FRAMES:
      return
    try:
      frame = loop.environment.render()
    except Exception as e:  # no offscreen GL backend, no display, ...
      self.error = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
      return
    if frame is None:
      self.error = "the environment returned no frame (no rgb_array render mode)"
      return
    self.frames.append(np.asarray(frame, dtype=np.uint8))

  def on_episode_start(self, loop, timestep):
    self._grab(loop)

  def on_step(self, loop, action, timestep):
    self._grab(loop)


def write_video(path: str, frames: List[np.ndarray], fps: int) -> Optional[str]:
  """Writes `frames` (uint8 [H, W, 3]) to `path` whole (`atomic.atomic_write`): a GIF
  (Pillow) or an MP4 (imageio, with imageio-ffmpeg) at `fps` frames per second.

  Returns:
    None, or one line saying why no video was written (no frames, no MP4 writer).
  """
  if not frames:
    return "no frames were rendered"
  if path.lower().endswith(".gif"):
    from PIL import Image  # pylint: disable=g-import-not-at-top
    images = [Image.fromarray(f) for f in frames]
    with atomic.atomic_write(path, "wb") as f:
      images[0].save(f, format="GIF", save_all=True, append_images=images[1:],
                     duration=max(int(1000 / fps), 20), loop=0)
    return None
  try:
    import imageio  # pylint: disable=g-import-not-at-top
  except ImportError:
    return "writing .mp4 needs imageio (and imageio-ffmpeg), which is not installed; use a .gif path"
  partial = f"{path}.partial.mp4"  # (the ffmpeg writer needs a path with the suffix)
  try:
    imageio.mimsave(partial, frames, fps=fps)
    os.replace(partial, path)  # whole, as `atomic.atomic_write` does
  except Exception as e:  # e.g. no ffmpeg backend
    if os.path.exists(partial):
      os.remove(partial)
    return f"imageio could not write {path}: {e}"
  return None
