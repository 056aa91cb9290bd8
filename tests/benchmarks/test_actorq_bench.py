"""Smoke-level checks of `actorq bench`: real (tiny) instrumented runs in-process, the
files, table and plots they produce, and the CLI's input errors. No speed is asserted."""
import csv
import math
import time

import pytest

from actorq.benchmarks import actorq_bench as ab
from actorq.cli import main as cli
from actorq.components import profiling, provenance

TINY = {"kind": "train", "agent": "dqn", "env": "gym:CartPole-v1", "steps": 400,
        "eval_every": 200, "eval_episodes": 2, "target": 20.0, "acting_steps": 100,
        "overrides": {"min_replay_size": 100, "hidden_sizes": [32, 32], "batch_size": 32}}


@pytest.fixture(scope="module")
def tiny_runs():
  runs = []
  for precision in ("fp32", "int8"):
    r = ab.run_training(dict(TINY, precision=precision, seed=0))
    r["process_wall_seconds"] = 1.0
    r["energy_j"] = r["cpu_seconds"] * 5.0
    r["energy_j_per_1k_actor_steps"] = 1e3 * r["energy_j"] / r["actor_steps"]
    runs.append(r)
  return runs


def _finite_positive(x):
  return isinstance(x, (int, float)) and math.isfinite(x) and x > 0


@pytest.mark.slow
def test_run_measures_positive_finite_figures(tiny_runs):
  for r in tiny_runs:
    assert r["actor_steps"] == 400, r["actor_steps"]
    # min_replay 100, batch 32, samples_per_insert 32 -> one learner step per actor step
    # once the table holds 100 transitions (the 3-step adder lags a few steps behind).
    assert 280 <= r["learner_steps"] <= 301, r["learner_steps"]
    for k in ("train_seconds", "actor_steps_per_s", "actor_only_steps_per_s",
              "acting_steps_per_s", "learner_steps_per_s", "learner_only_steps_per_s",
              "cpu_seconds", "payload_bytes", "pulls"):
      assert _finite_positive(r[k]), (k, r[k])
    for c in ("env_step", "inference", "adder", "load", "waiting", "pull_transfer", "deserialise"):
      assert _finite_positive(r["actor_us"][c]), (c, r["actor_us"][c])
    assert r["actor_us"]["other"] >= 0, r["actor_us"]
    for c in ab.LEARNER_COMPONENTS:
      assert _finite_positive(r["learner_us"][c]), (c, r["learner_us"][c])
    # The actor's own components plus "other" add up to the training wall-clock.
    total = sum(r["actor_us"][c] for c in ab.ACTOR_COMPONENTS) * r["actor_steps"] / 1e6
    assert total == pytest.approx(r["train_seconds"], rel=1e-6), r["actor_us"]
    assert [c["actor_steps"] for c in r["curve"]] == [200, 400]
    assert r["curve"][0]["train_seconds"] < r["curve"][1]["train_seconds"] <= r["train_seconds"]


@pytest.mark.slow
def test_payload_bytes_follow_precision(tiny_runs):
  fp32, int8 = tiny_runs
  # 4-32-32-3 MLP (DQN's default dueling head: [V, A_1, A_2]): 1,315 fp32 parameters
  # = 5,260 bytes.
  assert fp32["payload_bytes"] == 4 * (4 * 32 + 32 + 32 * 32 + 32 + 32 * 3 + 3)
  assert int8["payload_bytes"] < fp32["payload_bytes"] / 2


@pytest.mark.slow
def test_files_plots_and_table(tiny_runs, tmp_path):
  peers = [ab.peer_acting(dict(TINY, kind="peer", seed=0))]
  assert ("acting_steps_per_s" in peers[0] and peers[0]["acting_steps_per_s"] > 0) or (
      peers[0]["unavailable"].strip())
  meta = {"agent": "dqn", "env": TINY["env"], "seeds": [0], "steps": 400, "target": 20.0,
          "eval_episodes": 2, "watts_per_core": 5.0, "watts_per_gpu": 300.0,
          "precisions": ["fp32", "int8"],
          "machine": provenance.machine_info()}
  summary = ab.summarize(tiny_runs, ("fp32", "int8"))
  ab.write_files(str(tmp_path), tiny_runs, peers, summary, meta)
  paths = ab.plot(str(tmp_path), tiny_runs, peers, summary, meta)
  for name in ("returns_vs_wallclock.png", "breakdown.png", "throughput.png"):
    with open(tmp_path / name, "rb") as f:
      assert f.read(8) == b"\x89PNG\r\n\x1a\n"
  assert len(paths) == 3
  with open(tmp_path / "runs.csv", newline="") as f:
    rows = list(csv.DictReader(f))
  assert [r["precision"] for r in rows] == ["fp32", "int8"]
  assert all(float(r["actor_steps_per_s"]) > 0 for r in rows)
  with open(tmp_path / "breakdown.csv", newline="") as f:
    rows = list(csv.DictReader(f))
  assert len(rows) == 2 * (len(ab.ACTOR_COMPONENTS) + len(ab.ASYNC_COMPONENTS)
                           + len(ab.LEARNER_COMPONENTS))
  table = ab.format_table(summary, peers, meta)
  lines = table.splitlines()
  assert lines[0].startswith("| precision |") and "peer Acme TF acting steps/s" in lines[0]
  assert [l.split("|")[1].strip() for l in lines[2:5]] == ["fp32", "int8", "int8/fp32"]
  ratio = lines[4].split("|")[5].strip()  # actor steps/s, int8/fp32
  expected = summary["int8"]["actor_steps_per_s"] / summary["fp32"]["actor_steps_per_s"]
  assert ratio == f"{expected:.2f}x"
  if "unavailable" in peers[0]:
    assert "peer (Acme 0.4.0 TF FeedForwardActor): unavailable: " in table
  assert "Energy assumption: 5 W per busy core" in table
  # The report can be rewritten from bench.json alone (actorq bench --render).
  assert not (tmp_path / "table.md").exists()
  _, rendered = ab.render(str(tmp_path))
  assert rendered == table and (tmp_path / "table.md").read_text() == table + "\n"


