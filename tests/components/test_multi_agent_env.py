"""Multi-agent environments (`components/envs/multi_agent.py`): a scripted two-agent
PettingZoo parallel env with hand-computed rewards and ends (agents finishing at different
times, termination vs truncation per agent), the AEC path, the one-line refusals, and
mpe2's simple_spread (specs, seeding)."""
import sys
import threading
import types

import dm_env
import numpy as np
import pytest
from dm_env import specs as dm_specs

from actorq import core
from actorq.components.envs import environments
from actorq.components.envs import multi_agent
from actorq.testing import fakes

FIRST, MID, LAST = dm_env.StepType.FIRST, dm_env.StepType.MID, dm_env.StepType.LAST


def scripted(seed=0, b_actions=2):
  return multi_agent.ParallelEnvironment(Scripted(b_actions), seed=seed, name="scripted")


Scripted = fakes.ScriptedParallelEnv


def test_specs_are_per_agent():
  env = scripted()
  assert env.agents == ("a", "b") and env.num_agents == 2
  assert env.observation_spec() == {"a": dm_specs.Array((3,), np.float32, "observation"),
                                    "b": dm_specs.Array((3,), np.float32, "observation")}
  assert env.action_spec()["a"] == dm_specs.DiscreteArray(2, np.int32, name="action")
  assert env.reward_spec()["b"] == dm_specs.Array((), np.float32, "reward")
  assert env.discount_spec()["a"].maximum == 1.0


def test_agents_end_at_different_times_with_their_own_termination_or_truncation():
  env = scripted(seed=7)
  ts = env.reset()
  assert ts.first() and ts.agent_step_type == {"a": FIRST, "b": FIRST}
  np.testing.assert_array_equal(ts.observation["b"], [0, 1, 7])
  assert ts.reward == {"a": 0.0, "b": 0.0} and ts.discount == {"a": 1.0, "b": 1.0}
  ts = env.step({"a": 1, "b": 0})                      # t = 1
  assert ts.step_type == MID and ts.agent_step_type == {"a": MID, "b": MID}
  assert ts.reward == {"a": 2.0, "b": 10.0}
  assert all(isinstance(r, np.float32) for r in ts.reward.values())
  ts = env.step({"a": 0, "b": 1})                      # t = 2: "a" terminates
  assert ts.step_type == MID and ts.agent_step_type == {"a": LAST, "b": MID}
  assert ts.reward == {"a": 1.0, "b": 21.0} and ts.discount == {"a": 0.0, "b": 1.0}
  np.testing.assert_array_equal(ts.observation["a"], [2, 0, 7])
  with pytest.raises(multi_agent.InvalidActionError,
                     match=r"agents alive \(b\); missing \[\], not alive \['a'\]"):
    env.step({"a": 0, "b": 0})
  with pytest.raises(multi_agent.InvalidActionError, match="missing \\['b'\\]"):
    env.step({})
  ts = env.step({"b": 0})                              # t = 3: "b" truncated
  assert ts.last() and list(ts.observation) == ["b"]
  assert ts.agent_step_type == {"b": LAST}
  assert ts.reward == {"b": 30.0} and ts.discount == {"b": 1.0}   # truncation: bootstrap
  ts = env.step({"whatever": 3})                       # after LAST: a reset
  assert ts.first() and ts.agent_step_type == {"a": FIRST, "b": FIRST}
  np.testing.assert_array_equal(ts.observation["a"], [0, 0, 7])   # seed kept: same stream
  np.testing.assert_array_equal(env.state(), [0, 2])


def test_an_action_outside_its_agents_spec_is_refused():
  env = scripted()
  env.reset()
  with pytest.raises(multi_agent.InvalidActionError, match="outside the action spec"):
    env.step({"a": 2, "b": 0})


