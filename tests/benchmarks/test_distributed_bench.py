"""`actorq bench --launch`: a real (tiny) local_mp program per precision, its measured
figures and files, and the command's input errors."""
import csv
import json
import math

import pytest

from actorq.benchmarks import distributed_bench as db
from actorq.cli import main as cli

NODES = {"replay/0", "counter/0", "learner/0", "actor/0", "evaluator/0", "limiter/0"}


def _positive_finite(x):
  return isinstance(x, (int, float)) and math.isfinite(x) and x > 0


@pytest.mark.slow
def test_local_mp_bench_measures_both_precisions(tmp_path, capsys):
  # 1,500 steps: the sampler snapshots every 2 s and needs two; on a fast CPU (AMD EPYC
  # family 26) a 400-step run once ended inside one period.
  out = tmp_path / "bench"
  assert cli.main(["bench", "--launch", "local_mp", "--num-actors", "1", "--precisions",
                   "fp32,int8", "--steps", "1500", "--eval-every", "750", "--eval-episodes", "1",
                   "--set", "hidden_sizes=[32]", "--set", "min_replay_size=100",
                   "--max-learner-ratio", "1000", "--logdir", str(out)]) == 0
  printed = capsys.readouterr().out
  assert "| precision | seed | actor steps/s |" in printed
  assert "learner step check passed: every run <= 1000x the single-process step" in printed
  data = json.loads((out / db.JSON_NAME).read_text())
  runs = {r["precision"]: r for r in data["runs"]}
  assert set(runs) == {"fp32", "int8"}
  for p, r in runs.items():
    for k in ("actor_steps_per_s", "learner_steps_per_s", "window_s", "run_actor_steps_per_s"):
      assert _positive_finite(r[k]), (p, k, r[k])
    # Bytes sent by the learner's PolicyServer: payload bytes x pulls served / window.
    sent = sum(s["payload_bytes"] * s["pulls"] for s in r["served"].values())
    assert sent > 0 and r["bytes_sent_per_s"] == pytest.approx(sent / r["window_s"], rel=1e-6)
    # The server counts the actor's pulls (and the evaluator's): snapshots are taken a few
    # milliseconds apart, so allow one pull of skew at each end of the window.
    assert r["served"][p]["pulls"] >= r["actor_us"][0]["pulls"] - 2, r["served"]
    assert set(r["cpu_seconds"]) == NODES
    assert all(_positive_finite(v) for v in r["cpu_seconds"].values()), r["cpu_seconds"]
    a = r["actor_us"][0]
    assert all(a[k] >= 0 for k in db.ACTOR_PARTS) and _positive_finite(a["cpu"]), a
    assert _positive_finite(a["inference"]) and _positive_finite(a["env_step"]), a
    assert _positive_finite(r["learner_us"]["update"]), r["learner_us"]
    assert r["waiting_side"] in ("actors (blocked on insert)", "learner (blocked on sample)",
                                 "neither")
    assert 0 <= r["inserts_blocked_frac"] <= 1.05 and 0 <= r["samples_blocked_frac"] <= 1.05
  assert runs["int8"]["served"]["int8"]["payload_bytes"] < (
      runs["fp32"]["served"]["fp32"]["payload_bytes"] / 2)
  with open(out / "breakdown.csv", encoding="utf-8") as f:
    nodes = {(row["precision"], row["node"]) for row in csv.DictReader(f)}
  assert nodes == {(p, n) for p in ("fp32", "int8") for n in NODES}
  assert (out / "table.md").read_text().startswith("| precision | seed |")
  assert (out / "runs.csv").exists()
  # The single-process learner step of this invocation, and each run's ratio to it (issue 40).
  ref = data["single_process_learner"]
  assert _positive_finite(ref["step_ms_mean"]) and ref["steps"] == 40, ref
  assert all(_positive_finite(ref[k]["step_ms_mean"]) for k in ("before", "after")), ref
  for r in runs.values():
    assert r["learner_step_ratio"] == pytest.approx(
        r["learner_us"]["update"] / 1e3 / ref["step_ms_mean"])
  assert "x the single-process step" in (out / "table.md").read_text()


@pytest.mark.parametrize("argv,fragment", [
    (["--launch", "hosts"], "argument --launch: invalid choice: 'hosts'"),
    (["--launch", "local_mp", "--num-actors", "0"], "--num-actors must be a positive integer"),
    (["--num-actors", "2"], "--num-actors needs --launch local_mp or local_mt"),
    (["--launch", "local_mp", "--num-envs", "1,4"], "--launch measures anew"),
    (["--launch", "local_mt", "--precisions", "fp32,int3"], "allowed precisions are"),
    (["--launch", "local_mt", "--learner-device", "gpu"], "--learner-device gpu"),
    (["--max-learner-ratio", "1.2"], "--max-learner-ratio needs --launch local_mp or local_mt"),
    (["--launch", "local_mp", "--max-learner-ratio", "0"],
     "--max-learner-ratio must be a positive"),
])
def test_bad_input_is_one_line_exit_2_and_writes_nothing(tmp_path, capsys, argv, fragment):
  out = tmp_path / "never"
  assert _exit_code(["bench"] + argv + ["--logdir", str(out)]) == 2
  err = capsys.readouterr().err
  assert err.count("\n") == 1 and fragment in err, err
  assert not out.exists()


def _exit_code(argv):
  """`cli.main`'s status; argparse's errors exit (status 2) from the parser itself."""
  try:
    return cli.main(argv)
  except SystemExit as e:
    return e.code


