"""`actorq train` on environments the adapter or the network refuses: one line, exit 2,
nothing written (cases B1 and B7 at the CLI)."""
import gymnasium
import numpy as np
import pytest
from gymnasium import spaces

from actorq.cli import main as cli


class _Env(gymnasium.Env):
  def __init__(self, observation_space, action_space):
    self.observation_space, self.action_space = observation_space, action_space

  def reset(self, seed=None, options=None):
    super().reset(seed=seed)
    return self.observation_space.sample(), {}

  def step(self, action):
    return self.observation_space.sample(), 0.0, False, False, {}


_ENVS = {
    "ActorqTiny-v0": (spaces.Box(0, 255, (15, 15, 3), np.uint8), spaces.Discrete(3)),
    "ActorqText-v0": (spaces.Box(-1, 1, (2,)), spaces.Text(4)),
    "ActorqGrid-v0": (spaces.Box(-1, 1, (2,)), spaces.MultiDiscrete([64, 64])),
}
for _id, (_obs, _act) in _ENVS.items():
  if _id not in gymnasium.registry:
    gymnasium.register(id=_id, entry_point=lambda o=_obs, a=_act, **_: _Env(o, a),
                       disable_env_checker=True)


@pytest.mark.parametrize("env_id,message", [
    ("ActorqTiny-v0", "observation shape (15, 15, 3) is too small for the Nature CNN: the "
                      "smallest input it accepts is (36, 36, C)"),
    ("ActorqText-v0", "action space Text(1, 4, charset="),
    ("ActorqGrid-v0", "action space MultiDiscrete([64 64]) flattens to 4096 discrete actions, "
                      "more than the 1024"),
])
def test_refused_environment_is_one_line_exit_2_nothing_written(env_id, message, capsys,
                                                                tmp_path):
  logdir = tmp_path / "run"
  try:
    code = cli.main(["train", "--env", f"gym:{env_id}", "--logdir", str(logdir)])
  except SystemExit as e:
    code = e.code
  err = capsys.readouterr().err
  assert code == 2, err
  assert message in err
  assert err.strip().count("\n") == 0 and "Traceback" not in err
  assert not logdir.exists()
