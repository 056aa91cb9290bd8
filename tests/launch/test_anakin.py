"""`--launch anakin`: a seed is a run (twice, the same learner checksum; among other
vmapped seeds, the same whichever seeds run beside it), its run directory is a run's (eval.csv, checkpoints that
`actorq eval` and `--resume` take), and the sweep writes the per-seed folders and the
aggregate. Tiny networks and step counts: the compile dominates."""
import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from actorq.launch import anakin, engine
from actorq.launch import spec as spec_lib
from actorq.testing.cli import run_cli

pytestmark = pytest.mark.slow

DQN = {"hidden_sizes": [16], "batch_size": 8, "max_replay_size": 400, "min_replay_size": 40,
       "samples_per_insert": 4.0, "n_step": 2, "target_update_period": 20,
       "epsilon_decay_steps": 200, "learning_rate_decay_steps": 100,
       "actor_precision": "int8"}
PPO = {"policy_hidden": [16], "value_hidden": [16], "batch_size": 2, "rollout_length": 16,
       "minibatch_size": 16, "num_epochs": 1}


def _spec(agent, config, seed, logdir=None, steps=240, **kw):
  return spec_lib.RunSpec(agent=agent, env="gymnax:CartPole-v1", seed=seed, config=config,
                          steps=steps, eval_every=120, eval_episodes=2, launch="anakin",
                          logdir=None if logdir is None else str(logdir), **kw)


def _run(specs):
  """`anakin.run` of `specs` whose run directories `engine.open_run_dir` made (run.json by its
  one writer), as `actorq sweep --launch anakin` runs them."""
  return anakin.run([s if s.logdir is None else engine.open_run_dir(s) for s in specs])


def test_a_seed_is_a_run_twice_and_among_other_seeds(tmp_path):
  alone, = _run([_spec("dqn", DQN, 1, tmp_path / "alone")])
  again, = _run([_spec("dqn", DQN, 1)])
  assert alone.params_checksum == again.params_checksum
  three = _run([_spec("dqn", DQN, s, tmp_path / f"s{s}") for s in (0, 1, 2)])
  two = _run([_spec("dqn", DQN, s) for s in (2, 1)])
  assert three[1].params_checksum == two[1].params_checksum
  assert three[2].params_checksum == two[0].params_checksum
  assert len({r.params_checksum for r in three}) == 3  # other seeds, other runs
  assert alone.actor_steps == 240 and alone.learner_steps == (240 - 40) // 2 + 1
  assert [e["actor_steps"] for e in alone.evaluations] == [120, 240]
  assert alone.evaluations[-1]["actor_precision"] == "int8"
  # The run directory is a run's: run.json, eval.csv, TensorBoard, checkpoints.
  d = tmp_path / "s1"
  assert json.loads((d / "run.json").read_text())["train"]["launch"] == "anakin"
  assert len((d / "eval.csv").read_text().splitlines()) == 3
  assert os.listdir(d / "checkpoints") and os.listdir(d / "tensorboard")


def test_resume_continues_the_same_run_and_eval_reads_it(tmp_path, capsys):
  straight, = _run([_spec("ppo", PPO, 0)])
  half = _spec("ppo", PPO, 0, tmp_path / "run", steps=120)
  first, = _run([half])
  resumed, = _run([_spec("ppo", PPO, 0, tmp_path / "run", resume=True)])
  assert resumed.resumed_actor_steps == first.actor_steps >= 120
  assert resumed.params_checksum == straight.params_checksum
  assert [e["actor_steps"] for e in resumed.evaluations] == [
      e["actor_steps"] for e in straight.evaluations]
  code, out, _ = run_cli(["eval", "--checkpoint", str(tmp_path / "run"), "--episodes", "2"],
                         capsys)
  assert code == 0 and "returns:" in out


def test_sweep_runs_the_seeds_in_one_program(tmp_path, capsys):
  sets = [a for k, v in PPO.items() for a in ("--set", f"{k}={json.dumps(v)}")]
  code, out, err = run_cli(["sweep", "--launch", "anakin", "--agent", "ppo", "--env",
                            "gymnax:CartPole-v1", "--seeds", "0-2", "--precisions", "fp32,int8",
                            "--steps", "120", "--eval-every", "120", "--eval-episodes", "1",
                            "--logdir", str(tmp_path), *sets], capsys)
  assert code == 0, err
  assert "seeds 0-2 in one compiled program" in out
  rows = (tmp_path / "seeds.csv").read_text().splitlines()
  assert len(rows) == 1 + 6
  for p in ("fp32", "int8"):
    for s in range(3):
      assert (tmp_path / f"{p}-s{s}" / "eval.csv").exists()
  assert (tmp_path / "aggregate.csv").exists()


def test_what_does_not_run_compiled_is_one_line():
  with pytest.raises(Exception, match="allowed prefixes: gymnax:"):
    anakin.check(spec_lib.RunSpec(agent="dqn", env="gym:CartPole-v1", launch="anakin"))
  with pytest.raises(Exception, match="does not run compiled yet.*allowed: dqn, ppo"):
    anakin.check(spec_lib.RunSpec(agent="sac", env="gymnax:CartPole-v1", launch="anakin"))
  with pytest.raises(Exception, match="'fp16' does not run compiled.*allowed: fp32, int8"):
    anakin.check(spec_lib.RunSpec(agent="dqn", env="gymnax:CartPole-v1", launch="anakin",
                                  config={"actor_precision": "fp16"}))


def test_dqn_with_a_plain_q_head_and_uniform_replay_runs_compiled():
  # The MinAtar preset's shape of DQN (agents/dqn/configs/minatar.json): no dueling head,
  # uniform replay, Q-learning without double Q.
  plain = {**DQN, "dueling": False, "prioritized_replay": False, "double_q": False,
           "actor_precision": "fp32"}
  result, = _run([_spec("dqn", plain, 0)])
  assert result.actor_steps == 240 and result.learner_steps == (240 - 40) // 2 + 1
  # The actors' Q-values are the network's outputs themselves.
  _, _, system = anakin.make(_spec("dqn", plain, 0))
  carry = system.init(jax.random.PRNGKey(0))
  obs = jnp.stack([carry.observation[0], carry.observation[0] + 0.1])
  q = system._q(system.policy, carry.learner.params, obs)
  np.testing.assert_allclose(q, system.networks.network.apply(carry.learner.params, obs),
                             rtol=1e-5, atol=1e-6)
