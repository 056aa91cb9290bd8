"""Elastic actors (issue 56): a dead actor or evaluator node is restarted in its place,
with backoff and a fresh seed, up to `--max-actor-restarts` per node; learner and replay
run on. The pieces (the restart policy, a child started again, the counter node's view of
a restarting or vanished node, the flag) and a `local_mp` program whose actor is SIGKILLed
and which still completes its steps."""
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from actorq.agents.dqn import builder as dqn_builder
from actorq.agents.dqn import config as dqn_config
from actorq.cli import main as cli
from actorq.launch import distributed
from actorq.launch import distributed_nodes
from actorq.launch import elastic
from actorq.launch import experiment
from actorq.components import processes


# ---------------------------------------------------------------------------------------
# The policy.


def test_restarts_back_off_and_stop_at_the_limit(tmp_path, capsys):
  now = [100.0]
  restarts = elastic.Restarts(2, str(tmp_path), base_backoff_s=0.5, clock=lambda: now[0])
  assert restarts.exited("actor/1", -signal.SIGKILL) is None  # restart 1, after 0.5 s
  assert restarts.pending("actor/1") and restarts.due() == []
  now[0] += 0.5
  assert restarts.due() == ["actor/1"] and restarts.due() == []  # each one once
  assert restarts.count("actor/1") == 1
  assert restarts.exited("evaluator/0", 1, "RuntimeError: boom") is None
  assert restarts.exited("actor/1", 1) is None  # restart 2, after 1 s
  now[0] += 0.5
  assert restarts.due() == ["evaluator/0"]  # actor/1's doubled backoff is not over yet
  now[0] += 0.5
  assert restarts.due() == ["actor/1"]
  problem = restarts.exited("actor/1", -signal.SIGKILL)
  assert problem == ("node actor/1 exited with signal SIGKILL, after 2 restarts (the limit, "
                     "--max-actor-restarts 2)")
  # Replay, counter, learner and limiter are never restarted.
  assert restarts.exited("learner/0", 1).startswith("node learner/0 exited with exit code 1")
  assert restarts.summary() == "3 restarts (actor/1 x2, evaluator/0 x1)"
  rows = elastic.read_restarts(str(tmp_path))
  assert [(r["node"], r["restart"], r["exit_code"], r["cause"], r["backoff_s"]) for r in rows] == [
      ("actor/1", "1", "-9", "signal SIGKILL", "0.5"),
      ("evaluator/0", "1", "1", "exit code 1: RuntimeError: boom", "0.5"),
      ("actor/1", "2", "1", "exit code 1", "1.0")]
  assert [r["wall_seconds"] for r in rows] == ["0.0", "0.5", "0.5"]
  out = capsys.readouterr().out
  assert "actorq: node actor/1 exited with signal SIGKILL; restart 1 of 2 in 0.5 s" in out
  assert elastic.Restarts(0).exited("actor/0", -9) == "node actor/0 exited with signal SIGKILL"
  assert [elastic.backoff_s(k) for k in (1, 2, 3, 6, 7)] == [1.0, 2.0, 4.0, 30.0, 30.0]
  with pytest.raises(ValueError, match="max_restarts must be an integer >= 0"):
    elastic.Restarts(-1)


def test_a_restarted_actor_gets_a_seed_no_other_actor_has():
  actor_seeds = [1 + i for i in range(64)]  # seed 0's actors: seed + 1 + i
  drawn = {elastic.restart_seed(s, k) for s in actor_seeds for k in range(1, 4)}
  assert len(drawn) == 64 * 3 and not drawn & set(actor_seeds)
  assert all(0 <= s < 2**31 for s in drawn)
  assert elastic.restart_seed(7, 0) == 7 and elastic.restart_seed(7, 1) == elastic.restart_seed(7, 1)
  assert elastic.restart_number({elastic.RESTART_ENV: "2"}) == 2 and elastic.restart_number({}) == 0


def test_a_child_is_started_again_with_its_restart_number(tmp_path):
  script = "import os, sys; print('run', os.environ.get('ACTORQ_NODE_RESTART', '0')); sys.exit(3)"
  procs = processes.NodeProcesses(
      [processes.Command("actor/0", [sys.executable, "-c", script])], str(tmp_path), echo=False)
  assert procs.wait(30)
  assert procs.exit_codes() == {"actor/0": 3}
  procs.restart("actor/0", {elastic.RESTART_ENV: "1"})
  assert procs.wait(30) and procs.exit_codes() == {"actor/0": 3}
  procs.last_error("actor/0")  # its output is read to the end
  assert (tmp_path / "actor_0.log").read_text().split("\n")[:2] == ["run 0", "run 1"]


