"""`actorq sweep`: resuming, bad input, and one cheap end-to-end sweep
(2 seeds x fp32,int8 of DQN on CartPole, 400 steps each) whose aggregate.json is
`aggregate.aggregate` of its own seeds.csv."""
import contextlib
import csv
import hashlib
import io
import json
import math
import os
import shutil

import pytest

from actorq.cli import main as cli
from actorq.components import aggregate as ag
from actorq.studies import sweep
from actorq.testing.cli import run_cli

TINY = ["--steps", "400", "--eval-every", "200", "--eval-episodes", "1",
        "--set", "min_replay_size=100", "--set", "hidden_sizes=[16]"]


def test_plan_rotates_the_precision_order_per_seed():
  assert sweep.plan(["fp32", "int8"], [0, 1, 2]) == [
      ("fp32", 0), ("int8", 0), ("int8", 1), ("fp32", 1), ("fp32", 2), ("int8", 2)]


def test_a_mixed_precision_run_directory_name_has_no_colon_or_comma():
  name = "mixed:fp16,int8"
  assert sweep.run_name("int8", 3) == "int8-s3"
  assert sweep.run_name(name, 3) == "mixed-" + hashlib.sha1(name.encode()).hexdigest()[:8] + "-s3"
  assert sweep.run_name(name, 3) != sweep.run_name("mixed:int8,fp16", 3)
  assert sweep.precisions_text(["fp32", "int8"]) == "fp32,int8"
  assert sweep.precisions_text(["fp32", name]) == "fp32;mixed:fp16,int8"


def _write_run(run_dir, steps, info):
  os.makedirs(run_dir)
  with open(os.path.join(run_dir, "eval.csv"), "w", encoding="utf-8") as f:
    f.write("actor_steps,episode_return,episode_return_std\n")
    f.writelines(f"{s},{s / 10},0.0\n" for s in steps)
  with open(os.path.join(run_dir, "run.json"), "w", encoding="utf-8") as f:
    json.dump(info, f)


def test_a_run_is_reused_only_when_finished_with_the_sweep_settings(tmp_path):
  settings = {"agent": "dqn", "env": "gym:CartPole-v1", "precisions": ["fp32"], "seeds": [0],
              "steps": 400, "eval_every": 200, "eval_episodes": 1,
              "configs": {"fp32": {"actor_precision": "fp32", "batch_size": 32}}}
  info = {"agent": "dqn", "env": "gym:CartPole-v1", "seed": 0,
          "config": {"actor_precision": "fp32", "batch_size": 32},
          "train": {"steps": 400, "eval_every": 200, "eval_episodes": 1}}
  run_dir = str(tmp_path / "fp32-s0")
  _write_run(run_dir, [200, 400], info)
  assert sweep.finished(run_dir, 400) and not sweep.finished(run_dir, 600)
  assert sweep.mismatch(run_dir, settings, "fp32", 0) is None
  sweep.check_reusable(str(tmp_path), settings)
  interrupted = str(tmp_path / "int8-s0")
  _write_run(interrupted, [200], info)
  assert not sweep.finished(interrupted, 400)
  # A run finished at fewer steps than the sweep asks is a finished run of other settings:
  # refused (it was deleted and started again), not taken for an interrupted one.
  with pytest.raises(ValueError, match=r"fp32-s0 is a finished run of other settings: train "
                                       r"steps=400 \(sweep: steps=600\); give a new --logdir"):
    sweep.check_reusable(str(tmp_path), dict(settings, steps=600))
  assert not sweep.finished_as_written(interrupted)
  # Another batch size in the finished run: refused, naming the field and both values.
  settings["configs"]["fp32"]["batch_size"] = 64
  with pytest.raises(ValueError, match=r"config batch_size=32 \(sweep: batch_size=64\)"):
    sweep.check_reusable(str(tmp_path), settings)
  other = tmp_path / "other"
  (other / "fp32-s0").mkdir(parents=True)
  (other / "fp32-s0" / "notes.txt").write_text("mine")
  with pytest.raises(ValueError, match="not a run directory of 'actorq train'"):
    sweep.check_reusable(str(other), settings)
  # A train run's own directory is not a sweep's (issue 42: one run per directory).
  with pytest.raises(ValueError, match=r"fp32-s0 is the run directory of an 'actorq train' "
                                       r"run \(it holds run.json\); give a new --logdir"):
    sweep.check_reusable(run_dir, settings)


