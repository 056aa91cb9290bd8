"""The agent table: built-in names, installed entry points (group actorq.agents) and
``--agent package.module:BuilderClass`` from the working directory; what cannot resolve
is one line, exit 2, nothing written."""
import os
import sys
import textwrap

import pytest

from actorq.agents.dqn import builder as dqn_builder
from actorq.agents.dqn import config as dqn_config
from actorq.launch import hosts
from actorq.agents import registry
from actorq.testing.cli import run_cli

CONFIGS = {"dqn": "DQNConfig", "d4pg": "D4PGConfig", "ddpg": "DDPGConfig", "td3": "TD3Config",
           "sac": "SACConfig", "ppo": "PPOConfig", "a2c": "A2CConfig",
           "impala": "IMPALAConfig", "r2d2": "R2D2Config", "ippo": "IPPOConfig",
           "mappo": "MAPPOConfig", "idqn": "IDQNConfig", "qdagger": "QDaggerConfig"}

# A module a user might write beside their run: good and bad targets.
USER_MODULE = textwrap.dedent('''
    import dataclasses
    from actorq.agents.dqn.builder import DQNBuilder

    class MyBuilder(DQNBuilder):
      pass

    def not_a_class():
      pass

    class NoConfig:
      def make_networks(self, spec):
        pass

    class BadConfig(DQNBuilder):
      config_class = dict
''')


@pytest.fixture
def user_dir(tmp_path, monkeypatch):
  """A working directory outside the repository holding `useragent_<n>.py` (a fresh name
  per test: sys.modules keeps imported modules), sys.path and the registry's import
  paths restored afterwards."""
  monkeypatch.setattr(sys, "path", list(sys.path))
  monkeypatch.setattr(registry, "_IMPORT_PATHS", [])
  name = f"useragent_{os.path.basename(tmp_path)}".replace("-", "_")
  (tmp_path / f"{name}.py").write_text(USER_MODULE)
  (tmp_path / "brokenagent_dep.py").write_text("import no_such_dependency_xyz\n")
  monkeypatch.chdir(tmp_path)
  yield tmp_path, name
  for mod in (name, "brokenagent_dep"):
    sys.modules.pop(mod, None)


def test_built_in_agents_resolve_through_their_builders_config_class():
  assert registry.names() == sorted(CONFIGS)
  for name, config_name in CONFIGS.items():
    config_cls, builder_cls = registry.get(name)
    assert config_cls.__name__ == config_name and builder_cls.config_class is config_cls
  assert registry.get("dqn") == (dqn_config.DQNConfig, dqn_builder.DQNBuilder)


def test_module_builder_from_the_working_directory(user_dir):
  path, name = user_dir
  config_cls, builder_cls = registry.get(f"{name}:MyBuilder")
  assert config_cls is dqn_config.DQNConfig and builder_cls.__name__ == "MyBuilder"
  assert builder_cls.__module__ == name and str(path) in sys.path
  assert registry.import_paths() == (str(path),)


def test_node_processes_get_the_import_path(user_dir, monkeypatch):
  """local_mp nodes (this machine's PYTHONPATH after it) and hosts nodes (the launcher
  writes the directory alone; each host runner puts it before its own PYTHONPATH)."""
  path, name = user_dir
  assert registry.node_env({"PYTHONPATH": "/x"}) == {}  # nothing imported from a directory
  registry.get(f"{name}:MyBuilder")
  assert registry.node_env({"PYTHONPATH": f"/x{os.pathsep}/y"}) == {
      "PYTHONPATH": f"{path}{os.pathsep}/x{os.pathsep}/y"}
  header_env = registry.node_env(environ={})
  assert header_env == {"PYTHONPATH": str(path)}
  task = {"title": "actor/0", "env": header_env}
  assert hosts.node_environment(task, {"PYTHONPATH": "/site"})["PYTHONPATH"] == (
      f"{path}{os.pathsep}/site")
  assert hosts.node_environment(task, {})["PYTHONPATH"] == str(path)


@pytest.mark.parametrize("target,fragment", [
    ("nope", "unknown agent 'nope'; allowed: a2c, d4pg, ddpg, dqn, idqn, impala, ippo, mappo, "
             "ppo, qdagger, r2d2, sac, td3, or a builder class as package.module:BuilderClass"),
    ("no_such_module_xyz:Builder", "agent 'no_such_module_xyz:Builder': no module named "
                                   "'no_such_module_xyz' (looked up from {path} and sys.path); "
                                   "allowed: a2c, "),
    ("no_such_pkg_xyz.sub:Builder", "no module named 'no_such_pkg_xyz' (looked up from {path}"),
    ("brokenagent_dep:Builder", "agent 'brokenagent_dep:Builder': importing 'brokenagent_dep' "
                                "failed: No module named 'no_such_dependency_xyz'"),
    ("{name}:Nope", "agent '{name}:Nope': module '{name}' ({path}/{name}.py) has no attribute "
                    "'Nope'; allowed: builder classes there: BadConfig, DQNBuilder, MyBuilder"),
    ("{name}:not_a_class", "agent '{name}:not_a_class': {name}.not_a_class is a function, not "
                           "a builder class; allowed: a class with the builder methods of "
                           "actorq.core.Builder and a config_class attribute"),
    ("{name}:NoConfig", "{name}.NoConfig is a class without config_class, make_policy, "),
    ("{name}:BadConfig", "{name}.BadConfig.config_class is <class 'dict'>, not a dataclass; "
                         "allowed: the agent's config dataclass"),
    ("{name}:", "agent '{name}:' is not package.module:BuilderClass; allowed: a2c, "),
    ("a-b:C", "agent 'a-b:C' is not package.module:BuilderClass"),
])
def test_an_agent_that_does_not_resolve_is_one_line_exit_2(target, fragment, user_dir, capsys):
  path, name = user_dir
  target, fragment = (s.format(name=name, path=path) for s in (target, fragment))
  code, out, err = run_cli(["train", "--agent", target, "--logdir", "run", "--steps", "10"],
                           capsys)
  assert code == 2, (out, err)
  assert fragment in err, err
  assert err.strip().count("\n") == 0 and "Traceback" not in err
  assert not (path / "run").exists()