# ---------------------------------------------------------------------------------------
# The counter node (`hosts`): a restarting node is waited for, a vanished one dropped.


def test_the_counter_waits_for_a_restarting_node_and_drops_a_silent_one():
  node = distributed_nodes.CounterNode(
      participants=["actor/0", "actor/1", "evaluator/0", "learner/0"], silent_after_s=0.2,
      startup_timeout_s=60, droppable=["actor/0", "actor/1", "evaluator/0"])
  for title in ("actor/0", "actor/1", "evaluator/0", "learner/0"):
    assert node.heartbeat(title) is None
  assert node.restarting("actor/1") is None  # its host runner restarts it
  time.sleep(0.3)
  node.heartbeat("learner/0")
  node.heartbeat("evaluator/0")
  node._check_participants()  # actor/0 fell silent: dropped; actor/1 is restarting
  assert node.stop_reason() is None
  counts = node.get_counts()
  assert counts["restarts/actor/1"] == 1 and counts["dropped/actor/0"] == 1
  assert node.heartbeat("actor/0").startswith("actor/0 was dropped from the run: actor/0 "
                                              "silent for")
  assert node.heartbeat("actor/1") is None  # the restarted process polls: back in
  time.sleep(0.3)
  node.heartbeat("learner/0")
  node.heartbeat("evaluator/0")
  node._check_participants()  # now the last actor falls silent: nothing left to act
  assert node.stop_reason().startswith("actor/1 silent for") and \
      node.stop_reason().endswith("; no actor is left")
  # Not droppable (restarts off, or the learner): a silent node stops the program.
  strict = distributed_nodes.CounterNode(participants=["actor/0"], silent_after_s=0.05)
  strict.heartbeat("actor/0")
  time.sleep(0.1)
  strict._check_participants()
  assert strict.stop_reason().startswith("actor/0 silent for")


def test_a_resumed_program_does_not_carry_restarts_over():
  state = {"actor_steps": 10, "learner_steps": 3, "episodes": 1,
           "counter": {"counts": {"restarts/actor/0": 2, "dropped/actor/1": 1, "x": 4}}}
  assert distributed_nodes.restored_counts(state) == {
      "x": 4, "actor_steps": 10, "actor_episodes": 1, "learner_steps": 3}


# ---------------------------------------------------------------------------------------
# The flag.


@pytest.mark.parametrize("argv,message", [
    (["--max-actor-restarts", "2"],
     "--max-actor-restarts needs --launch local_mp or hosts (--launch local runs"),
    (["--launch", "local_mt", "--max-actor-restarts", "1"],
     "--max-actor-restarts needs --launch local_mp or hosts (--launch local_mt runs"),
    (["--launch", "local_mp", "--max-actor-restarts", "-1"],
     "--max-actor-restarts must be an integer >= 0, got '-1'"),
])
def test_max_actor_restarts_bad_input_is_one_line_and_exit_2(tmp_path, capsys, argv, message):
  logdir = tmp_path / "run"
  try:
    code = cli.main(["train", "--steps", "100", "--logdir", str(logdir), *argv])
  except SystemExit as e:  # argparse's own check of the value
    code = e.code
  assert code == 2
  err = capsys.readouterr().err.strip().splitlines()
  assert len(err) == 1 and message in err[0], err
  assert not logdir.exists()


def test_dry_run_says_how_often_a_node_is_restarted(capsys):
  assert cli.main(["train", "--launch", "local_mp", "--num-actors", "3", "--max-actor-restarts",
                   "5", "--dry-run"]) == 0
  out = capsys.readouterr().out
  assert "a dead actor or evaluator node is restarted (fresh seed, backoff 1, 2, 4, ... s), up " \
         "to 5 times each" in out
  assert cli.main(["train", "--launch", "local_mp", "--max-actor-restarts", "0",
                   "--dry-run"]) == 0
  assert "restarted" not in capsys.readouterr().out