def test_aec_environments_go_through_pettingzoos_conversion(monkeypatch):
  from pettingzoo.utils.conversions import parallel_to_aec
  package = types.ModuleType("scripted_pkg")
  package.__path__ = []
  module = types.ModuleType("scripted_pkg.scripted_v0")
  module.env = lambda: parallel_to_aec(Scripted())    # AEC only: no parallel_env
  monkeypatch.setitem(sys.modules, "scripted_pkg", package)
  monkeypatch.setitem(sys.modules, "scripted_pkg.scripted_v0", module)
  env = multi_agent.make_multi_agent_environment("pz:scripted_pkg/scripted_v0", seed=3)
  ts = env.reset()
  np.testing.assert_array_equal(ts.observation["a"], [0, 0, 3])
  ts = env.step({"a": 1, "b": 1})
  assert ts.reward == {"a": 2.0, "b": 11.0}
  ts = env.step({"a": 0, "b": 0})
  assert ts.agent_step_type == {"a": LAST, "b": MID} and ts.discount["a"] == 0.0


@pytest.mark.parametrize("env_id, message", [
    ("pz:mpe2", "PettingZoo id 'pz:mpe2' must be 'pz:<module>/<env>', e.g. "
                "pz:mpe2/simple_spread_v3"),
    ("pz:no_such_module_xyz/foo_v0", "'pz:no_such_module_xyz/foo_v0': no module "
                                     "'no_such_module_xyz'; PettingZoo ids are"),
    ("pz:mpe2/simple_nope_v9", "'pz:mpe2/simple_nope_v9': module 'mpe2' has no PettingZoo "
                               "environment 'simple_nope_v9'; it has: "),
    ("gym:CartPole-v1", "'gym:CartPole-v1' is not a multi-agent environment id: use "
                        "'pz:<module>/<env>' (e.g. pz:mpe2/simple_spread_v3)"),
    ("pz:mpe2/simple_spread_v3@repeat=2", "'@repeat=K' are not supported for multi-agent"),
])
def test_bad_ids_are_refused_in_one_line(env_id, message):
  with pytest.raises(core.UnknownEnvironmentError) as e:
    multi_agent.make_multi_agent_environment(env_id)
  assert message in str(e.value) and "\n" not in str(e.value)
  if "simple_nope" in env_id:
    assert "simple_spread_v3" in str(e.value)


def test_single_agent_ids_and_messages_are_unchanged():
  assert "pz" not in environments.PREFIXES
  with pytest.raises(core.UnknownEnvironmentError, match="use 'gym:<Gymnasium id>'"):
    environments.make_environment("pz:mpe2/simple_spread_v3")


def test_shared_specs_refuse_heterogeneous_agents():
  assert multi_agent.shared_specs(scripted())[1] == dm_specs.DiscreteArray(2, name="action")
  with pytest.raises(core.UnsupportedEnvironmentError) as e:
    multi_agent.shared_specs(scripted(b_actions=3))
  assert str(e.value).startswith("scripted: agents 'a' and 'b' have different action specs")
  assert "use independent parameters (share_parameters false)" in str(e.value)


def _rollout(env, steps, seed):
  rng = np.random.default_rng(seed)
  ts, out = env.reset(), []
  for _ in range(steps):
    out.append(np.concatenate([ts.observation[a] for a in env.agents if a in ts.observation]))
    ts = env.step({a: int(rng.integers(5)) for a in ts.observation
                   if ts.agent_step_type[a] != LAST})
  return np.stack(out), ts


