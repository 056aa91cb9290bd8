"""Environment prefixes are a table (`environments.PREFIXES`: prefix -> factory and
vector backend): the built-in rows, the one parser, the unknown-id line, and a prefix
registered from outside the package (one factory plus one table entry) that a DQN agent
trains in, one environment and four at once."""
import dm_env
import numpy as np
import pytest
from dm_env import specs as dm_specs

from actorq.agents.dqn import builder as dqn_builder
from actorq.agents.dqn import config as dqn_config
from actorq.components.envs import environments
from actorq.components.envs import vector_env
from actorq.launch import experiment
from actorq.launch import local

UNKNOWN = ("unknown environment id 'CartPole-v1': use 'gym:<Gymnasium id>' (e.g. "
           "gym:CartPole-v1), 'dmc:<domain>-<task>' (e.g. dmc:cartpole-balance), "
           "'atari:<Game>' (e.g. atari:Pong), 'minatar:<game>' (e.g. minatar:breakout) or "
           "'gymnax:<gymnax id>' (e.g. gymnax:CartPole-v1)")


@pytest.fixture
def table():
  """The table as it was before the test (a test's registrations do not leak)."""
  saved = dict(environments.PREFIXES)
  yield environments.PREFIXES
  environments.PREFIXES.clear()
  environments.PREFIXES.update(saved)


# --- The worked example of docs/guides/add-an-environment-backend.md ----------------------
class Corridor(dm_env.Environment):
  """``corridor:<n>``: walk right along n cells; action 1 moves right (reward 1 at the
  end, discount 0), action 0 stays (reward 0). Observation: one-hot float32 [n]; episodes
  are truncated (discount 1) after 4n steps."""

  def __init__(self, n: int, seed: int = 0):
    self._n, self._pos, self._t = n, 0, 0
    del seed  # deterministic

  def _obs(self):
    return np.eye(self._n, dtype=np.float32)[self._pos]

  def reset(self):
    self._pos, self._t = 0, 0
    return dm_env.restart(self._obs())

  def step(self, action):
    self._t += 1
    self._pos = min(self._pos + int(action), self._n - 1)
    if self._pos == self._n - 1:
      return dm_env.termination(np.float32(1.0), self._obs())._replace(discount=np.float32(0))
    if self._t >= 4 * self._n:
      return dm_env.truncation(np.float32(0.0), self._obs(), np.float32(1))
    return dm_env.transition(np.float32(0.0), self._obs(), np.float32(1))

  def observation_spec(self):
    return dm_specs.Array((self._n,), np.float32, "observation")

  def action_spec(self):
    return dm_specs.DiscreteArray(2, np.int32, name="action")

  def reward_spec(self):
    return dm_specs.Array((), np.float32, "reward")

  def discount_spec(self):
    return dm_specs.BoundedArray((), np.float32, 0.0, 1.0, "discount")


def make_corridor(name, seed=0):
  if not name.isdigit() or int(name) < 2:
    raise environments.UnknownEnvironmentError(
        f"corridor id 'corridor:{name}' must be 'corridor:<n>' with n >= 2, e.g. corridor:5")
  return Corridor(int(name), seed)


class CorridorRows(vector_env.VectorEnvironment):
  """B corridors stepped in a loop (a vector backend: rows reset on the step after LAST)."""
  backend = "corridor-loop"

  def __init__(self, env_id, name, num_envs, single, seed, max_episode_steps):
    super().__init__(env_id, num_envs, environments.environment_spec(single))
    self._rows = [make_corridor(name, seed + i) for i in range(num_envs)]

  def _reset(self):
    return np.stack([row.reset().observation for row in self._rows])

  def _step(self, actions):
    steps = [row.reset() if last else row.step(a)
             for row, a, last in zip(self._rows, actions, self._last)]
    return (np.stack([ts.observation for ts in steps]),
            np.asarray([ts.reward or 0.0 for ts in steps], np.float32),
            np.asarray([1.0 if ts.discount is None else ts.discount for ts in steps],
                       np.float32),
            np.asarray([ts.last() for ts in steps]))


CORRIDOR = environments.EnvironmentPrefix(
    make_corridor, "'corridor:<n>' (e.g. corridor:5)", vector=lambda name: CorridorRows)
# ----------------------------------------------------------------------------------------


def test_the_table_holds_the_built_in_prefixes_in_order():
  assert list(environments.PREFIXES) == ["gym", "dmc", "atari", "minatar", "gymnax"]
  assert environments.allowed_prefixes() == ("gym:", "dmc:", "atari:", "minatar:", "gymnax:")
  assert environments.PREFIXES["atari"].vector is None
  assert environments.PREFIXES["minatar"].vector is None


