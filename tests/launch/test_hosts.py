"""`--launch hosts`: placement, host lists, the program file, the counter node's stop,
the command line's bad input, and, on two network namespaces standing in for two
hosts (root only), a training run, a dead actor host and SIGTERM to the launcher."""
import csv
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from actorq.agents.dqn import builder as dqn_builder
from actorq.agents.dqn import config as dqn_config
from actorq.cli import main as cli
from actorq.launch import distributed
from actorq.launch import distributed_nodes
from actorq.launch import elastic
from actorq.launch import experiment
from actorq.launch import hosts
from actorq.components import placement
from actorq.launch import supervisors
from actorq.testing import netns

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PYTHON = sys.executable


# ---------------------------------------------------------------------------------------
# Pure pieces.


@pytest.mark.parametrize("text,expected", [
    ("gpu01", ["gpu01"]),
    ("gpu01,cpu[01-03,07]", ["gpu01", "cpu01", "cpu02", "cpu03", "cpu07"]),
    ("r[1-2]n[1-2]", ["r1n1", "r1n2", "r2n1", "r2n2"]),
    ("a[8-10],b-c.x", ["a8", "a9", "a10", "b-c.x"]),
    ("node[098-101]", ["node098", "node099", "node100", "node101"]),
])
def test_slurm_node_lists_expand_in_order(text, expected):
  assert hosts.expand_nodelist(text) == expected


@pytest.mark.parametrize("text", ["a[1-2", "a]1", "a[3-1]", "a[x]", "a[1-2],,b", "a b"])
def test_bad_slurm_node_lists_are_errors(text):
  with pytest.raises(ValueError):
    hosts.expand_nodelist(text)


def test_slurm_hosts_reads_the_allocation():
  assert hosts.slurm_hosts({"SLURM_JOB_NODELIST": "n[1-3]"}) == ("n1", "n2", "n3")
  assert hosts.slurm_hosts({}) is None


def test_placement_keeps_replay_counter_learner_limiter_on_the_first_host():
  groups = {"replay": 1, "counter": 1, "learner": 1, "actor": 4, "evaluator": 1, "limiter": 1}
  three = hosts.place(groups, 3)
  assert [three[t] for t in ("replay/0", "counter/0", "learner/0", "limiter/0")] == [0] * 4
  assert [three[f"actor/{i}"] for i in range(4)] + [three["evaluator/0"]] == [1, 2, 1, 2, 1]
  assert set(hosts.place(groups, 1).values()) == {0}
  assert set(hosts.place(groups, 2).values()) == {0, 1}


def test_hosts_config_checks_names_ports_and_start():
  config = hosts.HostsConfig(("h1", "10.0.0.2"), 30000, "ip netns exec ns{index}", "/py")
  assert config.start_argv(1) == ["ip", "netns", "exec", "ns1"]
  assert hosts.HostsConfig(("h1",)).start_argv(0) == ["ssh", "-o", "BatchMode=yes", "h1"]
  assert hosts.HostsConfig(("h1",), start="print").start_argv(0) is None
  assert config.runner_argv(1, "-")[-4:] == ["--program", "-", "--host", "1"]
  for kwargs in ({"hosts": ()}, {"hosts": ("a b",)}, {"hosts": ("h;rm",)},
                 {"hosts": ("h",), "port_base": 80}, {"hosts": ("h",), "start": "mpirun"},
                 {"hosts": ("h",), "start": "ssh {user}@{host}"},
                 {"hosts": ("h",), "start": "ssh '{host}"}):
    with pytest.raises(ValueError):
      hosts.HostsConfig(**kwargs)


def test_hosts_file_skips_comments_and_names_a_bad_line(tmp_path):
  path = tmp_path / "hosts"
  path.write_text("# the learner's machine first\ngpu1\n\ncpu1  # actors\ncpu2\n")
  assert hosts.read_hosts_file(str(path)) == ("gpu1", "cpu1", "cpu2")
  path.write_text("gpu1\nbad host\n")
  with pytest.raises(ValueError, match=":2:"):
    hosts.read_hosts_file(str(path))
  path.write_text("# nothing\n")
  with pytest.raises(ValueError, match="names no host"):
    hosts.read_hosts_file(str(path))