def test_late_return_is_the_mean_of_the_last_evaluations():
  run = {"curve": [{"episode_return": r} for r in (100.0, 900.0, 950.0, 700.0)]}
  assert ab.late_return(run) == pytest.approx((900.0 + 950.0 + 700.0) / 3)
  assert ab.late_return(run, evals=1) == 700.0
  assert math.isnan(ab.late_return({"curve": []}))


def test_jobs_are_interleaved():
  jobs = ab.jobs_for("dqn", "gym:CartPole-v1", ("fp32", "fp16", "int8"), (0, 1), 10, 5, 1, 1.0,
                     {}, 10)
  assert [(j["kind"], j.get("precision"), j["seed"]) for j in jobs] == [
      ("train", "fp32", 0), ("train", "fp16", 0), ("train", "int8", 0), ("peer", None, 0),
      ("train", "fp16", 1), ("train", "int8", 1), ("train", "fp32", 1), ("peer", None, 1)]


def test_timed_actor_counts_the_env_step_between_select_and_observe():
  class Inner:
    num_steps = 0

    def select_action(self, obs):
      return 0

    def observe(self, action, ts):
      pass

  actor = profiling.TimedActor(Inner())
  actor.select_action(None)
  time.sleep(0.02)
  actor.observe(0, None)
  assert actor.env_s >= 0.02 and actor.steps == 1
  actor.num_steps = 7
  assert actor._inner.num_steps == 7


@pytest.mark.parametrize("argv, message", [
    (["--precisions", "fp32,fp8"], "--precisions 'fp32,fp8': allowed precisions are fp32, fp16, bf16, int8"),
    (["--agent", "nope"], "unknown agent 'nope'"),
    (["--set", "hidden_size=[8]"], "unknown DQNConfig key 'hidden_size'"),
    (["--env", "gym:CartPole-v1", "--agent", "d4pg", "--target", "1"], "agent 'd4pg' cannot run on"),
])
def test_cli_bad_input_exits_2_and_writes_nothing(argv, message, tmp_path, capsys):
  logdir = tmp_path / "out"
  assert cli.main(["bench", "--logdir", str(logdir)] + argv) == 2
  err = capsys.readouterr().err.strip().splitlines()
  assert len(err) == 1 and message in err[0], err
  assert not logdir.exists()


def _fake_run(precision, seed, time_to_target):
  run = {f: 1.0 for f in ab.SUMMARY_FIELDS}
  run.update(precision=precision, seed=seed, time_to_target_s=time_to_target,
             actor_us={c: 1.0 for c in ab.ACTOR_COMPONENTS + ab.ASYNC_COMPONENTS},
             learner_us={c: 1.0 for c in ab.LEARNER_COMPONENTS},
             curve=[{"episode_return": 10.0}])
  return run


def test_a_run_that_never_reached_the_target_counts_as_not_reached():
  nan = float("nan")
  runs = [_fake_run("fp32", 0, 490.0), _fake_run("fp32", 1, nan),
          _fake_run("int8", 0, 470.0), _fake_run("int8", 1, 750.0), _fake_run("int8", 2, nan)]
  summary = ab.summarize(runs, ("fp32", "int8"))
  assert summary["fp32"]["time_to_target_s"] == math.inf  # median of (490, inf)
  assert summary["fp32"]["reached_target"] == 1
  assert summary["int8"]["time_to_target_s"] == 750.0  # median of (470, 750, inf)
  assert ab._ratio(750.0, math.inf) == "< 1x (fp32 not reached)"
  assert ab._ratio(math.inf, 750.0) == "> 1x (not reached)"
  assert ab._ratio(600.0, 300.0) == "2.00x"
