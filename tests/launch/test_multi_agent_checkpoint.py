"""Checkpoints, `--resume`, `actorq eval` and `actorq export` of single-process multi-agent
runs (issue 44), on the scripted two-agent environment (`fakes.ScriptedParallelEnv`)."""
import csv
import os

import jax
import optax
import pytest

from actorq import core
from actorq.agents import ippo
from actorq.components.envs import multi_agent as ma_env
from actorq.components import checkpointing
from actorq.launch import experiment
from actorq.launch import local
from actorq.testing import fakes


@pytest.fixture
def scripted_id(monkeypatch):
  return fakes.install_scripted_pz(monkeypatch)


def _config(env_id, logdir, steps, share=True, resume=False):
  config = ippo.IPPOConfig(rollout_length=5, batch_size=2, minibatch_size=5, num_epochs=2,
                           policy_hidden=(8,), value_hidden=(8,), share_parameters=share)
  return experiment.ExperimentConfig(
      builder=ippo.IPPOBuilder(config), env_id=env_id, num_steps=steps, eval_every=20,
      eval_episodes=2, seed=3, logdir=str(logdir), num_envs=2, checkpoint_every=None,
      resume=resume)


def _adam_counts(learner_state):
  return sorted({int(s.count) for s in jax.tree_util.tree_flatten(
      learner_state, is_leaf=lambda x: isinstance(x, optax.ScaleByAdamState))[0]
                 if isinstance(s, optax.ScaleByAdamState)})


@pytest.mark.parametrize("share", [True, False])
def test_a_checkpoint_holds_every_group_and_restores_it_exactly(scripted_id, tmp_path, share):
  first = local.run(_config(scripted_id, tmp_path, 40, share))
  path, state = checkpointing.restore_latest(str(tmp_path / "checkpoints"),
                                             checkpointing.validate_run)
  groups = ["shared"] if share else ["a", "b"]
  assert state["multi_agent"] and sorted(state["groups"]) == groups
  assert state["actor_steps"] == 40 and state["learner_steps"] == first.learner_steps > 0
  assert sum(g["learner_steps"] for g in state["groups"].values()) == first.learner_steps
  assert checkpointing.params_checksum(state["policy_params"]) == first.params_checksum
  # Every group's table is in the replay state.
  assert sorted(state["replay_state"]["tables"]) == sorted(
      ["ippo_rollouts"] if share else ["ippo_rollouts_a", "ippo_rollouts_b"])
  # Resumed at its step limit: nothing more to act, one evaluation, the same parameters
  # (the learners' states, optimizers included, come back bit for bit).
  again = local.run(_config(scripted_id, tmp_path, 40, share, resume=True))
  assert again.resumed_from == path and again.resumed_actor_steps == 40
  assert (again.actor_steps, again.learner_steps) == (40, first.learner_steps)
  assert again.params_checksum == first.params_checksum
  assert again.evaluations[-1]["episode_return"] == first.evaluations[-1]["episode_return"]


@pytest.mark.slow  # three training runs (~32 s): pytest.ini's definition of slow
def test_a_stopped_and_resumed_run_continues_its_schedules(scripted_id, tmp_path):
  """As single-agent checkpoints promise (tests/launch/test_resume.py): the counters, each
  group's learner-steps-owed schedule (its items written, its agent steps) and the
  optimizers continue from the checkpoint, and the run ends at the same actor steps as one
  run straight through. Not its parameters, nor always its learner steps: the episodes in
  progress (and a PPO group's rollouts in progress) are not checkpointed, so the resumed
  run's agents write their own rollouts from new episodes."""
  builder = _config(scripted_id, tmp_path, 1, share=False).builder
  straight = local.run(_config(scripted_id, tmp_path / "straight", 80, share=False))
  part = local.run(_config(scripted_id, tmp_path / "resumed", 40, share=False))
  _, saved = checkpointing.restore_latest(str(tmp_path / "resumed" / "checkpoints"))
  resumed = local.run(_config(scripted_id, tmp_path / "resumed", 80, share=False,
                                    resume=True))
  assert resumed.actor_steps == straight.actor_steps == 80
  assert 0 < part.learner_steps < resumed.learner_steps
  _, final = checkpointing.restore_latest(str(tmp_path / "resumed" / "checkpoints"))
  for name in ("a", "b"):
    before, after = saved["groups"][name], final["groups"][name]
    assert after["items_written"] > before["items_written"] > 0
    assert after["group_steps"] > before["group_steps"] > 0
    assert after["actor_num_steps"] > before["actor_num_steps"]
    # The schedule counts the whole run's items, not the resumed session's alone.
    (group,) = [g for g in multi_agent_groups(scripted_id, builder) if g.name == name]
    owed = builder.group_builder(group).learner_steps_owed(core.ReplayProgress(
        after["group_steps"] - after["learning_start"], after["items_written"]))
    assert after["learner_steps"] == owed == after["items_written"] // 2
    # Adam's step count continued from the checkpoint: 2 epochs x 2 minibatches a step.
    assert _adam_counts(after["learner"]) == [after["learner_steps"] * 2 * 2]
    assert final["counter"]["counts"][f"learner_{name}_steps"] == after["learner_steps"]
  assert final["learner_steps"] == resumed.learner_steps
  with open(tmp_path / "resumed" / "eval.csv", encoding="utf-8") as f:
    rows = list(csv.DictReader(f))
  assert [r["actor_steps"] for r in rows] == ["20", "40", "60", "80"]


