"""Gymnasium spaces mapped once in the adapter (issue 18): cases B1, B3, B4, B7 and E2."""
import collections

import dm_env
import gymnasium
import jax
import numpy as np
import pytest
from acme.adders import base as adders_base
from dm_env import specs as dm_specs
from gymnasium import spaces

from actorq import core
from actorq.agents.dqn import networks as dqn_networks
from actorq.components.acting import actors
from actorq.components.envs import environments
from actorq.components.replay import reverb_replay as replay
from actorq.quantization import network_spec as ns
from actorq.quantization import payload


class _Recording(gymnasium.Env):
  """Any spaces; records every action it receives and whether it was inside the space.

  Observations are `observations[i]` in turn when given, else samples of the space.
  Episodes end after `episode_length` steps with the given (terminated, truncated), or
  never when `episode_length` is None.
  """

  def __init__(self, observation_space, action_space, episode_length=None,
               flags=(True, False), observations=None, reward=1.5):
    self.observation_space, self.action_space = observation_space, action_space
    self.observation_space.seed(0)
    self._length, self._flags, self._reward = episode_length, flags, reward
    self._observations = observations
    self.received, self.outside, self._t, self._n = [], 0, 0, 0

  def _obs(self):
    if self._observations is None:
      return self.observation_space.sample()
    self._n += 1
    return self._observations[(self._n - 1) % len(self._observations)]

  def reset(self, seed=None, options=None):
    self._t = 0
    return self._obs(), {}

  def step(self, action):
    self.received.append(action)
    self.outside += not self.action_space.contains(action)
    self._t += 1
    end = self._length is not None and self._t >= self._length
    return (self._obs(), self._reward, end and self._flags[0], end and self._flags[1], {})


class _RecordingAdder(adders_base.Adder):
  def __init__(self):
    self.firsts, self.actions = 0, []

  def add_first(self, timestep):
    self.firsts += 1

  def add(self, action, next_timestep, extras=()):
    self.actions.append(action)

  def reset(self):
    pass


class _RandomQ:
  """A policy runtime with random Q-values: [1, ...] -> float32 [1, A]."""
  version = 0

  def __init__(self, num_actions, seed=0):
    self._n, self._rng = num_actions, np.random.default_rng(seed)

  def __call__(self, obs):
    return self._rng.standard_normal((obs.shape[0], self._n)).astype(np.float32)


def _run(env, actor, steps):
  """`steps` actor steps, starting a new episode after each LAST."""
  ts = env.reset()
  actor.observe_first(ts)
  for _ in range(steps):
    action = actor.select_action(ts.observation)
    ts = env.step(action)
    actor.observe(action, ts)
    if ts.last():
      ts = env.reset()
      actor.observe_first(ts)


# ---------------------------------------------------------------------------------------
# B1: Discrete(3, start=-1).


def _b1_env():
  inner = _Recording(spaces.Box(-1.0, 1.0, (4,), np.float64), spaces.Discrete(3, start=-1),
                     episode_length=25)
  return inner, environments.GymnasiumToDmEnv(inner, seed=0)


def test_b1_training_steps_send_only_actions_inside_the_space():
  inner, env = _b1_env()
  spec = environments.environment_spec(env)
  assert spec.actions == dm_specs.DiscreteArray(3, dtype=np.int32, name="action")
  adder = _RecordingAdder()
  validating = replay.ValidatingAdder(adder, spec)
  selector = actors.epsilon_greedy(actors.linear_schedule(1.0, 0.05, 300))
  actor = actors.FeedForwardActor(_RandomQ(3), selector, adder=validating, seed=0)
  _run(env, actor, 300)
  received = [int(a) for a in inner.received]
  assert len(received) == 300 and inner.outside == 0
  assert set(received) == {-1, 0, 1}
  assert all(np.asarray(a).dtype == np.int64 for a in inner.received)  # the space's dtype
  # Replay holds the agent's indices 0..2: exactly the env's actions shifted by +1.
  assert [int(a) for a in adder.actions] == [a + 1 for a in received]
  assert validating.steps_seen == 300 + adder.firsts