def test_a_record_restores_finished_runs_into_a_fresh_sweep_directory(tmp_path):
  """A sweep spans sessions from what is committed: the record keeps each finished run's
  run.json, eval.csv and final_eval.json, and a new sweep directory gets them back."""
  settings = {"agent": "dqn", "env": "gym:CartPole-v1", "precisions": ["fp32", "int8"],
              "seeds": [0, 1], "steps": 400, "eval_every": 200, "eval_episodes": 1,
              "reference": "fp32",
              "configs": {"fp32": {"actor_precision": "fp32"}, "int8": {"actor_precision": "int8"}}}
  info = {"agent": "dqn", "env": "gym:CartPole-v1", "seed": 0,
          "config": {"actor_precision": "fp32"},
          "train": {"steps": 400, "eval_every": 200, "eval_episodes": 1}}
  first, record = tmp_path / "session1", tmp_path / "docs" / "result"
  _write_run(str(first / "fp32-s0"), [200, 400], info)
  (first / "fp32-s0" / "final_eval.json").write_text('{"mean": {"fp32": 500.0}}')
  (first / "fp32-s0" / "checkpoints").mkdir()  # not recorded
  _write_run(str(first / "int8-s0"), [200], dict(info, config={"actor_precision": "int8"}))
  sweep.keep(str(first), str(record), "fp32-s0")
  sweep.write_protocol(str(record), {"margin": 50.0, "declared": "day 1"})
  assert sorted(os.listdir(record / "runs" / "fp32-s0")) == ["eval.csv", "final_eval.json",
                                                             "run.json"]
  fresh = tmp_path / "session2"
  fresh.mkdir()
  _write_run(str(fresh / "fp32-s0"), [200], info)  # an unfinished attempt: replaced
  assert sweep.restore(settings, str(fresh), str(record), log=lambda m: None) == ["fp32-s0"]
  assert sweep.finished(str(fresh / "fp32-s0"), 400)
  assert (fresh / "fp32-s0" / "final_eval.json").read_text() == '{"mean": {"fp32": 500.0}}'
  sweep.check_reusable(str(fresh), settings)  # the restored run has the sweep's settings
  # The first declaration comes with the runs: the same margin is kept, another refused.
  assert sweep.declare(str(fresh), dict(settings, margin=50.0))["declared"] == "day 1"
  with pytest.raises(ValueError, match="declares margin 50.0"):
    sweep.declare(str(fresh), dict(settings, margin=20.0))
  # Restoring again changes nothing (the run is finished there now).
  assert sweep.restore(settings, str(fresh), str(record), log=lambda m: None) == []


def test_the_margin_is_declared_at_the_first_start(tmp_path):
  settings = {"agent": "dqn", "env": "gym:CartPole-v1", "precisions": ["fp32", "int8"],
              "seeds": [0, 1], "steps": 400, "eval_every": 200, "eval_episodes": 1,
              "reference": "fp32", "margin": 50.0, "target": None}
  declared = sweep.declare(str(tmp_path), settings)
  assert declared["margin"] == 50.0 and "--margin 50" in declared["command"]
  assert sweep.declare(str(tmp_path), dict(settings, seeds=[0, 1, 2])) == declared
  with pytest.raises(ValueError, match=r"declares margin 50.0 .* this start gives 25.0"):
    sweep.declare(str(tmp_path), dict(settings, margin=25.0))