def multi_agent_groups(env_id, builder):
  env = ma_env.make_multi_agent_environment(env_id, seed=0)
  try:
    return builder.make_groups(env)
  finally:
    env.close()


def test_resume_refuses_a_single_agent_checkpoint(scripted_id, tmp_path):
  os.makedirs(tmp_path / "checkpoints")
  checkpointing.save_run(str(tmp_path / "checkpoints"), {"actor_steps": 1, "learner_steps": 0},
                         step=1)
  with pytest.raises(checkpointing.CheckpointError, match="is not a multi-agent checkpoint"):
    local.run(_config(scripted_id, tmp_path, 40, resume=True))


def test_actorq_eval_export_and_quantize_of_a_multi_agent_run(scripted_id, tmp_path, capsys):
  from actorq.testing.cli import run_cli  # pylint: disable=g-import-not-at-top
  logdir = str(tmp_path / "run")
  code, _, err = run_cli(
      ["train", "--agent", "idqn", "--env", scripted_id, "--steps", "30", "--eval-every", "30",
       "--eval-episodes", "2", "--seed", "0", "--no-progress", "--logdir", logdir,
       "--set", "min_replay_size=10", "--set", "batch_size=4"], capsys)
  assert code == 0, err
  for precision in ("fp32", "int8"):
    code, out, err = run_cli(["eval", "--checkpoint", logdir, "--episodes", "3",
                              "--precision", precision], capsys)
    assert code == 0, err
    lines = out.splitlines()
    assert f"3 greedy episodes at {precision}" in lines
    team = [l for l in lines if l.startswith("team return: mean ")]
    a = [l for l in lines if l.startswith("return of a: mean ")]
    b = [l for l in lines if l.startswith("return of b: mean ")]
    assert len(team) == len(a) == len(b) == 1
    mean = lambda line: float(line.split("mean ")[1].split(",")[0])
    # Scripted rewards: a gets 1 + action at t = 1, 2; b gets 10 t + action at t = 1..3.
    assert 2.0 <= mean(a[0]) <= 4.0 and 60.0 <= mean(b[0]) <= 63.0
    assert mean(team[0]) == pytest.approx(mean(a[0]) + mean(b[0]), abs=0.011)
    assert "episode length: mean 3.0, min 3, max 3 steps" in lines
  # Export (issue 44 item 4): one model + JSON per parameter group (idqn shares: "shared")
  # and the index; tests/studies/test_multi_agent_export.py checks what they hold.
  code, out, err = run_cli(["export", "--checkpoint", logdir, "--episodes", "2"], capsys)
  assert code == 0, err
  export_dir = os.path.join(os.path.abspath(logdir), "export")
  lines = out.splitlines()
  assert (f"models of 1 parameter group(s) (int8); index: "
          f"{os.path.join(export_dir, 'policy-int8.json')}") in lines
  (group,) = [l for l in lines if l.startswith("group shared (agents a, b): ")]
  assert os.path.join(export_dir, "policy-int8-shared.tflite") in group
  assert "parity over 2 episodes: group return fp32 " in group
  assert sorted(os.listdir(export_dir)) == [
      "policy-int8-shared.json", "policy-int8-shared.tflite", "policy-int8.json"]
  for extra in ([], ["--sweep", "bits=8,4"]):
    code, out, err = run_cli(["quantize", "--checkpoint", logdir, *extra], capsys)
    assert (code, out) == (2, "")
    assert err == (f"actorq: error: {scripted_id} is a multi-agent run: actorq quantize "
                   "studies single-agent policies only for now; evaluate it with: actorq eval "
                   f"--checkpoint {os.path.abspath(logdir)}\n")
