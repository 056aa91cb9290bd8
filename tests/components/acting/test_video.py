"""`components.acting.video`: the first episode's frames recorded by a loop hook and written
whole as a GIF."""
import os

import dm_env
import numpy as np

from actorq.components.acting import loop as loop_lib
from actorq.components.acting import video


class _Cam(dm_env.Environment):
  """Three-step episodes; render() returns a frame whose pixels are the step index."""

  def __init__(self, fail=False):
    self.t, self.fail = 0, fail

  def reset(self):
    self.t = 0
    return dm_env.restart(np.zeros(2, np.float32))

  def step(self, action):
    self.t += 1
    obs = np.zeros(2, np.float32)
    return dm_env.termination(1.0, obs) if self.t == 3 else dm_env.transition(1.0, obs)

  def render(self):
    if self.fail:
      raise RuntimeError("no OpenGL context\nsecond line")
    return np.full((8, 10, 3), 40 * self.t, np.uint8)

  def observation_spec(self):
    return None

  def action_spec(self):
    return None


class _Zero:
  def select_action(self, observation):
    return 0


def _episodes(env, episodes, recorder):
  finished = loop_lib.ActorLoop(env, _Zero(), learn=False, hooks=[recorder]).run(
      num_episodes=episodes)
  return [e.episode_return for e in finished], [e.episode_length for e in finished]


def test_video_records_the_first_episode_as_a_gif(tmp_path):
  recorder = video.FrameRecorder()
  returns, lengths = _episodes(_Cam(), 2, recorder)
  frames = recorder.frames
  assert returns == [3.0, 3.0] and lengths == [3, 3] and recorder.error is None
  assert [int(f[0, 0, 0]) for f in frames] == [0, 40, 80, 120]  # reset + 3 steps, episode 1 only
  path = str(tmp_path / "v.gif")
  assert video.write_video(path, frames, fps=10) is None
  from PIL import Image
  with Image.open(path) as gif:
    assert gif.n_frames == 4 and gif.size == (10, 8)
  assert os.listdir(tmp_path) == ["v.gif"]  # written whole: no temporary file left
  recorder = video.FrameRecorder()
  returns, _ = _episodes(_Cam(fail=True), 1, recorder)
  assert returns == [3.0] and recorder.frames == []
  assert recorder.error == "RuntimeError: no OpenGL context"