def test_a_run_json_naming_an_agent_that_is_gone_is_one_line(user_dir, capsys):
  """eval/quantize/export rebuild the run's agent from run.json before reading its
  checkpoint (which may hold the agent's classes)."""
  path, _ = user_dir
  (path / "old").mkdir()
  (path / "old" / "run.json").write_text(
      '{"agent": "moved_away_xyz:Builder", "env": "gym:CartPole-v1", "seed": 0, "config": {}}')
  for argv in (["eval", "--checkpoint", "old"], ["quantize", "--checkpoint", "old"],
               ["export", "--checkpoint", "old"]):
    code, _, err = run_cli(argv, capsys)
    assert code == 2 and err.startswith("actorq: error: run.json: agent 'moved_away_xyz:Builder'"
                                        ": no module named 'moved_away_xyz'"), (argv, err)
    assert err.strip().count("\n") == 0


def _install(site, entries):
  """A distribution in `site` whose entry points in group actorq.agents are `entries`."""
  dist = site / "fake_actorq_agents-1.0.dist-info"
  dist.mkdir(parents=True)
  (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: fake-actorq-agents\n"
                                 "Version: 1.0\n")
  (dist / "entry_points.txt").write_text(
      "[actorq.agents]\n" + "".join(f"{k} = {v}\n" for k, v in entries.items()))


def test_installed_agents_by_entry_point(tmp_path, monkeypatch, capsys):
  site = tmp_path / "site"
  _install(site, {"my_dqn": "fake_installed_agent:MyBuilder",
                  "gone": "fake_missing_agent_xyz:Builder",
                  "dqn": "fake_installed_agent:MyBuilder"})
  (site / "fake_installed_agent.py").write_text(USER_MODULE)
  monkeypatch.syspath_prepend(str(site))
  monkeypatch.setattr(registry, "_IMPORT_PATHS", [])
  try:
    assert registry.names() == sorted(set(CONFIGS) | {"my_dqn", "gone"})
    config_cls, builder_cls = registry.get("my_dqn")
    assert (config_cls, builder_cls.__module__) == (dqn_config.DQNConfig, "fake_installed_agent")
    assert registry.get("dqn")[1] is dqn_builder.DQNBuilder  # a built-in name stays built in
    assert registry.import_paths() == ()  # installed: importable in every node as it is
    code, out, _ = run_cli(["train", "--agent", "my_dqn", "--dry-run"], capsys)
    assert code == 0 and "launch local: one process" in out
    code, _, err = run_cli(["train", "--agent", "gone", "--logdir", str(tmp_path / "r")], capsys)
    assert code == 2 and ("agent 'gone' (entry point 'fake_missing_agent_xyz:Builder' in group "
                          "actorq.agents): no module named 'fake_missing_agent_xyz'; "
                          "allowed: a2c, d4pg, ddpg, dqn, gone, idqn, impala, ippo, mappo, "
                          "my_dqn,") in err, err
    assert not (tmp_path / "r").exists()
  finally:
    sys.modules.pop("fake_installed_agent", None)


def test_launched_node_commands_carry_the_import_path(user_dir):
  """After `--agent module:Builder`, every local_mp node command and every hosts task
  entry of the program header has the launcher's directory in PYTHONPATH."""
  from actorq.launch import distributed, experiment, supervisors  # pylint: disable=g-import-not-at-top
  path, name = user_dir
  config_cls, builder_cls = registry.get(f"{name}:MyBuilder")
  config = experiment.ExperimentConfig(builder_cls(config_cls(hidden_sizes=(8,))),
                                       "gym:CartPole-v1", num_steps=100)
  dp = distributed.make_program(config, num_actors=1, hosts=hosts.HostsConfig(("h0", "h1")))
  slots = supervisors._slots(dp)  # pylint: disable=protected-access
  for env in supervisors._hosts_node_envs(dp, slots):  # pylint: disable=protected-access
    assert env["PYTHONPATH"] == str(path)
  commands = supervisors._local_mp_commands(  # pylint: disable=protected-access
      distributed.make_program(config, num_actors=1).program)
  assert len(commands) == 6  # replay, counter, learner, actor, evaluator, limiter
  for command in commands:
    assert command.env["PYTHONPATH"].split(os.pathsep)[0] == str(path), command.title
