"""The distributed program: runs under Launchpad, and stops cleanly at the step limit,
when a node fails, and when the launcher gets SIGTERM."""
import csv
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
import psutil

from actorq.agents.dqn import builder as dqn_builder
from actorq.agents.dqn import config as dqn_config
from actorq.launch import distributed
from actorq.launch import experiment
from actorq.components import placement

pytestmark = pytest.mark.slow  # multi-process or several training runs

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PYTHON = sys.executable


def _small_config(**kw):
  return dqn_config.DQNConfig(hidden_sizes=(32,), min_replay_size=100, variable_update_period=5,
                              **kw)


def _rows(path):
  with open(path, encoding="utf-8") as f:
    return list(csv.DictReader(f))


@pytest.mark.isolated  # Launchpad nodes as threads of the test process: run in a child
def test_dqn_program_with_two_actors_under_test_mt(tmp_path):
  config = _small_config()
  builder = dqn_builder.DQNBuilder(config)
  # Evaluations every 400 actor steps: after 100 in replay, 2 actor steps per learner step.
  experiment_config = experiment.ExperimentConfig(
      builder, "gym:CartPole-v1", num_steps=1_500, logdir=str(tmp_path), eval_every=400,
      eval_episodes=1)
  dp = distributed.make_program(experiment_config, num_actors=2)
  assert {label: len(nodes) for label, nodes in dp.program.groups.items()} == {
      "replay": 1, "counter": 1, "learner": 1, "actor": 2, "evaluator": 1, "limiter": 1}
  result = distributed.launch(dp, "test_mt")
  assert (result.exit_code, result.reason) == (0, "finished")
  counts = result.counts
  actor_steps, learner_steps = counts["actor_steps"], counts["learner_steps"]
  assert actor_steps >= 1_500
  assert learner_steps > 0
  # Samples-per-insert is Reverb's: sampled items <= spi * inserted items + error buffer.
  # Actors send their step counts to the counter at most every 0.5 s, and steps not yet
  # sent when the program stops are dropped, so the counter's actor_steps may lag the
  # inserts by up to 0.5 s of acting: allow 1 s worth at the run's mean actor rate.
  spi, batch = config.samples_per_insert, config.batch_size
  error_buffer = max(2 * spi, config.min_replay_size * spi * 0.1, 1.0)
  unsent = actor_steps / result.wall_seconds * 1.0
  assert learner_steps * batch <= spi * (actor_steps + unsent) + error_buffer
  # Both actors acted, and with parameters the learner had updated.
  for i in range(2):
    rows = _rows(tmp_path / f"actor_{i}.csv")
    assert rows, f"actor {i} finished no episode"
    assert max(int(r["policy_version"]) for r in rows) > 0
  assert result.evaluations and result.evaluations[0]["policy_version"] >= 100
  # A run checkpoint at the clean finish: the learner's pickle and Reverb's tables.
  names = os.listdir(tmp_path / "checkpoints")
  assert result.checkpoint and os.path.basename(result.checkpoint) in names
  assert any(n.startswith("replay-") for n in names)


@pytest.mark.isolated  # Launchpad nodes as threads of the test process: run in a child
def test_the_last_evaluation_is_at_the_step_limit_under_test_mt(tmp_path):
  """A run shorter than eval_every still ends with an evaluation at its limit (before the
  limiter waited for it, it ended with none: eval.csv was empty)."""
  config = _small_config()
  experiment_config = experiment.ExperimentConfig(
      dqn_builder.DQNBuilder(config), "gym:CartPole-v1", num_steps=600, logdir=str(tmp_path),
      eval_every=100_000, eval_episodes=1)
  result = distributed.launch(distributed.make_program(experiment_config, num_actors=2),
                              "test_mt")
  assert (result.exit_code, result.reason) == (0, "finished")
  assert len(result.evaluations) == 1
  final = result.evaluations[-1]
  assert 600 <= final["actor_steps"] <= result.counts["actor_steps"]
  assert final["policy_version"] > 0  # the learner had stepped (min replay 100)
  assert result.counts["final_evaluation"] == 1 and result.counts["limit_reached"] == 1
  assert len(_rows(tmp_path / "eval.csv")) == 1


@pytest.mark.isolated  # Launchpad nodes as threads of the test process: run in a child
def test_vectorized_actors_write_to_reverb_under_test_mt(tmp_path):
  """Two actor nodes with 4 environments each (EnvPool CartPole), batched adders on Reverb."""
  config = _small_config()
  experiment_config = experiment.ExperimentConfig(
      dqn_builder.DQNBuilder(config), "gym:CartPole-v1", num_steps=600, logdir=str(tmp_path),
      eval_every=600, eval_episodes=1, num_envs=4)
  result = distributed.launch(distributed.make_program(experiment_config, num_actors=2),
                              "test_mt")
  assert (result.exit_code, result.reason) == (0, "finished")
  assert result.counts["actor_steps"] >= 600 and result.counts["learner_steps"] > 0
  for i in range(2):
    rows = _rows(tmp_path / f"actor_{i}.csv")
    assert len(rows) >= 4, f"actor {i}: {len(rows)} episodes"
    assert max(int(r["policy_version"]) for r in rows) > 0


