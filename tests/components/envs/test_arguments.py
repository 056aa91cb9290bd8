"""Environment arguments in the id (`components.envs.arguments`, issue 55): parsed at the
registry seam, set on the task (derived constants recomputed), refused in one line naming
the allowed ones, and changing the dynamics."""
import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from actorq import core
from actorq.components.envs import arguments
from actorq.components.envs import environments
from actorq.components.envs import gymnax_env
from actorq.components.envs import vector_env
from actorq.launch import spec as spec_lib


def test_parse_id_splits_arguments_before_the_repeat_suffix():
  parsed = environments.parse_id("gym:CartPole-v1?length=0.8&masscart=1.2@repeat=2")
  assert (parsed.prefix, parsed.name, parsed.repeat) == ("gym", "CartPole-v1", 2)
  assert parsed.arguments == (("length", 0.8), ("masscart", 1.2))
  assert environments.parse_id("gym:CartPole-v1").arguments == ()


@pytest.mark.parametrize("env_id, words", [
    ("gym:CartPole-v1?length", "not name=number"),
    ("gym:CartPole-v1?length=long", "not name=number"),
    ("gym:CartPole-v1?length=1&length=2", "given twice"),
    ("dmc:cartpole-balance?length=1", "the prefixes that do: gym:, gymnax:"),
])
def test_malformed_arguments_are_one_line_errors(env_id, words):
  with pytest.raises(core.UnknownEnvironmentError, match=words) as e:
    environments.parse_id(env_id)
  assert "\n" not in str(e.value)


@pytest.mark.parametrize("env_id", ["gym:CartPole-v1?lenght=0.8",
                                    "gymnax:CartPole-v1?lenght=0.8"])
def test_unknown_argument_names_the_allowed_ones(env_id):
  with pytest.raises(core.UnknownEnvironmentError) as e:
    environments.make_environment(env_id)
  message = str(e.value)
  assert "unknown argument 'lenght'" in message and "\n" not in message
  for name in ("gravity", "length", "masscart", "masspole", "force_mag"):
    assert name in message
  assert "total_mass" not in message  # derived: recomputed, not set
  assert "screen_width" not in message  # the renderer's window, not the task


def test_integer_parameter_refuses_a_fraction():
  with pytest.raises(core.UnknownEnvironmentError, match="is an integer"):
    gymnax_env.functional("CartPole-v1", (("max_steps_in_episode", 1.5),))


def test_gym_cartpole_arguments_set_and_derived_recomputed():
  env = environments.make_environment("gym:CartPole-v1?length=0.8&masscart=1.2", seed=0)
  u = env._env.unwrapped  # pylint: disable=protected-access
  assert (u.length, u.masscart, u.masspole) == (0.8, 1.2, 0.1)
  assert u.total_mass == pytest.approx(1.3)
  assert u.polemass_length == pytest.approx(0.08)
  env.close()


def _gym_trajectory(env_id):
  env = environments.make_environment(env_id, seed=3)
  obs = [env.reset().observation]
  for _ in range(5):
    obs.append(env.step(np.int32(1)).observation)
  env.close()
  return np.stack(obs)


def test_gym_arguments_change_the_dynamics():
  default = _gym_trajectory("gym:CartPole-v1")
  again = _gym_trajectory("gym:CartPole-v1?length=0.5")  # the default, given
  longer = _gym_trajectory("gym:CartPole-v1?length=2.0")
  np.testing.assert_array_equal(default, again)
  np.testing.assert_array_equal(default[0], longer[0])  # the same start
  # A longer pole falls slower: smaller angular velocity after the same pushes.
  assert abs(longer[-1, 3]) < abs(default[-1, 3])


def test_gymnax_arguments_change_the_dynamics_and_bind_traces_them():
  key = jax.random.PRNGKey(0)
  default = np.asarray(_trajectory(gymnax_env.functional("CartPole-v1"), key))
  heavy = np.asarray(_trajectory(gymnax_env.functional("CartPole-v1", (("gravity", 20.0),)), key))
  np.testing.assert_array_equal(heavy[0], default[0])  # the same start
  assert np.abs(heavy[-1] - default[-1]).max() > 1e-3  # other physics, another state
  # The same variant with its physics traced inside a jitted function.
  physics = dict(gymnax_env.parameters("CartPole-v1"), gravity=20.0)
  physics.pop("max_steps_in_episode")
  traced = jax.jit(lambda p: _trajectory(gymnax_env.bind("CartPole-v1", p), key))(physics)
  np.testing.assert_allclose(np.asarray(traced), heavy, rtol=1e-6, atol=1e-6)


def _trajectory(env, key):
  """Observations of 5 steps of action 1 from `env`'s reset with `key`, stacked [6, obs]."""
  state, obs = env.reset(key)
  out = [obs]
  for i in range(5):
    state, obs, *_ = env.step(jax.random.fold_in(key, i), state, jnp.int32(1))
    out.append(obs)
  return jnp.stack(out)


def test_gymnax_dm_env_applies_the_id_arguments():
  env = environments.make_environment("gymnax:CartPole-v1?max_steps_in_episode=7", seed=0)
  ts = env.reset()
  steps = 0
  while not ts.last():
    ts = env.step(np.int32(steps % 2))
    steps += 1
  assert steps == 7 and ts.discount == 1.0  # a truncation at the id's time limit


def test_vector_backends_refuse_arguments():
  with pytest.raises(vector_env.NoVectorBackendError, match="environment arguments"):
    vector_env.check_num_envs("gym:CartPole-v1?length=0.8", 2)


def test_run_json_records_the_id_with_its_arguments(tmp_path):
  env_id = "gym:CartPole-v1?length=0.8&masscart=1.2"
  spec = spec_lib.RunSpec.resolve(agent="dqn", env=env_id, seed=0, logdir=str(tmp_path))
  spec.save(str(tmp_path))
  with open(os.path.join(tmp_path, "run.json"), encoding="utf-8") as f:
    assert json.load(f)["env"] == env_id


def test_arguments_parameters_leave_out_derived_and_non_numbers():
  got = arguments.parameters("CartPole-v1", {"length": 0.5, "total_mass": 1.1,
                                             "kinematics_integrator": "euler",
                                             "flag": True, "steps": 3,
                                             "screen_width": 600, "screen_dim": 500})
  assert got == {"length": 0.5, "steps": 3}


def test_a_renderer_attribute_is_not_an_argument():
  with pytest.raises(core.UnknownEnvironmentError, match="unknown argument 'screen_width'"):
    environments.make_environment("gym:MountainCar-v0?screen_width=10")


def test_actorq_train_refuses_an_unknown_argument_in_one_line_exit_2(capsys, tmp_path):
  from actorq.testing.cli import run_cli  # pylint: disable=g-import-not-at-top
  logdir = tmp_path / "run"
  code, _, err = run_cli(["train", "--env", "gym:CartPole-v1?lenght=0.8", "--logdir",
                          str(logdir)], capsys)
  assert code == 2 and "unknown argument 'lenght'; allowed: force_mag, gravity, length" in err
  assert err.strip().count("\n") == 0 and not logdir.exists()