def test_parse_id_is_the_one_parser():
  parsed = environments.parse_id("dmc:cartpole-swingup@repeat=8")
  assert parsed[:3] == ("dmc", "cartpole-swingup", 8)
  assert parsed.entry is environments.PREFIXES["dmc"]
  assert environments.parse_id("gym:CartPole-v1")[:3] == ("gym", "CartPole-v1", 1)
  for bad in ("CartPole-v1", None, "corridor:5"):
    with pytest.raises(environments.UnknownEnvironmentError) as e:
      environments.parse_id(bad)
    assert str(e.value) == UNKNOWN.replace("'CartPole-v1'", repr(bad))


def test_an_unknown_prefix_keeps_its_one_line_error():
  with pytest.raises(environments.UnknownEnvironmentError) as e:
    environments.make_environment("CartPole-v1")
  assert str(e.value) == UNKNOWN
  assert vector_env.vector_backend("CartPole-v1") is None
  with pytest.raises(vector_env.NoVectorBackendError, match="EnvPool 0.8.4 does not ship"):
    vector_env.check_num_envs("CartPole-v1", 2)


def test_register_prefix_refuses_a_taken_or_malformed_prefix(table):
  with pytest.raises(ValueError, match="environment prefix 'gym' is already registered"):
    environments.register_prefix("gym", CORRIDOR)
  for bad in ("corridor:", "", "two words", None):
    with pytest.raises(ValueError, match="an environment prefix must be a word"):
      environments.register_prefix(bad, CORRIDOR)
  with pytest.raises(ValueError, match="must be an EnvironmentPrefix, got function"):
    environments.register_prefix("corridor", make_corridor)
  assert list(table) == ["gym", "dmc", "atari", "minatar", "gymnax"]


def test_a_registered_prefix_builds_both_paths_and_is_listed(table):
  environments.register_prefix("corridor", CORRIDOR)  # the one table entry
  env = environments.make_environment("corridor:3")
  ts = env.reset()
  np.testing.assert_array_equal(ts.observation, [1, 0, 0])
  ts = env.step(1)
  ts = env.step(1)
  assert ts.last() and (ts.reward, ts.discount) == (1.0, 0.0)
  # Action repeat comes with the table: one agent step is two corridor steps.
  repeated = environments.make_environment("corridor:3@repeat=2")
  repeated.reset()
  ts = repeated.step(1)
  assert ts.last() and ts.reward == 1.0
  # The unknown-id line lists it; its own bad name is its own line.
  with pytest.raises(environments.UnknownEnvironmentError) as e:
    environments.make_environment("nope:1")
  assert str(e.value).endswith("'dmc:<domain>-<task>' (e.g. dmc:cartpole-balance), "
                               "'atari:<Game>' (e.g. atari:Pong), 'minatar:<game>' (e.g. "
                               "minatar:breakout), 'gymnax:<gymnax id>' (e.g. "
                               "gymnax:CartPole-v1) or 'corridor:<n>' (e.g. corridor:5)")
  with pytest.raises(environments.UnknownEnvironmentError, match="with n >= 2"):
    environments.make_environment("corridor:x")
  # Its vector backend: rows auto-reset on the step after LAST.
  assert vector_env.vector_backend("corridor:3") == "corridor-loop"
  assert vector_env.vector_backend("corridor:3@repeat=2") is None
  venv = vector_env.make_vector_environment("corridor:2", num_envs=2)
  first = venv.reset()
  np.testing.assert_array_equal(first.observation, [[1, 0], [1, 0]])
  step = venv.step(np.array([1, 0]))
  assert step.step_type.tolist() == [2, 1] and step.reward.tolist() == [1.0, 0.0]
  step = venv.step(np.array([1, 1]))
  assert step.step_type.tolist() == [0, 2]  # row 0 reset, row 1 reached the end


def test_a_prefix_without_a_vector_backend_says_so(table):
  environments.register_prefix("corridor", environments.EnvironmentPrefix(
      make_corridor, "'corridor:<n>' (e.g. corridor:5)"))
  assert vector_env.vector_backend("corridor:3") is None
  with pytest.raises(vector_env.NoVectorBackendError) as e:
    vector_env.check_num_envs("corridor:3", 2)
  assert str(e.value).startswith(
      "corridor:3 has no vector backend (no vector backend is registered for it); ")


@pytest.mark.slow
@pytest.mark.parametrize("num_envs", [1, 4])
def test_dqn_trains_in_a_registered_prefix(table, num_envs):
  environments.register_prefix("corridor", CORRIDOR)
  cfg = dqn_config.DQNConfig(min_replay_size=32, batch_size=16, hidden_sizes=(16,),
                             epsilon_decay_steps=100)
  result = local.run(experiment.ExperimentConfig(
      builder=dqn_builder.DQNBuilder(cfg), env_id="corridor:4", num_steps=240, seed=0,
      eval_every=240, eval_episodes=2, checkpoint_every=None, num_envs=num_envs))
  assert result.actor_steps == 240 and result.learner_steps > 0
  assert result.episodes >= 240 // 16  # each episode is at most 16 steps
  # An evaluation episode's return is 1 (reached the end) or 0 (truncated after 16 steps).
  assert result.evaluations and result.evaluations[-1]["episode_return"] in (0.0, 1.0)