def test_num_envs_reaches_each_run_and_its_reuse_check(tmp_path):
  settings = {"agent": "dqn", "env": "gym:CartPole-v1", "precisions": ["fp32"], "seeds": [0],
              "steps": 400, "eval_every": 200, "eval_episodes": 1, "num_envs": 8,
              "configs": {"fp32": {"actor_precision": "fp32"}}}
  argv = sweep.train_argv(settings, "fp32", 0, "/r")
  assert argv[argv.index("--num-envs") + 1] == "8"
  assert "--num-envs 8" in sweep.command(settings)
  info = {"agent": "dqn", "env": "gym:CartPole-v1", "seed": 0,
          "config": {"actor_precision": "fp32"},
          "train": {"steps": 400, "eval_every": 200, "eval_episodes": 1}}  # a B = 1 run
  run_dir = str(tmp_path / "fp32-s0")
  _write_run(run_dir, [200, 400], info)
  assert "num_envs=None" in sweep.mismatch(run_dir, settings, "fp32", 0)
  settings["num_envs"] = 1  # B = 1: no flag, and the B = 1 run is the sweep's
  assert "--num-envs" not in sweep.train_argv(settings, "fp32", 0, "/r")
  assert sweep.mismatch(run_dir, settings, "fp32", 0) is None


def test_a_sweep_of_distributed_runs_passes_its_launch_and_reuses_runs_past_the_limit(tmp_path):
  settings = {"agent": "dqn", "env": "gym:CartPole-v1", "precisions": ["fp32"], "seeds": [0],
              "steps": 10_000, "eval_every": 5_000, "eval_episodes": 1, "launch": "local_mp",
              "num_actors": 3, "configs": {"fp32": {"actor_precision": "fp32"}}}
  argv = sweep.train_argv(settings, "fp32", 0, "/r")
  assert argv[argv.index("--launch"):argv.index("--launch") + 4] == [
      "--launch", "local_mp", "--num-actors", "3"]
  assert "--launch local_mp --num-actors 3" in sweep.command(settings)
  info = {"agent": "dqn", "env": "gym:CartPole-v1", "seed": 0,
          "config": {"actor_precision": "fp32"},
          "train": {"steps": 10_000, "eval_every": 5_000, "eval_episodes": 1,
                    "launch": "local_mp", "num_actors": 3}}  # as `actorq train` writes it
  run_dir = str(tmp_path / "fp32-s0")
  _write_run(run_dir, [5_048, 10_020], info)  # the evaluator node: a little past each step
  assert sweep.finished(run_dir, 10_000) and not sweep.finished(run_dir, 10_100)
  assert sweep.mismatch(run_dir, settings, "fp32", 0) is None
  single = dict(settings, launch="local")
  assert "--launch" not in sweep.train_argv(single, "fp32", 0, "/r")
  assert sweep.mismatch(run_dir, single, "fp32", 0) == (
      "train launch='local_mp', num_actors=3 (sweep: launch=None, num_actors=None)")


@pytest.mark.parametrize("actor_steps,expected", [
    (5_000, 5_000), (5_048, 5_000), (9_999, 5_000), (10_020, 10_000), (99_990, 95_000),
    (100_000, 100_000), (102_067, 100_000)])
def test_evaluations_are_aligned_on_their_nominal_step(actor_steps, expected):
  assert sweep.nominal_step(actor_steps, 5_000, 100_000) == expected


def test_a_failed_run_is_reported_with_its_log_and_the_others_still_run(tmp_path, monkeypatch):
  import sys
  ran = []

  def fake_argv(settings, precision, seed, run_dir):
    ran.append((precision, seed))
    code = 3 if (precision, seed) == ("int8", 0) else 0
    return [sys.executable, "-c", f"print('boom {precision} {seed}'); raise SystemExit({code})"]

  monkeypatch.setattr(sweep, "train_argv", fake_argv)
  settings = {"precisions": ["fp32", "int8"], "seeds": [0], "steps": 400}
  failures = sweep.run_all(settings, str(tmp_path), jobs=1, log=lambda m: None)
  assert ran == [("fp32", 0), ("int8", 0)]
  # fp32 exited 0 but wrote no final evaluation: a failure too.
  assert len(failures) == 2
  assert "int8-s0 failed (exit 3)" in failures[1] and "boom int8 0" in failures[1]
  assert "fp32-s0 failed (exit 0 but no evaluation at step 400 in its eval.csv)" in failures[0]