def test_b1_greedy_path_sends_only_actions_inside_the_space():
  inner, env = _b1_env()
  actor = actors.FeedForwardActor(_RandomQ(3, seed=1), actors.greedy, seed=0)
  _run(env, actor, 300)
  assert len(inner.received) == 300 and inner.outside == 0
  assert {int(a) for a in inner.received} == {-1, 0, 1}


@pytest.mark.parametrize("action", [np.int32(3), np.int32(-1), np.float32(1.0), np.int32([0, 1])])
def test_discrete_action_outside_the_spec_is_refused_before_the_env(action):
  inner, env = _b1_env()
  env.reset()
  with pytest.raises(environments.InvalidActionError, match=r"DiscreteArray\(3\)"):
    env.step(action)
  assert inner.received == []


# ---------------------------------------------------------------------------------------
# Flattened discrete actions.


def _adapter(action_space, observation_space=None):
  inner = _Recording(observation_space or spaces.Box(-1.0, 1.0, (2,)), action_space)
  return inner, environments.GymnasiumToDmEnv(inner, seed=0)


def test_multidiscrete_round_trip_is_row_major_with_start():
  space = spaces.MultiDiscrete([3, 2, 4], start=[-1, 0, 5])
  inner, env = _adapter(space)
  assert env.action_spec().num_values == 24
  np.testing.assert_array_equal(env.env_action(np.int32(0)), [-1, 0, 5])
  np.testing.assert_array_equal(env.env_action(np.int32(1)), [-1, 0, 6])  # last fastest
  np.testing.assert_array_equal(env.env_action(np.int32(4)), [-1, 1, 5])
  np.testing.assert_array_equal(env.env_action(np.int32(23)), [1, 1, 8])
  vectors = [env.env_action(np.int32(i)) for i in range(24)]
  assert len({tuple(v) for v in vectors}) == 24
  assert all(space.contains(v) and v.dtype == space.dtype for v in vectors)
  assert [int(env.agent_action(v)) for v in vectors] == list(range(24))
  env.reset()
  env.step(np.int32(23))
  np.testing.assert_array_equal(inner.received[-1], [1, 1, 8])
  with pytest.raises(environments.InvalidActionError):
    env.agent_action(np.array([2, 0, 5]))  # 2 > start + nvec - 1 in the first component


def test_multidiscrete_2d_and_multibinary_round_trips():
  space = spaces.MultiDiscrete([[2, 3], [4, 5]])
  _, env = _adapter(space)
  assert env.action_spec().num_values == 120
  for i in range(120):
    v = env.env_action(np.int32(i))
    assert v.shape == (2, 2) and space.contains(v) and int(env.agent_action(v)) == i
  np.testing.assert_array_equal(env.env_action(np.int32(119)), [[1, 2], [3, 4]])

  space = spaces.MultiBinary(3)
  _, env = _adapter(space)
  assert env.action_spec().num_values == 8
  np.testing.assert_array_equal(env.env_action(np.int32(5)), [1, 0, 1])
  for i in range(8):
    v = env.env_action(np.int32(i))
    assert v.dtype == np.int8 and space.contains(v) and int(env.agent_action(v)) == i


def test_integer_and_bool_box_actions_are_flat_discrete():
  space = spaces.Box(-3, 4, (2,), np.int8)
  _, env = _adapter(space)
  assert env.action_spec().num_values == 64
  np.testing.assert_array_equal(env.env_action(np.int32(0)), [-3, -3])
  np.testing.assert_array_equal(env.env_action(np.int32(63)), [4, 4])
  assert all(space.contains(env.env_action(np.int32(i))) for i in range(64))
  space = spaces.Box(0, 1, (3,), bool)
  _, env = _adapter(space)
  assert env.action_spec().num_values == 8
  assert env.env_action(np.int32(6)).tolist() == [True, True, False]


def test_flat_action_limit_is_named():
  assert environments.MAX_FLAT_ACTIONS == 1024
  _, env = _adapter(spaces.MultiBinary(10))
  assert env.action_spec().num_values == 1024
  with pytest.raises(core.UnsupportedEnvironmentError,
                     match=r"^action space MultiBinary\(11\) flattens to 2048 discrete actions, "
                           r"more than the 1024 \(MAX_FLAT_ACTIONS\)"):
    _adapter(spaces.MultiBinary(11))