def test_time_at_steps_interpolates_between_polls():
  trace = [(10.0, 0.0), (12.0, 100.0), (14.0, 300.0)]
  assert db.time_at_steps(trace, 200.0) == pytest.approx(13.0)
  assert db.time_at_steps(trace, 0.0) == 10.0
  assert math.isnan(db.time_at_steps(trace, 301.0))


def _actor_profile(t, steps, pulls, unchanged, fetch_s, load_s):
  return {"time": t, "timings": {"actor": {
      "steps": steps, "env_s": 0.1 * steps / 1000, "inference_s": 0.2 * steps / 1000,
      "adder_s": 0.05 * steps / 1000, "update_s": fetch_s + load_s,
      "client": {"pulls": pulls, "unchanged": unchanged, "fetch_seconds": fetch_s,
                 "load_seconds": load_s}}}}


def test_an_on_policy_actors_version_checks_are_told_apart_from_its_payload_pulls():
  first = _actor_profile(100.0, 1000, 10, 6, 0.5, 0.1)
  last = _actor_profile(102.0, 2000, 35, 26, 1.0, 0.15)
  a = db.actor_breakdown(first, last, cpu_s=1.5)
  # 25 pulls in the window: 20 found the version current, 5 fetched a payload.
  assert (a["pulls"], a["version_checks"]) == (5.0, 20.0)
  assert a["load"] == pytest.approx(50.0) and a["update_other"] == pytest.approx(500.0)
  assert (a["pulls_total"], a["pull_s_total"]) == (35.0, 1.15)  # every call: the model's cost
  assert a["cpu"] == pytest.approx(1500.0) and a["steps"] == 1000.0


def _run(precision, update_us):
  return {"precision": precision, "seed": 0,
          "learner_us": {"sample": 1000.0, "update": update_us, "publish": 0.0, "idle": 0.0,
                         "cpu": 2 * update_us}}


def test_learner_step_lines_give_the_ratio_to_the_single_process_step():
  data = {"meta": {"launch": "local_mp"}, "runs": [_run("fp32", 120_000.0)],
          "single_process_learner": {"step_ms_mean": 100.0, "step_ms_median": 99.0,
                                     "cpu_ms_mean": 180.0, "steps": 20}}
  assert db.learner_step_ratio(data["runs"][0], data["single_process_learner"]) == (
      pytest.approx(1.2))
  lines = db.learner_step_lines(data)
  assert "local_mp node vs one process" in lines[0]
  assert lines[1].strip().startswith("fp32 seed 0: update 120.0 ms") and "1.20x" in lines[1]
  failed = dict(data, single_process_learner={"error": "exit 1: boom"})
  assert db.learner_step_lines(failed) == ["Single-process learner step: not measured "
                                           "(exit 1: boom)"]
  assert math.isnan(db.learner_step_ratio(data["runs"][0], failed["single_process_learner"]))
  # A benchmark written before the reference existed renders as before.
  assert db.learner_step_lines({"meta": data["meta"], "runs": data["runs"]}) == []


def test_learner_step_check_fails_runs_above_the_limit_or_unmeasured():
  ref = {"step_ms_mean": 100.0, "step_ms_median": 99.0, "cpu_ms_mean": 180.0, "steps": 20}
  data = {"runs": [_run("fp32", 120_000.0), _run("int8", 90_000.0)],
          "single_process_learner": ref}
  assert db.learner_step_check(data, 1.2) == []
  assert db.learner_step_check(data, 1.1) == ["fp32 seed 0: learner step 1.20x > 1.10x"]
  assert db.learner_step_check(data, 0.8) == ["fp32 seed 0: learner step 1.20x > 0.80x",
                                              "int8 seed 0: learner step 0.90x > 0.80x"]
  unmeasured = dict(data, single_process_learner={"error": "exit 1: boom"})
  assert db.learner_step_check(unmeasured, 10.0) == [
      f"{p} seed 0: learner step not measured (no single-process reference)"
      for p in ("fp32", "int8")]


def test_bench_with_a_failed_learner_step_check_stops_with_exit_1(tmp_path, capsys,
                                                                   monkeypatch):
  data = {"runs": [_run("fp32", 150_000.0)],
          "single_process_learner": {"step_ms_mean": 100.0}}
  monkeypatch.setattr(db, "run_bench", lambda *a, **k: (data, "| table |"))
  argv = ["bench", "--launch", "local_mp", "--num-actors", "1", "--precisions", "fp32",
          "--logdir", str(tmp_path / "b")]
  assert _exit_code(argv + ["--max-learner-ratio", "1.2"]) == 1
  err = capsys.readouterr().err
  assert err == ("actorq: stopped: learner step check failed (--max-learner-ratio 1.2): "
                 "fp32 seed 0: learner step 1.50x > 1.20x\n")
  assert _exit_code(argv + ["--max-learner-ratio", "1.5"]) == 0
  assert "learner step check passed: every run <= 1.5x" in capsys.readouterr().out


def test_the_reference_is_the_mean_of_the_measurements_before_and_after():
  from actorq.benchmarks import learner_step
  a = {"step_ms_mean": 100.0, "step_ms_median": 90.0, "cpu_ms_mean": 150.0, "steps": 20}
  b = {"step_ms_mean": 120.0, "step_ms_median": 110.0, "cpu_ms_mean": 170.0, "steps": 20}
  ref = learner_step.combine(a, b)
  assert (ref["step_ms_mean"], ref["step_ms_median"], ref["cpu_ms_mean"], ref["steps"]) == (
      110.0, 100.0, 160.0, 40)
  assert ref["before"] == a and ref["after"] == b
  assert learner_step.combine({"error": "x"}, b)["step_ms_mean"] == 120.0
  assert learner_step.combine({"error": "x"}, {"error": "y"}) == {"error": "x"}
