"""Launch types are a table (`supervisors.SUPERVISORS`: name -> Supervisor class): the
built-in ones, the lists derived from it, and a launch type registered from outside the
package (one class plus one table entry) running a small DQN program to its step limit."""
import threading

import launchpad as lp
import psutil
import pytest
from absl import flags

from actorq.agents.dqn import builder as dqn_builder
from actorq.agents.dqn import config as dqn_config
from actorq.benchmarks import distributed_bench
from actorq.cli import main as cli
from actorq.cli import sweep as sweep_cmd
from actorq.cli import train as train_cmd
from actorq.launch import distributed
from actorq.launch import experiment
from actorq.launch import modes
from actorq.launch import spec as spec_lib
from actorq.launch import supervisors


@pytest.fixture
def table():
  """The table as it was before the test (a test's registrations do not leak)."""
  saved, unlisted = dict(supervisors.SUPERVISORS), set(supervisors._UNLISTED)
  yield supervisors.SUPERVISORS
  supervisors.SUPERVISORS.clear()
  supervisors.SUPERVISORS.update(saved)
  supervisors._UNLISTED.clear()
  supervisors._UNLISTED.update(unlisted)


# --- The worked example of docs/guides/add-a-launch-mode.md -----------------------------
class JournaledThreads:
  """Every node a thread of this process (Launchpad's ``test_mt``), and a journal of what
  the launcher asked: a launch type the package does not know."""
  in_process = True
  one_process_per_node = False
  summary = "node threads with a journal"
  journal = []  # (method, argument) in call order, over every instance

  def __init__(self, dp, launch_type, log_dir, echo):
    self.journal.append(("start", launch_type))
    flags.FLAGS.lp_termination_notice_secs = -1
    self._manager = lp.launch(dp.program, launch_type="test_mt", serialize_py_nodes=False)
    self._grace = dp.options.stop_grace_s
    self.abandoned = []

  def check(self):
    try:
      self._manager.check_for_thread_worker_exception()
    except BaseException as e:  # pylint: disable=broad-except
      return f"a node failed: {e}"
    return None

  def ready(self):
    self.journal.append(("ready", None))
    return True

  def stopped_externally(self):
    return self._manager.stop_event().is_set()

  def stop(self, detail):
    self.journal.append(("stop", detail))
    stopping = threading.Thread(target=self._manager.stop_and_wait, daemon=True)
    stopping.start()
    stopping.join(self._grace)

  def cpu_seconds(self):
    t = psutil.Process().cpu_times()
    return {"journaled": float(t.user + t.system)}

  @classmethod
  def describe_placement(cls, dp):
    return {"learner/0": " (journaled)"}, ["  journal: on"]
# -----------------------------------------------------------------------------------------


def test_train_help_lists_the_launch_types_as_before(capsys):
  with pytest.raises(SystemExit):
    cli.build_parser().parse_args(["train", "--help"])
  text = " ".join(capsys.readouterr().out.split())
  assert ("local: one process (default); anakin: one process, acting and learning compiled "
          "into one jitted program vmapped over seeds (JAX environments, e.g. "
          "gymnax:CartPole-v1); local_mt: a Launchpad program in threads; "
          "local_mp: a Launchpad program, one process per node; hosts: one process per "
          "node on the machines of --hosts") in text
  assert "actor nodes with --launch local_mt/local_mp/hosts (default: 2)" in text


def test_the_table_holds_the_built_in_launch_types():
  assert supervisors.SUPERVISORS == {"local_mt": supervisors.Threads,
                                     "local_mp": supervisors.Processes,
                                     "hosts": supervisors.Hosts,
                                     "test_mt": supervisors.Threads}
  assert supervisors.launch_types() == ("local_mt", "local_mp", "hosts")
  # Every list of launch types derives from the table, in today's order.
  assert train_cmd.launch_choices() == ("local", "anakin", "local_mt", "local_mp", "hosts")
  assert sweep_cmd.SWEEP_LAUNCHES == ("local", "anakin", "local_mt", "local_mp")
  # The launches of one process are the table's rows without actor nodes.
  assert spec_lib.SINGLE_PROCESS == tuple(n for n in modes.names()
                                          if not modes.mode_for(n).distributed)
  assert distributed_bench.LAUNCHES == ("local_mp", "local_mt")
  assert [supervisors.SUPERVISORS[t].in_process for t in ("local_mt", "local_mp", "hosts")] == [
      True, False, False]