def test_mpe2_simple_spread_specs_and_seeding():
  env = multi_agent.make_multi_agent_environment("pz:mpe2/simple_spread_v3", seed=0,
                                                 max_cycles=5)
  assert env.agents == ("agent_0", "agent_1", "agent_2")
  for agent in env.agents:
    assert env.observation_spec()[agent] == dm_specs.Array((18,), np.float32, "observation")
    assert env.action_spec()[agent] == dm_specs.DiscreteArray(5, np.int32, name="action")
  first, ts = _rollout(env, 5, seed=1)
  assert ts.last() and set(ts.agent_step_type.values()) == {LAST}
  assert set(ts.discount.values()) == {1.0}                  # max_cycles: truncation
  assert first.dtype == np.float32 and first.shape == (5, 54)
  again, _ = _rollout(multi_agent.make_multi_agent_environment(
      "pz:mpe2/simple_spread_v3", seed=0, max_cycles=5), 5, seed=1)
  np.testing.assert_array_equal(first, again)
  other, _ = _rollout(multi_agent.make_multi_agent_environment(
      "pz:mpe2/simple_spread_v3", seed=1, max_cycles=5), 5, seed=1)
  assert not np.array_equal(first[0], other[0])
  assert env.state().shape == (54,)
  env.close()


def test_mpe2_simple_adversary_is_refused_under_parameter_sharing():
  env = multi_agent.make_multi_agent_environment("pz:mpe2/simple_adversary_v3")
  with pytest.raises(core.UnsupportedEnvironmentError) as e:
    multi_agent.shared_specs(env)
  assert str(e.value).startswith("pz:mpe2/simple_adversary_v3: agents 'adversary_0' and "
                                 "'agent_0' have different observation specs")
  env.close()


class _RecordingLock:
  """Stands in for `multi_agent._LIFECYCLE_LOCK`: whether it is held, and how often taken."""

  def __init__(self):
    self.held, self.taken = False, 0

  def __enter__(self):
    self.held, self.taken = True, self.taken + 1

  def __exit__(self, *exc):
    self.held = False


def test_construction_render_and_close_each_hold_the_lifecycle_lock(monkeypatch):
  """MPE2's close() quits pygame for the whole process: it must not run while another
  thread constructs (or renders) an environment, so all three take the one lock."""
  lock = _RecordingLock()
  monkeypatch.setattr(multi_agent, "_LIFECYCLE_LOCK", lock)
  seen = []
  raw = Scripted(2)
  raw.close = lambda: seen.append(("close", lock.held))
  raw.render = lambda: seen.append(("render", lock.held)) or "frame"

  def construct(name, module, seed, kwargs):
    seen.append(("construct", lock.held))
    return multi_agent.ParallelEnvironment(raw, seed=seed, name=f"pz:{name}")

  monkeypatch.setattr(multi_agent, "_construct", construct)
  env = multi_agent.make_multi_agent_environment("pz:mpe2/simple_spread_v3", seed=3)
  assert env.render() == "frame"
  env.close()
  assert seen == [("construct", True), ("render", True), ("close", True)]
  assert (lock.taken, lock.held) == (3, False)


@pytest.mark.isolated  # before the lock covered close(), this aborted the process
def test_mpe2_environments_built_and_closed_in_threads_at_once():
  """Four threads each build, reset, step and close simple_spread 100 times at once, as
  the node threads of a `local_mt` program do: no thread fails, and every reset of seed
  i gives the observations a lone environment seeded i gives."""
  env_id, cycles = "pz:mpe2/simple_spread_v3", 100
  expected = {}
  for i in range(4):
    env = multi_agent.make_multi_agent_environment(env_id, seed=i)
    expected[i] = env.reset().observation
    env.close()
  done, errors = {i: 0 for i in range(4)}, []

  def cycle(i):
    try:
      for _ in range(cycles):
        env = multi_agent.make_multi_agent_environment(env_id, seed=i)
        observation = env.reset().observation
        for _ in range(3):
          env.step({a: 1 for a in env.agents})
        env.close()
        assert observation.keys() == expected[i].keys()
        for agent, value in observation.items():
          np.testing.assert_array_equal(value, expected[i][agent])
        done[i] += 1
    except Exception as e:  # pylint: disable=broad-except
      errors.append(f"thread {i}: {e!r}")

  threads = [threading.Thread(target=cycle, args=(i,)) for i in range(4)]
  for t in threads:
    t.start()
  for t in threads:
    t.join()
  assert errors == []
  assert done == {i: cycles for i in range(4)}