@pytest.mark.parametrize("space,name", [
    (spaces.Text(5), "Text"),
    (spaces.Dict({"a": spaces.Discrete(2)}), "Dict"),
    (spaces.Tuple([spaces.Discrete(2)]), "Tuple"),
    (spaces.Sequence(spaces.Discrete(2)), "Sequence"),
    (spaces.Graph(spaces.Box(0, 1, (2,)), None), "Graph"),
])
def test_unsupported_action_spaces_are_refused_in_one_line(space, name):
  with pytest.raises(core.UnsupportedEnvironmentError) as e:
    _adapter(space)
  message = str(e.value)
  assert message.startswith(f"action space {name}(") and "\n" not in message
  assert "supported: Discrete, MultiDiscrete, MultiBinary" in message


def test_box_actions_keep_infinite_bounds_and_ddpg_refuses_them():
  _, env = _adapter(spaces.Box(np.array([-np.inf, -2.0]), np.array([np.inf, 2.0]),
                               dtype=np.float64))
  spec = env.action_spec()
  assert spec.dtype == np.float32
  np.testing.assert_array_equal(spec.minimum, [-np.inf, -2.0])
  np.testing.assert_array_equal(spec.maximum, [np.inf, 2.0])
  env_spec = environments.environment_spec(env)
  from actorq.agents.ddpg import networks as ddpg_networks
  with pytest.raises(ValueError, match="action bounds must be finite"):
    ddpg_networks.make_networks(env_spec)


def test_box_action_at_a_rounded_bound_stays_inside_a_float64_space():
  space = spaces.Box(-0.1, 0.1, (2,), np.float64)
  inner, env = _adapter(space)
  spec = env.action_spec()
  assert float(spec.maximum[0]) > 0.1  # float32(0.1) rounds up
  env.reset()
  env.step(spec.maximum.copy())
  env.step(spec.minimum.copy())
  assert inner.outside == 0 and inner.received[0].dtype == np.float64
  np.testing.assert_array_equal(inner.received[0], [0.1, 0.1])
  with pytest.raises(environments.InvalidActionError, match="non-finite or outside"):
    env.step(np.float32([np.nan, 0.0]))
  with pytest.raises(environments.InvalidActionError, match="non-finite or outside"):
    env.step(np.float32([0.2, 0.0]))


# ---------------------------------------------------------------------------------------
# Observations.


def test_dict_and_tuple_observations_flatten_in_sorted_key_order():
  space = spaces.Dict(collections.OrderedDict([  # insertion order is not sorted order
      ("c", spaces.Tuple([spaces.MultiBinary(2), spaces.MultiDiscrete([5, 5])])),
      ("b", spaces.Discrete(3, start=1)),
      ("a", spaces.Box(0.0, 1.0, (2,), np.float64)),
  ]))
  obs = {"c": (np.int8([1, 0]), np.int64([3, 4])), "b": np.int64(2),
         "a": np.float64([0.25, 0.5])}
  inner = _Recording(space, spaces.Discrete(2), observations=[obs])
  env = environments.GymnasiumToDmEnv(inner)
  assert env.observation_spec() == dm_specs.Array((9,), np.float32, "observation")
  for ts in (env.reset(), env.step(np.int32(0))):
    assert ts.observation.dtype == np.float32
    np.testing.assert_array_equal(ts.observation, [0.25, 0.5, 0, 1, 0, 1, 0, 3, 4])


def test_discrete_observation_is_one_hot_and_box_dtypes_map():
  inner = _Recording(spaces.Discrete(4, start=-2), spaces.Discrete(2), observations=[-2, 1])
  env = environments.GymnasiumToDmEnv(inner)
  np.testing.assert_array_equal(env.reset().observation, [1, 0, 0, 0])
  np.testing.assert_array_equal(env.step(np.int32(0)).observation, [0, 0, 0, 1])
  cases = [(np.uint8, (5, 5, 3), np.uint8, (5, 5, 3)), (np.int32, (3,), np.float32, (3,)),
           (bool, (2, 2), np.float32, (2, 2)), (np.float16, (), np.float32, (1,))]
  for dtype, shape, want_dtype, want_shape in cases:
    low, high = (0, 1) if dtype is bool else (0, 9)
    env = environments.GymnasiumToDmEnv(
        _Recording(spaces.Box(low, high, shape, dtype), spaces.Discrete(2)))
    ts = env.reset()
    assert env.observation_spec().dtype == want_dtype and env.observation_spec().shape == want_shape
    assert ts.observation.dtype == want_dtype and ts.observation.shape == want_shape