def test_program_file_round_trip_and_a_foreign_file():
  data = hosts.encode_program({"tasks": [{"title": "a/0", "host": 1}]}, [len, max])
  assert hosts.decode_header(data)["tasks"] == [{"title": "a/0", "host": 1}]
  assert hosts.decode_functions(data) == [len, max]
  assert hosts.host_tasks(hosts.decode_header(data), 1) == [0]
  for foreign in (b"", b"\x80\x04junk", b'{"format": "other"}\n', b"[1]\n"):
    with pytest.raises(hosts.ProgramFileError):
      hosts.decode_header(foreign)
  with pytest.raises(hosts.ProgramFileError):
    hosts.decode_functions(data[:-5])


def test_counter_node_stop_heartbeats_and_silence():
  node = distributed_nodes.CounterNode(participants=["actor/0", "learner/0", "launcher"],
                                       silent_after_s=0.2, startup_timeout_s=60)
  assert node.heartbeat("actor/0") is None and node.heartbeat("launcher") is None
  node._check_participants()  # learner/0 has not polled yet: within its startup time
  assert node.heartbeat("actor/0") is None
  node.leave("launcher")
  assert node.active() == ["actor/0"]
  time.sleep(0.3)
  node.heartbeat("learner/0")
  node._check_participants()  # actor/0 fell silent; launcher left; learner/0 just polled
  reason = node.heartbeat("learner/0")
  assert reason.startswith("actor/0 silent for")
  assert node.stop_reason() == reason
  node.request_stop("a second reason")  # the first one is kept
  assert node.heartbeat("learner/0") == reason
  assert not node._all_told()  # actor/0 has not heard it
  never = distributed_nodes.CounterNode(participants=["actor/0"], startup_timeout_s=0.0)
  never._check_participants()
  assert "did not start within" in never.heartbeat("x")


def test_stop_poll_waits_for_the_port_then_gives_up():
  class Down:
    def heartbeat(self, title):
      raise ConnectionError(title)

  made, port = [], {"open": False}

  def connect():
    made.append(Down())
    return made[-1]

  poll = hosts.StopPoll(connect, "actor/0", silent_after_s=0.05,
                                    startup_timeout_s=10.0, reachable=lambda: port["open"])
  assert poll() is None and poll() is None and not poll.answered
  assert made == []  # no client (and no gRPC backoff) before the port listens
  port["open"] = True
  assert poll() is None and len(made) == 1
  poll = hosts.StopPoll(connect, "actor/0", silent_after_s=10.0,
                                    startup_timeout_s=0.05)
  time.sleep(0.1)
  assert "did not answer" in poll()
  assert hosts.port_open("127.0.0.1:1", timeout_s=0.5) is False


# ---------------------------------------------------------------------------------------
# The command line: one line, exit 2, nothing written.


@pytest.mark.parametrize("argv,message", [
    (["--launch", "hosts"], "needs --hosts"),
    (["--launch", "hosts", "--hosts", "slurm"], "SLURM_JOB_NODELIST is not set"),
    (["--launch", "hosts", "--hosts", "a,,b"], "comma-separated"),
    (["--launch", "hosts", "--hosts", "a,b", "--start", "mpirun"], "start must be"),
    (["--launch", "hosts", "--hosts", "a", "--host-timeout", "1"], "--host-timeout must be"),
    (["--launch", "hosts", "--hosts", "a", "--port-base", "65533"], "run past 65535"),
    (["--launch", "hosts", "--hosts-file", "/nonexistent/hosts"], "cannot read hosts file"),
    (["--launch", "local_mp", "--hosts", "a,b"], "--hosts needs --launch hosts"),
    (["--launch", "local_mp", "--port-base", "30000"], "--port-base needs --launch hosts"),
])
def test_bad_hosts_flags_exit_2_with_one_line(tmp_path, capsys, monkeypatch, argv, message):
  monkeypatch.delenv("SLURM_JOB_NODELIST", raising=False)
  monkeypatch.delenv("SLURM_NODELIST", raising=False)
  logdir = tmp_path / "run"
  assert cli.main(["train", "--logdir", str(logdir)] + argv) == 2
  err = capsys.readouterr().err.strip()
  assert len(err.splitlines()) == 1 and message in err, err
  assert not logdir.exists()


