"""Atari preprocessing: frame skip 4, max-pool of the last two frames, 84x84 grayscale,
frame stack 4, sticky actions, truncation; checked against raw ALE frames."""
import numpy as np
import pytest
from PIL import Image

from actorq.components.envs import atari, environments


def _raw_pong(seed):
  gymnasium = atari._register()
  return gymnasium.make("ALE/Pong-v5", frameskip=1, obs_type="grayscale",
                        repeat_action_probability=0.0)


def _resize(frame):
  return np.asarray(Image.fromarray(frame).resize((84, 84), Image.BILINEAR), np.uint8)


def test_observations_match_hand_preprocessed_raw_frames():
  env = atari.make_atari("Pong", seed=5, sticky_actions=0.0, noop_max=0)
  spec = env.observation_spec()
  assert spec.shape == (84, 84, 4) and spec.dtype == np.uint8
  assert env.action_spec().num_values == 6
  raw = _raw_pong(5)
  frame, _ = raw.reset(seed=5)
  ts = env.reset()
  first = _resize(frame)
  for k in range(4):  # the reset frame repeated
    np.testing.assert_array_equal(ts.observation[..., k], first)
  ale = env._env.unwrapped.ale
  previous = ts.observation
  actions = [2, 2, 3, 0, 2, 3, 3, 1] * 5
  for i, action in enumerate(actions):
    frames, reward = [], 0.0
    for _ in range(4):
      f, r, *_ = raw.step(action)
      frames.append(f)
      reward += r
    ts = env.step(np.int32(action))
    assert ts.observation.dtype == np.uint8 and ts.observation.shape == (84, 84, 4)
    assert ale.getEpisodeFrameNumber() == 4 * (i + 1)  # frame skip 4
    expected = _resize(np.maximum(frames[-2], frames[-1]))  # max-pool, then 84x84
    np.testing.assert_array_equal(ts.observation[..., -1], expected)
    np.testing.assert_array_equal(ts.observation[..., :3], previous[..., 1:])  # stack shifts
    assert float(ts.reward) == reward
    previous = ts.observation
  assert len(np.unique(previous)) > 2  # real frames, not blank


def test_sticky_actions_noops_and_truncation():
  env = atari.make_atari("Pong", seed=0, max_episode_steps=30, noop_max=30)
  ale = env._env.unwrapped.ale
  assert ale.getFloat("repeat_action_probability") == pytest.approx(0.25)
  env.reset()
  noop_frames = ale.getEpisodeFrameNumber()
  assert 1 <= noop_frames <= 30
  steps = 0
  while True:
    ts = env.step(np.int32(0))
    steps += 1
    if ts.last():
      break
  # The limit is 30 agent steps (120 frames) after the no-op frames, which it does not
  # count (case B16: they used to be charged, ending episodes after 23..30 agent steps).
  assert steps == 30 and ale.getEpisodeFrameNumber() == noop_frames + 120
  assert float(ts.discount) == 1.0  # a time limit: bootstrap


def test_b16_a_limit_in_agent_steps_is_agent_steps_in_every_episode():
  """Case B16: a 50-step limit with the default noop_max=30 ended episodes after 44-48
  agent steps. Each of three episodes (each with its own random no-op count) has 50."""
  env = atari.make_atari("Pong", seed=1, max_episode_steps=50)
  ale = env._env.unwrapped.ale
  lengths, noops = [], []
  for _ in range(3):
    env.reset()
    noops.append(ale.getEpisodeFrameNumber())
    steps = 1
    while not env.step(np.int32(0)).last():
      steps += 1
    lengths.append(steps)
  assert lengths == [50, 50, 50] and all(1 <= n <= 30 for n in noops), noops


def test_environment_ids_and_errors():
  env = environments.make_environment("atari:Breakout", seed=0)
  assert env.observation_spec().shape == (84, 84, 4)
  assert env.action_spec().num_values == 4
  with pytest.raises(environments.UnknownEnvironmentError, match="unknown Atari game 'Pongg'.*Alien"):
    environments.make_environment("atari:Pongg")
  with pytest.raises(ValueError, match="sticky_actions must be in"):
    atari.make_atari("Pong", sticky_actions=1.5)
  assert "Pong" in atari.game_names() and "SpaceInvaders" in atari.game_names()