def test_the_summary_line_counts_restarts_and_dropped_nodes():
  result = distributed.DistributedResult(
      0, "finished", "step limit 10 reached", {"actor_steps": 10}, 5.0, [],
      restarts={"actor/0": 2, "evaluator/0": 1}, dropped=["actor/3"])
  line = distributed.summary_line(result)
  assert "10 actor steps, 0 learner steps, 0 episodes; 3 restarts (actor/0 x2, evaluator/0 " \
         "x1); dropped with their host: actor/3; no evaluation" in line


# ---------------------------------------------------------------------------------------
# The chaos test: SIGKILL to an actor node process of a `local_mp` program.


@pytest.mark.slow  # a local_mp program (7 processes), one node started twice
def test_a_sigkilled_actor_is_restarted_and_the_run_completes(tmp_path):
  """One actor, SIGKILLed at >= 300 actor steps: the program can finish only if the
  restarted actor, on a new seed, re-attaches to replay, learner and counter and acts the
  remaining steps. The restart is counted (result, summary line, restarts.csv), and no
  node process is left when launch returns."""
  config = experiment.ExperimentConfig(
      dqn_builder.DQNBuilder(dqn_config.DQNConfig(hidden_sizes=(16,), min_replay_size=100,
                                                  variable_update_period=5)),
      "gym:CartPole-v1", num_steps=900, logdir=str(tmp_path), eval_every=10**6,
      eval_episodes=1, checkpoint_every=None)
  dp = distributed.make_program(config, num_actors=1)
  assert dp.max_actor_restarts == elastic.DEFAULT_MAX_RESTARTS
  seen = {"nodes": set()}

  def on_poll(counts):
    seen["nodes"].update(psutil.Process().children(recursive=True))
    if "killed" in seen or counts.get("actor_steps", 0) < 300:
      return
    pid = dp.actors[0].dereference().placement()["pid"]
    seen["learner_steps"] = counts.get("learner_steps", 0)
    os.kill(pid, signal.SIGKILL)
    seen["killed"] = (pid, counts["actor_steps"])

  result = distributed.launch(dp, "local_mp", echo=False, on_poll=on_poll)
  assert (result.exit_code, result.reason) == (0, "finished"), result.detail
  assert "killed" in seen and result.counts["actor_steps"] >= 900
  assert result.restarts == {"actor/0": 1}
  assert "; 1 restart (actor/0 x1);" in distributed.summary_line(result)
  assert result.counts["learner_steps"] > seen["learner_steps"]  # the learner ran on
  [row] = elastic.read_restarts(str(tmp_path))
  assert (row["node"], row["restart"], row["cause"]) == ("actor/0", "1", "signal SIGKILL")
  log = (tmp_path / "logs" / "actor_0.log").read_text()
  assert f"actorq: actor/0 restart 1: seed {elastic.restart_seed(1, 1)} (first start: 1)" in log
  alive = [p for p in seen["nodes"] if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
  assert alive == [] and seen["killed"][0] in {p.pid for p in seen["nodes"]}


def test_only_actor_nodes_that_take_a_fresh_seed_are_restarted(tmp_path, monkeypatch):
  """A multi-agent program's actors are ActorNodes (a multi-agent builder runs like any
  agent; their environments and keys come from the seed its restart draws): restarted like a
  single-agent one. An actor node class that does not say `fresh_seed_on_restart` keeps the
  strict behaviour whatever the option says."""
  from actorq.agents import ippo  # pylint: disable=g-import-not-at-top
  from actorq.launch import distributed_nodes  # pylint: disable=g-import-not-at-top
  config = experiment.ExperimentConfig(
      ippo.IPPOBuilder(ippo.IPPOConfig(policy_hidden=(16,), value_hidden=(16,))),
      "pz:mpe2/simple_spread_v3", num_steps=600, logdir=str(tmp_path), checkpoint_every=None)
  options = distributed.DistributedOptions(max_actor_restarts=5)
  assert distributed.make_program(config, num_actors=2, options=options).max_actor_restarts == 5
  monkeypatch.setattr(distributed_nodes.ActorNode, "fresh_seed_on_restart", False)
  dp = distributed.make_program(config, num_actors=2, options=options)
  assert dp.max_actor_restarts == 0
  assert "restarted" not in distributed.describe(dp, "local_mp")
  with pytest.raises(ValueError, match="max_actor_restarts must be an integer >= 0"):
    distributed.DistributedOptions(max_actor_restarts=-1)