_run = run_cli


@pytest.mark.parametrize("argv,fragment", [
    (["--agent", "nope"], "unknown agent 'nope'; allowed: "),
    (["--env", "gym:NoSuchEnv-v9"], "unknown Gymnasium environment 'NoSuchEnv-v9'"),
    (["--env", "dmc:cartpole-balance"], "DQN needs discrete actions"),
    (["--precisions", "fp32,int3"], "allowed precisions are fp32, fp16, bf16, int8"),
    (["--precisions", "fp32;mixed:fp16,int8,int8"], "has 2 parameter layers"),
    (["--precisions", "int8,int8"], "repeats a precision"),
    (["--seeds", "9-3"], "--seeds 9-3: range '9-3' goes down"),
    (["--seeds", "0", "0"], "seed 0 is given twice"),
    (["--set", "no_such_field=1"], "no_such_field"),
    (["--jobs", "0"], "--jobs must be a positive integer"),
    (["--num-envs", "0"], "--num-envs must be a positive integer"),
    (["--target", "high"], "--target must be a number"),
    (["--margin", "0"], "--margin 0: the equivalence margin must be > 0"),
    (["--num-actors", "2"], "--num-actors needs --launch local_mt or local_mp"),
    (["--launch", "hosts"], "argument --launch: invalid choice: 'hosts'"),
])
def test_bad_input_is_one_line_exit_2_nothing_written(argv, fragment, capsys, tmp_path):
  logdir = tmp_path / "sweep"
  code, _, err = _run(["sweep"] + TINY + argv + ["--logdir", str(logdir)], capsys)
  assert code == 2
  assert fragment in err
  assert err.strip().count("\n") == 0 and "Traceback" not in err
  assert not logdir.exists()


def test_unwritable_logdir_and_render_without_sweep(capsys, tmp_path):
  blocker = tmp_path / "file"
  blocker.write_text("x")
  code, _, err = _run(["sweep"] + TINY + ["--logdir", str(blocker / "sub")], capsys)
  assert code == 2 and "is not a writable directory" in err
  assert err.strip().count("\n") == 0
  code, _, err = _run(["sweep", "--render", str(tmp_path)], capsys)
  assert code == 2 and "no sweep.json there" in err


@pytest.fixture(scope="module")
def tiny_sweep(tmp_path_factory):
  """The end-to-end sweep (seeds 0-1 x fp32,int8, TINY), run once per module: its test
  checks it, and the per-layer policy sweep reuses its finished fp32-s0 run (the same
  settings), so that run is trained once. (argv, logdir, record, exit status, stdout, stderr)."""
  root = tmp_path_factory.mktemp("tiny_sweep")
  logdir, record = root / "sweep", root / "record"
  argv = ["sweep", "--seeds", "0-1", "--precisions", "fp32,int8", "--jobs", "2",
          "--logdir", str(logdir), "--margin", "50", "--record", str(record)] + TINY
  out, err = io.StringIO(), io.StringIO()
  with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
    try:
      code = cli.main(argv)
    except SystemExit as e:
      code = e.code
  return argv, logdir, record, code, out.getvalue(), err.getvalue()