def test_image_alone_in_a_dict_is_the_image_and_mixed_is_refused():
  image = spaces.Box(0, 255, (8, 8, 3), np.uint8)
  env = environments.GymnasiumToDmEnv(_Recording(spaces.Dict({"pixels": image}),
                                                 spaces.Discrete(2)))
  assert env.observation_spec() == dm_specs.Array((8, 8, 3), np.uint8, "observation")
  assert env.reset().observation.dtype == np.uint8
  mixed = spaces.Dict({"pixels": image, "state": spaces.Box(-1, 1, (3,))})
  with pytest.raises(core.UnsupportedEnvironmentError) as e:
    environments.GymnasiumToDmEnv(_Recording(mixed, spaces.Discrete(2)))
  assert str(e.value).startswith("observation space Dict(") and "\n" not in str(e.value)
  assert "mixes an image part (['pixels']: Box(0, 255, (8, 8, 3), uint8))" in str(e.value)


def test_unsupported_observation_part_is_named():
  space = spaces.Dict({"a": spaces.Box(-1, 1, (2,)), "t": spaces.Text(4)})
  with pytest.raises(core.UnsupportedEnvironmentError,
                     match=r"^observation space Dict\(.*\(part \['t'\]: Text\("):
    environments.GymnasiumToDmEnv(_Recording(space, spaces.Discrete(2)))


def test_observation_of_the_wrong_shape_is_named():
  inner = _Recording(spaces.Box(-1, 1, (3,)), spaces.Discrete(2),
                     observations=[np.zeros(4, np.float32)])
  env = environments.GymnasiumToDmEnv(inner)
  with pytest.raises(ValueError, match=r"observation of shape \(4,\).*has shape \(3,\)"):
    env.reset()


# ---------------------------------------------------------------------------------------
# E2 through the new mappings, and the step cap.


@pytest.mark.parametrize("terminated,truncated,step_type,discount", [
    (False, False, dm_env.StepType.MID, 1.0),
    (False, True, dm_env.StepType.LAST, 1.0),
    (True, False, dm_env.StepType.LAST, 0.0),
    (True, True, dm_env.StepType.LAST, 0.0),
])
def test_e2_table_with_dict_observations_and_shifted_actions(terminated, truncated, step_type,
                                                             discount):
  space = spaces.Dict({"x": spaces.Box(-1, 1, (2,), np.float64), "k": spaces.Discrete(2)})
  obs = {"x": np.float64([0.5, -0.5]), "k": 1}
  inner = _Recording(space, spaces.Discrete(3, start=-1), episode_length=1,
                     flags=(terminated, truncated), observations=[obs], reward=3)
  env = environments.GymnasiumToDmEnv(inner)
  first = env.reset()
  assert first.first() and first.observation.dtype == np.float32
  ts = env.step(np.int32(0))
  assert inner.received == [-1]
  assert ts.step_type == step_type
  assert ts.discount == discount and ts.discount.dtype == np.float32
  assert ts.reward == 3.0 and ts.reward.dtype == np.float32
  np.testing.assert_array_equal(ts.observation, [0.0, 1.0, 0.5, -0.5])  # 'k' one-hot, 'x'
  assert ts.observation.dtype == np.float32


def test_environment_errors_are_cores():
  assert environments.UnknownEnvironmentError is core.UnknownEnvironmentError
  assert environments.UnsupportedEnvironmentError is core.UnsupportedEnvironmentError
  assert dqn_networks.UnsupportedEnvironmentError is core.UnsupportedEnvironmentError


# ---------------------------------------------------------------------------------------
# B3: non-finite values rejected at the adder.

_SPEC = environments.environment_spec(_b1_env()[1])
_EXTRAS = {"logp": dm_specs.Array((), np.float32)}


def _ts(step_type=dm_env.StepType.MID, reward=1.0, observation=None):
  obs = np.zeros(4, np.float32) if observation is None else observation
  return dm_env.TimeStep(step_type, np.float32(reward), np.float32(1.0), obs)


