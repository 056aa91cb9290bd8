"""A multi-agent experiment as a Launchpad program (issue 44): one Reverb server with every
parameter group's table, one learner node stepping every group's learner, N actor nodes
each running whole environments with all their agents, the team evaluator; a short
`local_mp` run with 2 actor nodes finishes, writes the team and per-agent returns, counts
each actor node's steps, and leaves nothing running."""
import csv
import os

import psutil
import pytest

from actorq.agents import ippo
from actorq.launch import distributed
from actorq.launch import distributed_nodes
from actorq.launch import experiment
from actorq.components import checkpointing
from actorq.launch import local
from actorq.launch import spec as spec_lib

pytestmark = pytest.mark.slow  # a multi-process Launchpad run

ENV = "pz:mpe2/simple_spread_v3"  # 3 agents: agent_0, agent_1, agent_2


def _config(tmp_path, **kw):
  builder = ippo.IPPOBuilder(ippo.IPPOConfig(
      rollout_length=8, batch_size=2, minibatch_size=8, num_epochs=1, policy_hidden=(16,),
      value_hidden=(16,), **kw))
  return experiment.ExperimentConfig(builder, ENV, num_steps=600, eval_every=300,
                                     eval_episodes=2, logdir=str(tmp_path),
                                     checkpoint_every=None)


def _rows(path):
  with open(path, encoding="utf-8") as f:
    return list(csv.DictReader(f))


def test_the_multi_agent_builder_runs_on_the_programs_nodes(tmp_path):
  """The same nodes as any builder's (issue 52: multi-agent is a builder)."""
  dp = distributed.make_program(_config(tmp_path), num_actors=2)
  assert {label: len(nodes) for label, nodes in dp.program.groups.items()} == {
      "replay": 1, "counter": 1, "learner": 1, "actor": 2, "evaluator": 1, "limiter": 1}
  text = distributed.describe(dp, "local_mp")
  assert "learner/0: CourierNode: LearnerNode(IPPOBuilder)" in text
  assert "actor/1: CourierNode: ActorNode 1 (seed 2, fp32)" in text
  assert "evaluator/0: CourierNode: EvaluatorNode (greedy, every 300" in text