@pytest.mark.slow
def test_sweep_end_to_end_two_seeds_two_precisions(capsys, tiny_sweep):
  argv, logdir, record, code, out, err = tiny_sweep
  assert code == 0, err
  for name in ("sweep.json", "seeds.csv", "aggregate.csv", "aggregate.json", "curves.png",
               "table.md", "protocol.json"):
    assert (logdir / name).is_file(), name
  for name in ("sweep.json", "seeds.csv", "aggregate.json", "table.md", "protocol.json"):
    assert (record / name).read_bytes() == (logdir / name).read_bytes(), name
  assert (logdir / "curves.png").stat().st_size > 10_000
  with open(logdir / "seeds.csv", newline="", encoding="utf-8") as f:
    raw = list(csv.DictReader(f))
  assert sorted((r["precision"], r["seed"]) for r in raw) == [
      ("fp32", "0"), ("fp32", "1"), ("int8", "0"), ("int8", "1")]
  rows = sweep.read_seeds_csv(str(logdir / "seeds.csv"))
  data = json.loads((logdir / "sweep.json").read_text())
  for row in rows:  # each row is its run's eval.csv: two evaluations, the last at step 400
    run = next(r for r in data["runs"] if (r["precision"], r["seed"]) == (row["precision"],
                                                                          row["seed"]))
    returns = [e["episode_return"] for e in run["evaluations"]]
    assert [e["actor_steps"] for e in run["evaluations"]] == [200, 400]
    assert row["final_return"] == returns[-1] > 0
    assert row["last3_return"] == pytest.approx(sum(returns) / 2)
    assert row["evaluations"] == 2
  assert data["settings"]["target"] == 475.0  # CartPole-v1's reward_threshold
  assert data["settings"]["configs"]["int8"]["actor_precision"] == "int8"
  assert data["settings"]["configs"]["fp32"]["hidden_sizes"] == [16]
  result = json.loads((logdir / "aggregate.json").read_text())
  cross = result.pop("cross_precision")
  assert result == json.loads(json.dumps(ag.aggregate(rows, target=475.0, margin=50.0)))
  result["cross_precision"] = cross
  # The 2x2: every run's final parameters at fp32 and at its own precision, 20 episodes.
  for row in rows:
    final = json.loads((logdir / row["run_dir"] / "final_eval.json").read_text())
    assert sorted(final["returns"]) == sorted({"fp32", row["precision"]})
    assert len(final["returns"]["fp32"]) == 20
    assert row["final_at_fp32"] == pytest.approx(sum(final["returns"]["fp32"]) / 20)
    assert row["final_at_own"] == final["mean"][row["precision"]]
    assert sorted(os.listdir(record / "runs" / row["run_dir"])) == [
        "eval.csv", "final_eval.json", "run.json"]
  assert cross["precisions"]["fp32"]["n"] == 2 and set(cross["deployment"]) == {"fp32", "int8"}
  assert cross["deployment"]["fp32"]["mean_difference"] == 0.0  # fp32 at fp32, twice
  verdict = result["comparisons"]["int8"]["final_return"]["tost"]["verdict"]
  assert verdict in ag.VERDICTS and "verdict at margin 50" in out
  assert "actors during training" in out
  for p in ("fp32", "int8"):
    for metric in ag.METRICS:
      for name in ag.STATISTICS:
        e = result["precisions"][p][metric][name]
        assert all(math.isfinite(e[k]) for k in ("value", "ci_low", "ci_high"))
        assert e["ci_low"] <= e["value"] <= e["ci_high"]
  assert result["comparisons"]["int8"]["seeds"] == [0, 1]
  poi = result["comparisons"]["int8"]["final_return"]["probability_of_improvement"]
  assert 0.0 <= poi["ci_low"] <= poi["value"] <= poi["ci_high"] <= 1.0
  assert "int8 vs fp32" in out and "final IQM [95% CI]" in out
  assert (logdir / "table.md").read_text().strip() in out

  # Run again: every run is reused (no child trains), and the report is the same.
  mtimes = {p: os.path.getmtime(logdir / p / "eval.csv") for p in ("fp32-s0", "int8-s1")}
  code, out, _ = _run(argv, capsys)
  assert code == 0 and out.count("finished before, reused") == 4
  assert mtimes == {p: os.path.getmtime(logdir / p / "eval.csv") for p in mtimes}
  assert json.loads((logdir / "aggregate.json").read_text()) == result
  # --render rewrites the report from sweep.json alone.
  (logdir / "aggregate.json").unlink()
  code, out, _ = _run(["sweep", "--render", str(logdir)], capsys)
  assert code == 0 and json.loads((logdir / "aggregate.json").read_text()) == result