def _adder_after(steps):
  inner = _RecordingAdder()
  adder = replay.ValidatingAdder(inner, _SPEC, _EXTRAS)
  adder.add_first(_ts(dm_env.StepType.FIRST, None))
  for _ in range(steps):
    adder.add(np.int32(1), _ts(), extras={"logp": np.float32(-1.0)})
  return inner, adder


def test_nan_reward_is_rejected_naming_the_column_value_and_steps():
  inner, adder = _adder_after(399)
  with pytest.raises(replay.NonFiniteValueError) as e:
    adder.add(np.int32(1), _ts(reward=np.nan), extras={"logp": np.float32(-1.0)})
  assert str(e.value).startswith(
      "column 'reward': non-finite value nan in the adder's timestep 401 (400 accepted before")
  assert (e.value.column, e.value.steps_seen) == ("reward", 400) and np.isnan(e.value.value)
  assert isinstance(e.value, ValueError) and len(inner.actions) == 399  # not passed on


def test_inf_observation_and_extras_are_rejected_naming_the_column():
  _, adder = _adder_after(2)
  obs = np.float32([0.0, 0.0, -np.inf, 0.0])
  with pytest.raises(replay.NonFiniteValueError,
                     match=r"^column 'observation': non-finite value -inf at index \(2,\)"):
    adder.add(np.int32(1), _ts(observation=obs), extras={"logp": np.float32(-1.0)})
  with pytest.raises(replay.NonFiniteValueError, match=r"^column 'extras/logp': .* nan "):
    adder.add(np.int32(1), _ts(), extras={"logp": np.float32(np.nan)})
  with pytest.raises(replay.NonFiniteValueError, match=r"^column 'observation'"):
    adder.add_first(_ts(dm_env.StepType.FIRST, None, obs))
  assert adder.steps_seen == 3


# ---------------------------------------------------------------------------------------
# B7: an observation too small for the Nature CNN.


def test_nature_cnn_smallest_input_is_36():
  layers = ns.nature_cnn((84, 84, 4), 6).layers
  assert ns.smallest_input_hw(layers) == (36, 36)
  assert ns.smallest_input_hw([ns.Conv2D("c", 8, 5, 2), ns.Conv2D("d", 8, 3, 1),
                               ns.Flatten(), ns.Dense("o", 2)]) == (9, 9)
  assert ns.smallest_input_hw([ns.Dense("o", 2)]) == (1, 1)
  with pytest.raises(ValueError) as e:
    ns.nature_cnn((15, 15, 3), 4)
  assert str(e.value) == ("observation shape (15, 15, 3) is too small for the Nature CNN: "
                          "the smallest input it accepts is (36, 36, C)")


@pytest.mark.parametrize("shape", [(36, 36, 1), (36, 40, 3)])
def test_smallest_shape_builds_and_runs(shape):
  spec = ns.nature_cnn(shape, 5)
  # An independent walk of the VALID convolutions (payload.expected_shapes) agrees.
  assert payload.expected_shapes(spec)["dense_0"]["w"] == (64, 512)
  env_spec = _image_spec(shape)
  nets = dqn_networks.make_networks(env_spec)
  params = nets.network.init(jax.random.PRNGKey(0), np.zeros((1,) + shape))
  q = nets.network.apply(params, np.zeros((2,) + shape, np.uint8))
  assert q.shape == (2, 4)


@pytest.mark.parametrize("shape", [(35, 36, 3), (36, 35, 3), (15, 15, 3)])
def test_one_pixel_smaller_is_refused_before_training(shape):
  with pytest.raises(core.UnsupportedEnvironmentError) as e:
    dqn_networks.make_networks(_image_spec(shape))
  assert str(e.value) == (f"observation shape {shape} is too small for the Nature CNN: "
                          "the smallest input it accepts is (36, 36, C)")
  with pytest.raises(ValueError, match=r"too small for this network: the smallest input it "
                                       r"accepts is \(36, 36, C\)"):
    ns.NetworkSpec(shape, ns.nature_cnn((36, 36, 3), 4).layers)


def _image_spec(shape):
  env = environments.GymnasiumToDmEnv(
      _Recording(spaces.Box(0, 255, shape, np.uint8), spaces.Discrete(4)))
  return environments.environment_spec(env)