_FAILING = textwrap.dedent("""
    import sys, time
    from actorq.agents.dqn import builder as b, config as c
    from actorq.launch import distributed, experiment

    class FailingBuilder(b.DQNBuilder):
      def make_learner(self, *args, **kwargs):
        learner = super().make_learner(*args, **kwargs)
        step = learner.step
        def failing_step():
          if learner.step_count >= 20:
            open(sys.argv[2] + "/failed_at", "w").write(repr(time.time()))
            raise RuntimeError("injected learner failure")
          step()
        learner.step = failing_step
        return learner

    cfg = c.DQNConfig(hidden_sizes=(32,), min_replay_size=100, variable_update_period=5)
    config = experiment.ExperimentConfig(FailingBuilder(cfg), "gym:CartPole-v1",
                                         num_steps=10**7, logdir=sys.argv[2], eval_every=10**6)
    result = distributed.launch(distributed.make_program(config, num_actors=1), sys.argv[1],
                                echo=False)
    print(distributed.summary_line(result))
    print("program ended at", repr(time.time()))
    sys.exit(result.exit_code)
""")


def test_a_failing_node_brings_the_program_down(tmp_path):
  script = tmp_path / "failing.py"
  script.write_text(_FAILING)
  proc = subprocess.run([PYTHON, str(script), "local_mt", str(tmp_path)], cwd=ROOT,
                        capture_output=True, text=True, timeout=240)
  assert proc.returncode == distributed.EXIT_FAILED, proc.stdout[-2000:] + proc.stderr[-2000:]
  assert "injected learner failure" in proc.stdout
  # Every node thread had ended when launch() returned.
  failed_at = float((tmp_path / "failed_at").read_text())
  ended = float(proc.stdout.split("program ended at ")[1].split()[0])
  assert 0 < ended - failed_at < 30.0


def _descendants(pid):
  try:
    return psutil.Process(pid).children(recursive=True)
  except psutil.NoSuchProcess:
    return []


def test_sigterm_to_the_launcher_leaves_no_process(tmp_path):
  env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
  proc = subprocess.Popen(
      [PYTHON, "-m", "actorq.cli.main", "train", "--launch", "local_mp", "--num-actors", "2",
       "--steps", "10000000", "--logdir", str(tmp_path), "--no-progress"],
      cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
  try:
    deadline = time.time() + 180
    while time.time() < deadline:  # until both actors have written an episode
      if all((tmp_path / f"actor_{i}.csv").exists() and len(_rows(tmp_path / f"actor_{i}.csv"))
             for i in range(2)):
        break
      assert proc.poll() is None, "the launcher ended before the actors ran"
      time.sleep(1.0)
    else:
      raise AssertionError("the actors did not start within 180 s")
    nodes = _descendants(proc.pid)
    assert len([p for p in nodes if p.ppid() == proc.pid]) == 7  # one process per node
    proc.send_signal(signal.SIGTERM)
    code = proc.wait(timeout=30)
    assert code == 128 + signal.SIGTERM
    alive = [p for p in nodes if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert alive == []
  finally:
    if proc.poll() is None:
      for p in _descendants(proc.pid):
        p.kill()
      proc.kill()


def test_local_mp_actor_nodes_never_start_a_gpu_backend(tmp_path, monkeypatch):
  """The launcher's environment as on a GPU machine (GPU 0 visible, no JAX_PLATFORMS): the
  actor node's process still gets JAX_PLATFORMS=cpu, no visible GPU and one thread, starts
  only jax's CPU backend and acts on a CPU device; the learner node keeps the launcher's
  environment (so it could take the GPU) with its thread counts."""
  monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
  monkeypatch.delenv("JAX_PLATFORMS", raising=False)
  config = experiment.ExperimentConfig(
      dqn_builder.DQNBuilder(_small_config()), "gym:CartPole-v1", num_steps=500,
      logdir=str(tmp_path), eval_every=10**6, eval_episodes=1, checkpoint_every=None)
  dp = distributed.make_program(config, num_actors=1)
  seen = {}

  def on_poll(counts):
    if "actor" in seen or counts.get("actor_steps", 0) < 1:
      return
    try:
      seen["actor"] = dp.actors[0].dereference().placement()
      seen["learner"] = dp.learner.dereference().placement()
    except Exception as e:  # pylint: disable=broad-except
      seen["error"] = repr(e)

  # launch() calls on_poll with every counts it reads before it checks the step limit, so the
  # nodes are still up when it asks them.
  result = distributed.launch(dp, "local_mp", echo=False, on_poll=on_poll)
  assert (result.exit_code, result.reason) == (0, "finished"), result.detail
  assert "error" not in seen and "actor" in seen, seen
  actor, learner = seen["actor"], seen["learner"]
  assert actor["env"]["JAX_PLATFORMS"] == "cpu" and actor["env"]["CUDA_VISIBLE_DEVICES"] == ""
  assert "--xla_cpu_multi_thread_eigen=false" in actor["env"]["XLA_FLAGS"].split()
  assert actor["env"]["TF_NUM_INTRAOP_THREADS"] == actor["env"]["OMP_NUM_THREADS"] == "1"
  assert actor["started_platforms"] == ["cpu"]
  assert actor["runtime_devices"] and all(d.lower().startswith(("tfrt_cpu", "cpu"))
                                          for d in actor["runtime_devices"]), actor
  assert learner["env"]["JAX_PLATFORMS"] is None and learner["env"]["CUDA_VISIBLE_DEVICES"] == "0"
  assert learner["env"]["TF_NUM_INTRAOP_THREADS"] == str(placement.learner_threads(1))
  assert learner["pid"] != actor["pid"] != os.getpid()
  gpu = placement.probe_gpu()
  assert learner["learner_device"] == ("gpu:0" if gpu else "cpu:0")