@pytest.mark.slow
def test_sweep_with_a_per_layer_precision_policy(capsys, tmp_path, tiny_sweep):
  """The policy's run is trained and compared with fp32 seed by seed; the fp32 seed-0 run
  of the same settings is `tiny_sweep`'s, copied in and reused (not trained again)."""
  name = "mixed:fp16,int8"  # TINY's DQN: obs [4] -> 16 -> [V, A_1, A_2], two layers
  logdir = tmp_path / "sweep"
  shutil.copytree(tiny_sweep[1] / "fp32-s0", logdir / "fp32-s0")
  argv = ["sweep", "--seeds", "0", "--precisions", f"fp32;{name}", "--logdir", str(logdir)]
  code, out, err = _run(argv + TINY, capsys)
  assert code == 0, err
  assert "fp32-s0: finished before, reused" in out
  run = logdir / sweep.run_name(name, 0)
  info = json.loads((run / "run.json").read_text())
  assert info["config"]["actor_precision"] == name
  with open(run / "eval.csv", newline="", encoding="utf-8") as f:
    evals = list(csv.DictReader(f))
  assert {r["actor_precision"] for r in evals} == {name}
  assert [int(r["actor_steps"]) for r in evals] == [200, 400]
  rows = {r["precision"]: r for r in sweep.read_seeds_csv(str(logdir / "seeds.csv"))}
  assert rows[name]["final_return"] == float(evals[-1]["episode_return"])
  result = json.loads((logdir / "aggregate.json").read_text())
  assert set(result["comparisons"]) == {name}  # compared with fp32, seed by seed
  assert f"{name} vs fp32" in out
  assert "--precisions 'fp32;mixed:fp16,int8'" in (logdir / "table.md").read_text()


@pytest.mark.slow
def test_sweep_of_launchpad_runs_end_to_end(capsys, tmp_path):
  """Two seeds of DQN as Launchpad programs in threads (one actor node each): each run's
  last evaluation is at or past its limit, and the curves and table are drawn from them.
  (Not `isolated`: each program's threads run in the sweep's `actorq train` child, not in
  this process.)"""
  logdir = tmp_path / "sweep"
  argv = ["sweep", "--seeds", "0-1", "--precisions", "fp32", "--launch", "local_mt",
          "--num-actors", "1", "--logdir", str(logdir)] + TINY
  code, out, err = _run(argv, capsys)
  assert code == 0, err
  data = json.loads((logdir / "sweep.json").read_text())
  assert (data["settings"]["launch"], data["settings"]["num_actors"]) == ("local_mt", 1)
  for run in data["runs"]:
    steps = [e["actor_steps"] for e in run["evaluations"]]
    assert steps[-1] >= 400 and steps == sorted(steps)
    info = json.loads((logdir / sweep.run_name("fp32", run["seed"]) / "run.json").read_text())
    assert (info["train"]["launch"], info["train"]["num_actors"]) == ("local_mt", 1)
  assert (logdir / "curves.png").stat().st_size > 10_000
  table = (logdir / "table.md").read_text()
  assert "each a Launchpad program (--launch local_mt, 1 actor node;" in table
  assert "a seed does not repeat them" in table and "final = the evaluation at or just past" in table
  assert "--launch local_mt --num-actors 1" in table
  # Run again: both runs are reused (nothing retrained), the same files come out.
  code, out, err = _run(argv, capsys)
  assert code == 0, err
  assert json.loads((logdir / "sweep.json").read_text())["runs"] == data["runs"]