def test_ippo_with_two_actor_nodes_under_local_mp(tmp_path):
  before = {p.pid for p in psutil.Process().children(recursive=True)}
  dp = distributed.make_program(_config(tmp_path, share_parameters=False), num_actors=2)
  result = distributed.launch(dp, "local_mp", echo=False)
  assert (result.exit_code, result.reason) == (0, "finished"), result.detail
  counts = result.counts
  assert counts["actor_steps"] >= 600
  # Each actor node counted its own environment steps, and they make up the total.
  own = [counts.get(distributed_nodes.actor_steps_key(i), 0) for i in range(2)]
  assert all(n > 0 for n in own) and sum(own) == counts["actor_steps"]
  # Without sharing: 3 groups, each its own learner on the one learner node.
  assert counts["learner_steps"] >= 3
  for agent in ("agent_0", "agent_1", "agent_2"):
    assert os.path.exists(tmp_path / f"learner_{agent}.csv")
  rows = _rows(tmp_path / "eval.csv")
  assert rows and int(rows[-1]["actor_steps"]) >= 600
  assert {"episode_return", "return_agent_0", "return_agent_1", "return_agent_2"} <= \
      set(rows[-1])
  for row in rows:  # the team return is the sum of the agents' returns (2 episodes' means)
    team = sum(float(row[f"return_agent_{k}"]) for k in range(3))
    assert float(row["episode_return"]) == pytest.approx(team, rel=1e-5)
  assert max(int(r["policy_version"]) for r in rows) > 0
  for i in range(2):  # each actor node finished episodes with all three agents' returns
    episodes = _rows(tmp_path / f"actor_{i}.csv")
    assert episodes and {"return_agent_0", "return_agent_2"} <= set(episodes[0])
    assert {int(e["episode_length"]) for e in episodes} == {25}
  # Nothing of the program is left running.
  left = [p for p in psutil.Process().children(recursive=True) if p.pid not in before
          and p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
  assert left == []


@pytest.mark.isolated  # Launchpad nodes as threads of the test process: run in a child
def test_a_shared_group_with_two_environments_per_actor_under_test_mt(tmp_path):
  """Parameter sharing (one group of every agent, one table `ippo_rollouts`, one learner
  thread) and `num_envs` 2 per actor node, in threads (`test_mt`, as `local_mt`)."""
  config = _config(tmp_path)
  config.num_envs = 2
  dp = distributed.make_program(config, num_actors=2)
  result = distributed.launch(dp, "test_mt")
  assert (result.exit_code, result.reason) == (0, "finished"), result.detail
  assert result.counts["actor_steps"] >= 600 and result.counts["learner_steps"] >= 1
  assert os.path.exists(tmp_path / "learner.csv")  # one group: the single-agent name
  rows = _rows(tmp_path / "eval.csv")
  assert rows and {"return_agent_0", "return_agent_1", "return_agent_2"} <= set(rows[-1])
  assert int(rows[-1]["actor_steps"]) >= 600
  for i in range(2):
    assert _rows(tmp_path / f"actor_{i}.csv")


def test_train_describes_the_program(capsys):
  from actorq.testing.cli import run_cli  # pylint: disable=g-import-not-at-top
  code, out, err = run_cli(["train", "--agent", "ippo", "--env", ENV, "--launch", "local_mp",
                            "--num-actors", "2", "--dry-run"], capsys)
  assert code == 0, err
  assert "actor/0: CourierNode: ActorNode 0 (seed 1, fp32)" in out


@pytest.mark.isolated  # Launchpad nodes as threads of the test process: run in a child
def test_a_checkpointed_program_resumes_and_evaluates(tmp_path, capsys):
  """The finish's checkpoint holds every group; a resumed program starts from its counts
  and learner states (Reverb reloads the tables); `actorq eval` reads it; a single-process
  run refuses it (no in-process replay)."""
  from actorq.testing.cli import run_cli  # pylint: disable=g-import-not-at-top
  config = _config(tmp_path, share_parameters=False)
  config.num_steps = 300
  first = distributed.launch(distributed.make_program(config, num_actors=2), "test_mt")
  assert (first.exit_code, first.reason) == (0, "finished"), first.detail
  _, saved = checkpointing.restore_latest(str(tmp_path / "checkpoints"),
                                          checkpointing.validate_run)
  assert saved["multi_agent"] and sorted(saved["groups"]) == ["agent_0", "agent_1", "agent_2"]
  assert saved["learner_steps"] == sum(g["learner_steps"] for g in saved["groups"].values())
  assert saved["replay_checkpoint"] and saved["actor_steps"] >= 300
  config.num_steps, config.resume = 600, True
  dp = distributed.make_program(config, num_actors=2)
  assert dp.resumed_counts["actor_steps"] == saved["actor_steps"]
  again = distributed.launch(dp, "test_mt")
  assert (again.exit_code, again.reason) == (0, "finished"), again.detail
  _, final = checkpointing.restore_latest(str(tmp_path / "checkpoints"))
  assert final["actor_steps"] >= 600 and final["episodes"] > saved["episodes"]
  for name, group in saved["groups"].items():  # each learner continued from its state
    assert final["groups"][name]["learner_steps"] >= group["learner_steps"]
  rows = _rows(tmp_path / "eval.csv")
  assert int(rows[0]["actor_steps"]) < 600 <= int(rows[-1]["actor_steps"])
  spec_lib.RunSpec.from_config(config).save(str(tmp_path))  # what `actorq train` writes
  code, out, err = run_cli(["eval", "--checkpoint", str(tmp_path), "--episodes", "2"], capsys)
  assert code == 0, err
  assert "2 greedy episodes at fp32" in out and "return of agent_2: mean " in out
  config.num_steps = 700
  with pytest.raises(checkpointing.CheckpointError, match="holds no in-process replay"):
    local.run(config)
