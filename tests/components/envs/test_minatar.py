"""`minatar:<game>` ids (Young and Tian 2019): specs per game, the paper's defaults (sticky
actions 0.1, difficulty ramping, the full 6 actions), steps equal to the package's own
`minatar.Environment` seeded alike, seeded rollouts that repeat, and bad ids refused in one
line (exit 2 at the CLI, nothing written)."""
import minatar as minatar_package
import numpy as np
import pytest

from actorq import core
from actorq.components.envs import environments, minatar
from actorq.components.envs.gymnasium_adapter import InvalidActionError
from actorq.testing.cli import run_cli

CHANNELS = {"asterix": 4, "breakout": 4, "freeway": 7, "seaquest": 10, "space_invaders": 6}
BAD = ("unknown MinAtar game 'pong' in 'minatar:pong': use one of asterix, breakout, freeway, "
       "seaquest, space_invaders (e.g. minatar:breakout)")


@pytest.mark.parametrize("game", sorted(CHANNELS))
def test_specs_per_game(game):
  env = environments.make_environment(f"minatar:{game}", seed=0)
  obs = env.observation_spec()
  assert (obs.shape, obs.dtype, obs.name) == ((10, 10, CHANNELS[game]), np.float32, "minatar_cnn")
  actions = env.action_spec()
  assert (actions.num_values, actions.dtype) == (6, np.int32)
  assert env.reward_spec().dtype == np.float32 and env.discount_spec().dtype == np.float32
  ts = env.reset()
  assert ts.first() and ts.observation.dtype == np.float32
  assert ts.observation.shape == (10, 10, CHANNELS[game])
  assert set(np.unique(ts.observation)) <= {0.0, 1.0} and ts.observation.sum() >= 1
  ts = env.step(np.int32(0))
  assert ts.reward.dtype == np.float32 and ts.discount.dtype == np.float32


def test_the_table_matches_the_package():
  assert minatar.GAMES == CHANNELS
  for game, channels in CHANNELS.items():
    assert minatar_package.Environment(game).state_shape() == [10, 10, channels]


@pytest.mark.parametrize("name", ["space_invaders", "SpaceInvaders", "space-invaders",
                                  "SPACE_INVADERS", "spaceinvaders"])
def test_the_package_and_gymnasium_spellings_are_accepted(name):
  assert environments.make_environment(f"minatar:{name}").game == "space_invaders"


def test_minimal_action_set_maps_to_the_games_own_actions():
  env = minatar.make_minatar("breakout", minimal_action_set=True)
  assert env.action_spec().num_values == 3 and env.actions == (0, 1, 3)  # n, l, r
  assert minatar.make_minatar("breakout").actions == (0, 1, 2, 3, 4, 5)


@pytest.mark.parametrize("game", ["breakout", "space_invaders", "seaquest"])
def test_steps_equal_the_package_with_the_papers_defaults(game):
  """The adapter's defaults are the paper's: the package's Environment with sticky actions
  0.1 and difficulty ramping, seeded alike, gives the same observations, rewards and ends."""
  env = minatar.make_minatar(game, seed=7)
  raw = minatar_package.Environment(game, sticky_action_prob=0.1, difficulty_ramping=True)
  raw.seed(7)
  rng = np.random.default_rng(0)
  ends = 0
  for _ in range(3):  # three episodes: later ones continue the seeded stream
    ts = env.reset()
    raw.reset()
    np.testing.assert_array_equal(ts.observation, raw.state().astype(np.float32))
    while True:
      action = int(rng.integers(6))
      ts = env.step(np.int32(action))
      reward, terminal = raw.act(action)
      np.testing.assert_array_equal(ts.observation, raw.state().astype(np.float32))
      assert ts.reward == np.float32(reward)
      assert ts.last() == terminal
      if terminal:
        assert ts.discount == 0.0
        ends += 1
        break
      assert ts.discount == 1.0
  assert ends == 3


def test_sticky_actions_repeat_the_previous_action_one_time_in_ten():
  env = minatar.make_minatar("breakout", seed=0)
  assert env._env.sticky_action_prob == 0.1
  off = minatar.make_minatar("breakout", seed=0, sticky_action_prob=0.0)
  assert off._env.sticky_action_prob == 0.0
  with pytest.raises(ValueError, match=r"sticky_action_prob must be in \[0, 1\], got 1.5"):
    minatar.make_minatar("breakout", sticky_action_prob=1.5)


def _rollout(env_id, seed, steps=400):
  env = environments.make_environment(env_id, seed=seed)
  rng = np.random.default_rng(123)
  ts = env.reset()
  observations, rewards, discounts = [ts.observation], [], []
  for _ in range(steps):
    ts = env.step(np.int32(rng.integers(6)))
    observations.append(ts.observation)
    if ts.first():
      continue
    rewards.append(float(ts.reward))
    discounts.append(float(ts.discount))
  return np.stack(observations), np.array(rewards), np.array(discounts)


@pytest.mark.parametrize("game", ["breakout", "asterix"])
def test_a_seeded_rollout_repeats(game):
  first = _rollout(f"minatar:{game}", seed=3)
  again = _rollout(f"minatar:{game}", seed=3)
  for a, b in zip(first, again):
    np.testing.assert_array_equal(a, b)
  assert (first[2] == 0.0).sum() >= 2  # several episodes ended inside the rollout
  other = _rollout(f"minatar:{game}", seed=4)
  assert not np.array_equal(first[0], other[0])


def test_freeway_ends_on_its_2501st_step():
  """Freeway's timer starts at 2,500 and the game ends when it drops below 0 (the package's
  `time_limit`; "after 2500 frames" in its README): the 2,501st step is the last."""
  env = minatar.make_minatar("freeway", seed=0)
  env.reset()
  for t in range(1, 2502):
    ts = env.step(np.int32(0))  # no-op: the chicken never moves, so only time ends it
    assert ts.last() == (t == 2501)
  assert ts.discount == 0.0 and ts.reward == 0.0


def test_an_action_outside_the_spec_is_refused():
  env = minatar.make_minatar("breakout", seed=0)
  env.reset()
  with pytest.raises(InvalidActionError, match=r"action 6 is outside the action spec "
                                               r"DiscreteArray\(6\): allowed 0..5"):
    env.step(np.int32(6))


@pytest.mark.parametrize("env_id", ["minatar:pong", "minatar:pong@repeat=2"])
def test_a_bad_game_is_one_line_listing_the_games(env_id):
  with pytest.raises(core.UnknownEnvironmentError) as e:
    environments.make_environment(env_id)
  assert str(e.value) == BAD


def test_a_bad_game_at_the_cli_is_exit_2_and_nothing_written(capsys, tmp_path):
  logdir = tmp_path / "run"
  code, _, err = run_cli(["train", "--env", "minatar:pong", "--logdir", str(logdir)], capsys)
  assert code == 2
  assert err == f"actorq: error: {BAD}\n"
  assert not logdir.exists()


def test_no_vector_backend_is_one_line():
  from actorq.components.envs import vector_env
  assert vector_env.vector_backend("minatar:breakout") is None
  with pytest.raises(vector_env.NoVectorBackendError) as e:
    vector_env.check_num_envs("minatar:breakout", 2)
  assert str(e.value).startswith("minatar:breakout has no vector backend (EnvPool does not "
                                 "ship MinAtar); ")
