"""`actorq train --init-from RUN [--init-keep PARTS]` (agents/warm_start.py, issue 55): the
new run's learner starts from the origin's state (the parts kept, nothing else), a run
that does not fit is refused in one line before anything is written, and run.json records
the origin."""
import json
import os

import jax
import numpy as np
import pytest

from actorq import core
from actorq.cli import main as cli
from actorq.components import run_dir
from actorq.agents import warm_start
from actorq.components import checkpointing
from actorq.launch import spec as spec_lib

SMALL = ["--set", "hidden_sizes=[16,16]", "--set", "batch_size=16", "--set",
         "min_replay_size=100", "--set", "samples_per_insert=8.0", "--set",
         "epsilon_decay_steps=300", "--eval-episodes", "1", "--no-progress"]


def _train(argv):
  return cli.main(["train"] + SMALL + list(argv))


def _newest(run):
  path = checkpointing.list_checkpoints(os.path.join(run, run_dir.CHECKPOINTS))[-1]
  return path, checkpointing.load(path)


def _equal(a, b) -> bool:
  la, lb = jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)
  return len(la) == len(lb) and all(np.array_equal(x, y) for x, y in zip(la, lb))


@pytest.fixture(scope="module")
def origin(tmp_path_factory):
  """A 400-step run of seed 0 (300 learner steps after min_replay_size=100)."""
  run = str(tmp_path_factory.mktemp("warm") / "origin")
  assert _train(["--steps", "400", "--eval-every", "400", "--seed", "0", "--logdir", run]) == 0
  return run


def test_the_new_runs_learner_starts_with_the_origins_params_and_target(origin, tmp_path):
  ckpt, state = _newest(origin)
  assert int(state["learner"].steps) > 0  # the origin learned: its params are not an init
  run = str(tmp_path / "warm")
  # 50 actor steps < min_replay_size: the learner takes no step, so its state at the end
  # is the state it started from.
  assert _train(["--steps", "50", "--seed", "1", "--logdir", run, "--init-from", origin]) == 0
  _, new = _newest(run)
  assert int(new["learner"].steps) == 0
  assert _equal(new["learner"].params, state["learner"].params)
  assert _equal(new["learner"].target_params, state["learner"].target_params)
  assert _equal(new["policy_params"], state["policy_params"])
  # Adam's moments are the new run's own (not kept by default): zeros, count 0.
  assert not _equal(new["learner"].opt_state, state["learner"].opt_state)
  assert all(not np.any(x) for x in jax.tree_util.tree_leaves(new["learner"].opt_state))
  info = run_dir.read_info(run)
  assert info["init_from"] == {
      "run": origin, "checkpoint": ckpt, "keep": ["params", "target"],
      "actor_steps": 400, "learner_steps": int(state["learner_steps"]),
      "checksum": checkpointing.checksum(ckpt)}
  # A run of the same seed without --init-from starts elsewhere.
  scratch = str(tmp_path / "scratch")
  assert _train(["--steps", "50", "--seed", "1", "--logdir", scratch]) == 0
  assert not _equal(_newest(scratch)[1]["learner"].params, state["learner"].params)
  assert "init_from" not in run_dir.read_info(scratch)


def test_keep_chooses_the_parts(origin, tmp_path):
  _, state = _newest(origin)
  run = str(tmp_path / "opt")
  assert _train(["--steps", "50", "--seed", "2", "--logdir", run, "--init-from", origin,
                 "--init-keep", "params,opt_state"]) == 0
  _, new = _newest(run)
  assert _equal(new["learner"].params, state["learner"].params)
  assert _equal(new["learner"].opt_state, state["learner"].opt_state)
  # The target network was not kept: the new run's own initialisation (its seed's).
  assert not _equal(new["learner"].target_params, state["learner"].target_params)
  assert int(new["learner"].steps) == 0


