"""TD3 and SAC with int8 actors: a short single-process run each and a short Launchpad
program (threads, two actors) for SAC; each trains, acts with updated policies and ends
with finite losses. (Their learning tests are in tests/agents.)"""
import csv

import numpy as np
import pytest

from actorq.launch import distributed, experiment, local

from actorq.agents import registry

pytestmark = pytest.mark.slow  # training runs and Launchpad programs

AGENTS = ("td3", "sac")


def _config(agent, steps, logdir, **kw):
  config_cls, builder_cls = registry.get(agent)
  cfg = config_cls(policy_hidden_sizes=(32,), critic_hidden_sizes=(32,), batch_size=32,
                   samples_per_insert=32.0, min_replay_size=100, variable_update_period=5,
                   random_warmup_steps=200)  # then the int8 policy acts (TD3's default: 1000)
  return experiment.ExperimentConfig(builder_cls(cfg), "gym:Pendulum-v1", num_steps=steps,
                                     logdir=str(logdir), actor_precision="int8", **kw)


def _rows(path):
  with open(path, encoding="utf-8") as f:
    return list(csv.DictReader(f))


@pytest.mark.parametrize("agent", AGENTS)
def test_single_process_run_with_int8_actors(agent, tmp_path):
  config = _config(agent, 600, tmp_path, eval_every=300, eval_episodes=1)
  # One learner step per actor step from the one at which the table holds 100 transitions;
  # an n-step adder writes its first transition at actor step n (TD3 n = 3, SAC n = 1).
  n_step = config.builder.config.n_step
  assert n_step == {"td3": 3, "sac": 1}[agent]
  result = local.run(config)
  assert result.actor_steps == 600 and result.learner_steps == 600 - (100 + n_step - 1) + 1
  assert [e["actor_precision"] for e in result.evaluations] == ["int8", "int8"]
  assert all(np.isfinite(e["episode_return"]) for e in result.evaluations)
  rows = _rows(tmp_path / "learner.csv")
  assert rows and all(np.isfinite(float(r["critic_loss"])) for r in rows)
  if agent == "sac":
    # The learner logs at most once a second, so a fast machine may write one row: alpha
    # starts at 1 here; that it moves is test_sac's learner test.
    assert float(rows[0]["alpha"]) == pytest.approx(1.0)
    assert all(np.isfinite(float(r["entropy"])) for r in rows)


@pytest.mark.isolated  # Launchpad nodes as threads of the test process: run in a child
def test_sac_program_with_two_int8_actors_under_test_mt(tmp_path):
  """SAC only (its sampling selector is the new actor path; TD3's program is DDPG's with
  twin critics): one program is ~15 s of CPU, and CI's time is short."""
  agent = "sac"
  config = _config(agent, 1_200, tmp_path, eval_every=600, eval_episodes=1)
  result = distributed.launch(distributed.make_program(config, num_actors=2), "test_mt")
  assert (result.exit_code, result.reason) == (0, "finished")
  assert result.counts["actor_steps"] >= 1_200 and result.counts["learner_steps"] > 0
  rows = _rows(tmp_path / "learner.csv")
  assert rows and all(np.isfinite(float(r["critic_loss"])) for r in rows)
  for i in range(2):
    actor_rows = _rows(tmp_path / f"actor_{i}.csv")
    assert actor_rows and max(int(r["policy_version"]) for r in actor_rows) > 0
  assert result.evaluations and result.evaluations[-1]["actor_precision"] == "int8"
  assert max(e["policy_version"] for e in result.evaluations) > 0
  assert result.checkpoint is not None