def test_bad_node_input_exits_2(tmp_path, capsys, monkeypatch):
  monkeypatch.delenv("SLURM_PROCID", raising=False)
  foreign = tmp_path / "x.pkl"
  foreign.write_bytes(b"not a program\n")
  program = tmp_path / "p.actorq"
  program.write_bytes(hosts.encode_program(
      {"hosts": ["a", "b"], "tasks": [{"title": "replay/0", "host": 0}]}, [len]))
  for argv, message in (([], "give --host I or --task N"),
                        (["--program", str(tmp_path / "missing"), "--host", "0"],
                         "No such file"),
                        (["--program", str(foreign), "--task", "0"], "not an actorq program file"),
                        (["--program", str(program), "--task", "1"], "tasks 0..0"),
                        (["--program", str(program), "--host", "2"], "hosts 0..1 (a, b)")):
    if "--program" not in argv:
      argv = argv + ["--program", str(program)]
    assert cli.main(["node"] + argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err, err
  assert cli.main(["node", "--program", str(program), "--host", "1"]) == 0  # nothing there
  assert "no node is placed on host 1" in capsys.readouterr().out


def test_node_environment_appends_xla_flags_and_names_the_runner():
  task = {"title": "actor/0", "env": {"XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false",
                                      "JAX_PLATFORMS": "cpu", "OMP_NUM_THREADS": "1"}}
  env = hosts.node_environment(task, {"XLA_FLAGS": "--xla_dump_to=/tmp/x"})
  assert env["XLA_FLAGS"] == "--xla_dump_to=/tmp/x --xla_cpu_multi_thread_eigen=false"
  assert env["JAX_PLATFORMS"] == "cpu" and env["OMP_NUM_THREADS"] == "1"
  assert env[hosts.PARENT_PID_ENV] == str(os.getpid())
  same = hosts.node_environment(task, {"XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false"})
  assert same["XLA_FLAGS"] == "--xla_cpu_multi_thread_eigen=false"  # not twice
  assert hosts.node_environment({"title": "x/0"}, {}) == {hosts.PARENT_PID_ENV: str(os.getpid())}


def test_hosts_program_gives_every_node_but_the_learner_the_cpu_and_one_thread(tmp_path):
  config = experiment.ExperimentConfig(
      dqn_builder.DQNBuilder(dqn_config.DQNConfig(hidden_sizes=(32,))), "gym:CartPole-v1",
      num_steps=100, logdir=str(tmp_path))
  dp = distributed.make_program(config, num_actors=3,
                                hosts=hosts.HostsConfig(("h0", "h1", "h2")))
  slots = supervisors._slots(dp)
  envs = dict(zip([s["title"] for s in slots], supervisors._hosts_node_envs(dp, slots)))
  for title, env in envs.items():
    if title == "learner/0":  # no actor on its host: every core of this (its) machine
      assert "JAX_PLATFORMS" not in env and "CUDA_VISIBLE_DEVICES" not in env
      assert env["TF_NUM_INTRAOP_THREADS"] == str(placement.learner_threads(0))
    else:
      assert env["JAX_PLATFORMS"] == "cpu" and env["CUDA_VISIBLE_DEVICES"] == "", title
      assert env["XLA_FLAGS"] == "--xla_cpu_multi_thread_eigen=false", title
      assert env["TF_NUM_INTRAOP_THREADS"] == env["OMP_NUM_THREADS"] == "1", title
  one_host = distributed.make_program(config, num_actors=2, hosts=hosts.HostsConfig(("h0",)))
  slots = supervisors._slots(one_host)
  learner = supervisors._hosts_node_envs(one_host, slots)[
      [s["title"] for s in slots].index("learner/0")]
  assert learner["TF_NUM_INTRAOP_THREADS"] == str(placement.learner_threads(2))


def test_dry_run_prints_placement_ports_and_start_commands(tmp_path, capsys):
  code = cli.main(["train", "--launch", "hosts", "--hosts", "gpu1,cpu1,cpu2", "--num-actors",
                   "3", "--port-base", "31000", "--steps", "1000", "--dry-run"])
  out = capsys.readouterr().out
  assert code == 0
  assert "replay/0 on gpu1:31000" in out and "learner/0 on gpu1:31002" in out
  assert "actor/0 on cpu1:31003" in out and "actor/1 on cpu2:31004" in out
  assert "evaluator/0 on cpu2:31006" in out and "limiter/0 on gpu1:" in out
  assert "ssh -o BatchMode=yes cpu2 " in out and "node --program - --host 2" in out


# ---------------------------------------------------------------------------------------
# Two namespaces, two "hosts": 10.231.0.1 (replay, counter, learner, limiter, the
# launcher) and 10.231.0.2 (actor, evaluator).


@pytest.fixture(scope="module")
def pair():
  reason = netns.unavailable()
  if reason is not None:
    pytest.skip(f"no network namespaces here: {reason}")
  made = netns.HostPair()
  try:
    yield made
  finally:
    made.close()
  names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
  assert not any(name in names for name in made.names)


@pytest.mark.slow  # a subprocess
def test_a_terminated_benchmark_removes_its_namespaces(pair):
  """SIGTERM to a process inside `with HostPair()` (a benchmark being stopped) leaves the
  `with`: both namespaces and the process it started in one of them are gone."""
  script = textwrap.dedent("""
      import subprocess, sys, time
      from actorq.testing import netns
      with netns.HostPair() as p:
        subprocess.Popen(p.exec_argv(1) + ["sleep", "300"])
        print(" ".join(p.names), flush=True)
        time.sleep(300)
      """)
  proc = subprocess.Popen([PYTHON, "-c", script], cwd=ROOT, stdout=subprocess.PIPE, text=True)
  names = proc.stdout.readline().split()
  assert len(names) == 2, names
  proc.send_signal(signal.SIGTERM)
  assert proc.wait(timeout=60) == 143
  listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
  assert not any(name in listed for name in names)


def _train_argv(pair, logdir, *extra):
  return pair.exec_argv(0) + [
      PYTHON, "-m", "actorq.cli.main", "train", "--launch", "hosts",
      "--hosts", ",".join(pair.addresses), "--num-actors", "1", "--set", "hidden_sizes=[32]",
      "--set", "min_replay_size=100", "--eval-episodes", "1", "--logdir", str(logdir),
      "--no-progress", *extra]


def _template(pair):
  return f"ip netns exec {pair.names[0][:-1]}{{index}}"


def _rows(path):
  with open(path, encoding="utf-8") as f:
    return list(csv.DictReader(f))


PARTICIPANTS = ("replay/0", "learner/0", "actor/0", "evaluator/0", "limiter/0", "launcher")


def _wait_for_all_nodes(logdir, proc, timeout_s=150):
  """Until every node of both hosts and the launcher poll the counter node (its log,
  written by the first host's runner, says when each joined)."""
  deadline = time.time() + timeout_s
  path = logdir / "logs" / "counter_0.log"
  while time.time() < deadline:
    text = path.read_text() if path.exists() else ""
    if all(f"actorq: {t} joined" in text for t in PARTICIPANTS):
      return
    assert proc.poll() is None, "the launcher ended before every node had started"
    time.sleep(0.5)
  raise AssertionError(f"the nodes did not all start within {timeout_s} s")


def _wait_for_learning(logdir, proc, timeout_s=150):
  """Until the learner has taken a step (its first `learner.csv` row): the program is
  training, not still building its networks (a node stopped while it still compiles
  cannot end before Launchpad's 10 s kill, which is not what these tests are about)."""
  deadline = time.time() + timeout_s
  path = logdir / "learner.csv"
  while time.time() < deadline:
    if path.exists() and len(_rows(path)) >= 1:
      return
    assert proc.poll() is None, "the launcher ended before the learner stepped"
    time.sleep(0.5)
  raise AssertionError(f"the learner took no step within {timeout_s} s")


def _cmdline(pid):
  with open(f"/proc/{pid}/cmdline", "rb") as f:
    return f.read().decode(errors="replace").split("\0")


def _environ(pid):
  with open(f"/proc/{pid}/environ", "rb") as f:
    items = f.read().decode(errors="replace").split("\0")
  return dict(item.split("=", 1) for item in items if "=" in item)


def _nothing_left(pair, timeout_s=10):
  deadline = time.time() + timeout_s
  while time.time() < deadline and (pair.pids(0) or pair.pids(1)):
    time.sleep(0.2)
  return pair.pids(0) + pair.pids(1) == []


@pytest.mark.slow  # two-host programs in namespaces
def test_dqn_trains_across_two_hosts(pair, tmp_path):
  before = pair.link_bytes(1)
  proc = subprocess.run(
      # 1500 steps take ~5 s on a fast CPU, less than the evaluator node's start-up: the
      # limiter waits for the evaluation at the limit all the same.
      _train_argv(pair, tmp_path, "--steps", "1500", "--eval-every", "1000", "--start",
                  _template(pair)), cwd=ROOT, capture_output=True, text=True, timeout=240)
  out = proc.stdout + proc.stderr
  assert proc.returncode == 0, out[-3000:]
  assert "actorq: finished" in out
  # The actor ran on 10.231.0.2 and acted with parameters the learner had updated.
  assert max(int(r["policy_version"]) for r in _rows(tmp_path / "actor_0.csv")) > 0
  # The last evaluation is the one at the limit, of a policy the learner had updated.
  evaluations = _rows(tmp_path / "eval.csv")
  assert evaluations and int(evaluations[-1]["actor_steps"]) >= 1500
  assert int(evaluations[-1]["policy_version"]) > 0
  # The launcher's log of each host runner holds its nodes' output.
  assert "[actor/0]" in (tmp_path / "logs" / "host_1.log").read_text()
  assert "[learner/0]" in (tmp_path / "logs" / "host_0.log").read_text()
  # Its transitions and the learner's parameters crossed the veth (Reverb inserts,
  # parameter pulls), both ways.
  after = pair.link_bytes(1)
  assert after["tx_bytes"] - before["tx_bytes"] > 200_000
  assert after["rx_bytes"] - before["rx_bytes"] > 200_000
  assert _nothing_left(pair)


@pytest.mark.slow  # two-host programs in namespaces
def test_a_dead_actor_host_stops_the_program_without_the_launcher(pair, tmp_path):
  # The launcher only prints the runners' commands; they are started here, so no
  # process on the first host learns of the death but through the counter node.
  launcher = subprocess.Popen(
      _train_argv(pair, tmp_path, "--steps", "10000000", "--start", "print",
                  "--host-timeout", "5"),
      cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
  runners = []
  try:
    program = tmp_path / hosts.PROGRAM_FILE
    deadline = time.time() + 120
    while not program.exists():
      assert time.time() < deadline and launcher.poll() is None, "no program file written"
      time.sleep(0.2)
    for index in (0, 1):  # each runner's own lines (which node ended how) in a file
      with open(tmp_path / f"runner_{index}.out", "w", encoding="utf-8") as out:
        runners.append(subprocess.Popen(
            pair.exec_argv(index) + [PYTHON, "-m", "actorq.cli.main", "node", "--program",
                                     str(program), "--host", str(index), "--no-echo"],
            cwd=ROOT, stdout=out, stderr=subprocess.STDOUT))
    _wait_for_all_nodes(tmp_path, launcher)
    _wait_for_learning(tmp_path, launcher)
    killed_at = time.time()
    pair.kill_all(1)  # the actor host dies: its runner, actor and evaluator
    code = launcher.wait(timeout=90)
    stopped_in = time.time() - killed_at
    out = launcher.stdout.read()
    assert code == 1, out[-3000:]
    # Noticed after 5 s of silence; every node on the first host then stops itself, and
    # the launcher waits for them at most its stop grace (20 s): 5 + 20 s, plus slack for
    # a loaded machine.
    assert "/0 silent for" in out and stopped_in < 45, (stopped_in, out[-3000:])
    # The first host's nodes stopped cleanly (else the runner names the node and its code).
    assert runners[0].wait(timeout=30) == 0, (tmp_path / "runner_0.out").read_text()[-3000:]
    assert _nothing_left(pair)
  finally:
    for proc in runners + [launcher]:
      if proc.poll() is None:
        proc.kill()


@pytest.mark.slow  # two-host programs in namespaces
def test_sigterm_to_the_launcher_leaves_nothing_on_either_host(pair, tmp_path):
  launcher = subprocess.Popen(
      _train_argv(pair, tmp_path, "--steps", "10000000", "--start", _template(pair)),
      cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
  try:
    _wait_for_all_nodes(tmp_path, launcher)
    assert len(pair.pids(0)) >= 5 and len(pair.pids(1)) >= 3  # runners and nodes
    # The actor host's node processes (actor, evaluator) run with the launcher's placement:
    # jax on the CPU only, one thread.
    node_envs = [_environ(pid) for pid in pair.pids(1) if "--task" in _cmdline(pid)]
    assert len(node_envs) == 2, node_envs
    for env in node_envs:
      assert env.get("JAX_PLATFORMS") == "cpu" and env.get("CUDA_VISIBLE_DEVICES") == ""
      assert env.get("OMP_NUM_THREADS") == "1" and env.get("TF_NUM_INTRAOP_THREADS") == "1"
    sent_at = time.time()
    launcher.send_signal(signal.SIGTERM)  # `ip netns exec` has exec'd the launcher
    code = launcher.wait(timeout=90)
    out = launcher.stdout.read()
    assert code == 128 + signal.SIGTERM, out[-3000:]
    # A checkpoint (5 s at most), then the stop grace (20 s) and the kill (5 s), plus
    # slack for a loaded machine.
    assert time.time() - sent_at < 45
    assert _nothing_left(pair, timeout_s=2)
  finally:
    if launcher.poll() is None:
      launcher.kill()


@pytest.mark.slow  # two-host programs in namespaces
def test_a_sigkilled_actor_node_is_restarted_by_its_host_runner(pair, tmp_path):
  """Elastic actors across hosts (issue 56): the one actor's node process on the second
  host is SIGKILLed once the learner steps; its host runner restarts it (telling the
  counter node, so its silence is not a dead host) and the program completes its steps,
  the restart counted in the launcher's summary and in the runner's restarts file."""
  launcher = subprocess.Popen(
      _train_argv(pair, tmp_path, "--steps", "3000", "--eval-every", "100000", "--start",
                  _template(pair), "--host-timeout", "5"),
      cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
  try:
    _wait_for_learning(tmp_path, launcher)
    task = str(distributed._titles(1).index("actor/0"))
    [pid] = [p for p in pair.pids(1)
             if "--task" in _cmdline(p) and _cmdline(p)[_cmdline(p).index("--task") + 1] == task]
    os.kill(pid, signal.SIGKILL)
    code = launcher.wait(timeout=240)
    out = launcher.stdout.read()
    assert code == 0, out[-3000:]
    assert "; 1 restart (actor/0 x1);" in out, out[-3000:]  # the launcher's summary line
    runner_log = (tmp_path / "logs" / "host_1.log").read_text()  # --no-progress: no echo
    assert "actorq: host 1: node actor/0 exited with signal SIGKILL; restart 1 of 3 in 1 s" in \
        runner_log
    assert f"actorq: actor/0 restart 1: seed {elastic.restart_seed(1, 1)} (first start: 1)" in \
        runner_log
    [row] = elastic.read_restarts(str(tmp_path), "restarts_host_1.csv")
    assert (row["node"], row["cause"]) == ("actor/0", "signal SIGKILL")
    assert _nothing_left(pair)
  finally:
    if launcher.poll() is None:
      launcher.kill()