def test_replay_is_carried_with_the_new_runs_own_sampling(origin, tmp_path):
  _, state = _newest(origin)
  spec = spec_lib.RunSpec.from_args(cli.build_parser().parse_args(
      ["train"] + SMALL + ["--seed", "3", "--logdir", str(tmp_path / "r"), "--init-from",
                           origin, "--init-keep", "replay,params"]))
  assert spec.init_from.keep == ("params", "replay")
  learner, client = warm_start._new_learner(spec.agent, spec.env, spec.seed,
                                            spec.make_builder().config)
  rng_before = client.state()["rng"]
  spec.init_from.apply(learner, client)
  table = spec.make_builder().config.replay_table_name
  theirs, ours = state["replay_state"]["tables"][table], client.state()["tables"][table]
  assert client.server_info()[table].current_size == 400 - 2  # n_step 3: 2 pending
  assert _equal(ours, theirs)
  assert client.state()["rng"] == rng_before != state["replay_state"]["rng"]
  assert _equal(learner.save().params, state["learner"].params)


def test_a_mismatched_network_is_refused_in_one_line_naming_the_layer(origin, tmp_path,
                                                                     capsys):
  run = str(tmp_path / "bad")
  code = _train(["--steps", "50", "--logdir", run, "--init-from", origin,
                 "--set", "hidden_sizes=[16,32]"])
  err = capsys.readouterr().err
  assert code == 2
  assert err == (f"actorq: error: --init-from {origin}: params: layer 'dense_1' (b) is "
                 "float32[16] in the origin and float32[32] in this run; a warm start "
                 "needs the same layer shapes (nothing was written)\n")
  assert not os.path.exists(run)


def test_other_refusals(origin, tmp_path):
  def refused(argv, small=SMALL):
    with pytest.raises(core.UsageError) as e:
      spec_lib.RunSpec.from_args(cli.build_parser().parse_args(["train"] + small + argv))
    return str(e.value)

  assert refused(["--init-from", origin, "--agent", "ppo"], small=[]) == (
      f"--init-from {origin}: its agent is 'dqn', this run's 'ppo'; a warm start needs the "
      "same agent (--agent)")
  assert refused(["--init-from", origin, "--init-keep", "params,moments"]) == (
      "--init-keep params,moments: unknown part 'moments'; allowed: a comma-separated list "
      "of params, target, opt_state, replay")
  assert refused(["--init-keep", "params"]) == (
      "--init-keep needs --init-from RUN (the run whose state it keeps)")
  assert refused(["--init-from", origin, "--init-keep", "replay", "--launch", "local_mt"]
                 ).startswith("--init-keep replay needs --launch local")
  assert refused(["--init-from", str(tmp_path)]) == (
      f"--init-from {tmp_path}: {tmp_path} is not a run directory of 'actorq train' "
      "(no run.json in it or its parent)")
  assert refused(["--resume", origin, "--init-from", origin], small=[]).startswith(
      "--init-from starts a new run")
  # A different environment variant with the same shapes is allowed (the point of it).
  spec = spec_lib.RunSpec.from_args(cli.build_parser().parse_args(
      ["train"] + SMALL + ["--init-from", origin, "--set", "learning_rate=0.0003",
                           "--logdir", str(tmp_path / "ok")]))
  assert spec.init_from.run == origin


def test_run_json_and_argv_round_trip(origin, tmp_path):
  ckpt, _ = _newest(origin)
  spec = spec_lib.RunSpec.from_args(cli.build_parser().parse_args(
      ["train"] + SMALL + ["--init-from", origin, "--init-keep", "target,params",
                           "--logdir", str(tmp_path / "x")]))
  assert spec_lib.RunSpec.from_json(json.loads(json.dumps(spec.to_json())),
                                    logdir=spec.logdir) == spec
  argv = spec.to_argv()
  assert argv[argv.index("--init-from") + 1] == ckpt  # pinned to the checkpoint it used
  again = spec_lib.RunSpec.from_args(cli.build_parser().parse_args(["train"] + argv))
  assert again == spec
  assert spec.build().init_from == spec.init_from


@pytest.mark.slow
def test_distributed_learner_node_starts_from_the_origin(origin, tmp_path):
  _, state = _newest(origin)
  run = str(tmp_path / "mt")
  assert _train(["--steps", "60", "--seed", "4", "--logdir", run, "--init-from", origin,
                 "--launch", "local_mt", "--num-actors", "1", "--eval-every", "60",
                 "--set", "min_replay_size=5000"]) == 0
  _, new = _newest(run)
  assert int(new["learner_steps"]) == 0  # replay never reached min_replay_size
  assert _equal(new["learner"].params, state["learner"].params)
  assert _equal(new["learner"].target_params, state["learner"].target_params)
  assert run_dir.read_info(run)["init_from"]["run"] == origin