def test_an_unknown_launch_type_is_one_line_naming_the_known_ones():
  with pytest.raises(ValueError) as e:
    supervisors.supervisor_for("local_xx")
  assert str(e.value) == ("launch_type must be one of ('local_mt', 'local_mp', 'hosts', "
                          "'test_mt'), got 'local_xx'")


def test_register_refuses_a_taken_or_malformed_name(table):
  for name in ("local_mp", "local", "test_mt"):
    with pytest.raises(ValueError, match=f"launch type '{name}' is already registered"):
      supervisors.register(name, JournaledThreads)
  for name in ("", "two words", None):
    with pytest.raises(ValueError, match="a launch type name must be a non-empty word"):
      supervisors.register(name, JournaledThreads)
  assert table == {"local_mt": supervisors.Threads, "local_mp": supervisors.Processes,
                   "hosts": supervisors.Hosts, "test_mt": supervisors.Threads}


def test_a_registered_launch_type_is_offered_by_train_and_named_in_its_errors(table, capsys):
  supervisors.register("journaled_mt", JournaledThreads)
  assert train_cmd.launch_choices() == ("local", "anakin", "local_mt", "local_mp", "hosts",
                                        "journaled_mt")
  parser = cli.build_parser()
  args = parser.parse_args(["train", "--launch", "journaled_mt"])
  assert args.launch == "journaled_mt"
  with pytest.raises(SystemExit):
    parser.parse_args(["train", "--help"])
  text = " ".join(capsys.readouterr().out.split())
  assert ("hosts: one process per node on the machines of --hosts; journaled_mt: node "
          "threads with a journal") in text
  assert "actor nodes with --launch local_mt/local_mp/hosts/journaled_mt" in text
  args = parser.parse_args(["train", "--num-actors", "3"])
  with pytest.raises(cli.UsageError) as e:
    spec_lib.RunSpec.from_args(args)  # the launch checks of a run's description
  assert str(e.value) == ("--num-actors needs --launch local_mt, local_mp, hosts or journaled_mt "
                          "(--launch local runs one actor)")
  # An unlisted one is launchable but not offered.
  supervisors.register("hidden_mt", JournaledThreads, listed=False)
  assert "hidden_mt" not in train_cmd.launch_choices()
  assert supervisors.supervisor_for("hidden_mt") is JournaledThreads


@pytest.mark.isolated  # Launchpad nodes as threads of the test process: run in a child
@pytest.mark.slow
def test_a_launch_type_registered_from_outside_runs_a_program(table, tmp_path):
  supervisors.register("journaled_mt", JournaledThreads)  # the one table entry
  config = dqn_config.DQNConfig(hidden_sizes=(32,), min_replay_size=100,
                                variable_update_period=5)
  dp = distributed.make_program(experiment.ExperimentConfig(
      dqn_builder.DQNBuilder(config), "gym:CartPole-v1", num_steps=400, logdir=str(tmp_path),
      eval_every=100_000, eval_episodes=1), num_actors=1)
  text = distributed.describe(dp, "journaled_mt")
  assert text.splitlines()[0] == ("program 'actorq' (journaled_mt, env gym:CartPole-v1, "
                                   "400 actor steps):")
  assert "    learner/0 (journaled): CourierNode: LearnerNode(DQNBuilder)" in text
  assert text.splitlines()[-1] == "  journal: on"
  assert "one process each" not in text

  JournaledThreads.journal.clear()
  cpu = []
  result = distributed.launch(dp, "journaled_mt", on_cpu=cpu.append)
  assert (result.exit_code, result.reason) == (0, "finished"), result.detail
  assert result.counts["actor_steps"] >= 400 and result.counts["learner_steps"] > 0
  assert result.counts["limit_reached"] == 1
  assert len(result.evaluations) == 1 and result.evaluations[0]["actor_steps"] >= 400
  # The launcher started it once, polled it, and stopped it once with the reason.
  journal = JournaledThreads.journal
  assert journal[0] == ("start", "journaled_mt")
  assert ("ready", None) in journal
  stops = [arg for what, arg in journal if what == "stop"]
  assert len(stops) == 1 and stops[0].startswith("finished: step limit 400 reached")
  assert journal[-1][0] == "stop"
  # Its CPU reading is the one the result carries.
  assert cpu and set(result.node_cpu_seconds) == {"journaled"}
  assert result.node_cpu_seconds["journaled"] > 0
