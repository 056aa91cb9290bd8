"""The int8-regime report (`actorq.benchmarks.int8_regimes`) against hand-computed values."""
import json
import os
import time
import types

import pytest

from actorq.benchmarks import int8_regimes as ir
from actorq.cli.benchmarks import int8_regimes as ir_cli
from actorq.benchmarks import scaling
from actorq.components import profiling

# t_a: fp32 2,000 us, int8 1,000 us per actor step (waiting is not on t_a); t_L = 0.1 s.
ACTOR_US = {"fp32": dict(env_step=300.0, inference=1000.0, adder=500.0, load=0.0, other=200.0,
                         waiting=9999.0),
            "int8": dict(env_step=300.0, inference=100.0, adder=500.0, load=50.0, other=50.0,
                         waiting=9999.0)}


def single_run(precision, seed, actor_steps, learner_steps, measured):
  return {"kind": "train", "precision": precision, "seed": seed, "actor_steps": actor_steps,
          "learner_steps": learner_steps, "actor_steps_per_s": measured,
          "actor_us": dict(ACTOR_US[precision]),
          "learner_us": {"sample": 1000.0, "update": 99000.0, "publish": 0.0}}


def distributed_run(precision, seed, spi, measured, num_actors=2):
  cpu = {"fp32": 2100.0, "int8": 1050.0}[precision]  # us per step, pulls included
  return {"precision": precision, "seed": seed, "num_actors": num_actors, "launch": "local_mp",
          "actor_steps_per_s": measured, "learner_steps_window": 100.0,
          "variable_update_period": 1000, "batch_size": 256, "samples_per_insert": spi,
          "actor_us": [{"cpu": cpu, "pulls_total": 4.0, "pull_s_total": 0.4}] * num_actors,
          "learner_us": {"update": 99000.0, "publish": 1000.0, "cpu": 100000.0},
          "cpu_cores": {"replay/0": 0.05, "evaluator/0": 0.1, "counter/0": 0.05,
                        "limiter/0": 0.05, "learner/0": 1.5}}


def workload(launch, spi, runs, name="d4pg", on_policy=False, batch=256):
  return ir.Workload(name, launch, tuple(runs), batch, spi, on_policy, f"/runs/{launch}{spi}")


def test_serial_model_is_the_sum_of_the_loop_and_the_inline_learner_steps():
  costs = ir.serial_costs([single_run("fp32", 0, 4000, 375, 1.0),
                           single_run("int8", 0, 4000, 375, 1.0)])
  assert costs.actor_s == pytest.approx({"fp32": 0.002, "int8": 0.001})
  assert costs.learner_s == pytest.approx(0.1)
  # N / (N t_a + L t_L) = 4000 / (8 + 37.5) and 4000 / (4 + 37.5)
  assert ir.predict_serial(costs, "fp32", 4000, 375) == pytest.approx(4000 / 45.5)
  assert ir.predict_serial(costs, "int8", 4000, 375) == pytest.approx(4000 / 41.5)
  # Steady state at SPI 1, B 256: 1 / (t_a + t_L / 256)
  assert ir.serial_curve(costs, "int8", 256, 1.0) == pytest.approx(1 / (0.001 + 0.1 / 256))


def test_the_first_learner_step_is_a_start_up_cost_not_a_per_step_one():
  runs = [single_run("fp32", 0, 4000, 375, 1.0), single_run("int8", 0, 4000, 375, 1.0)]
  for r in runs:  # 375 steps of 0.1 s on average, of which the first took 7.5 s
    r["learner_first_step_s"] = 7.5
  costs = ir.serial_costs(runs)
  assert costs.learner_s == pytest.approx((37.5 - 7.5) / 374)
  assert costs.first_step_s == pytest.approx(7.5)
  # 12 learner steps at SPI 1: N t_a + 11 t_L + t_0
  assert ir.predict_serial(costs, "fp32", 4000, 12) == pytest.approx(
      4000 / (8 + 11 * 30 / 374 + 7.5))
  assert ir.predict_serial(costs, "fp32", 4000, 0) == pytest.approx(500.0)


def test_conversions_for_the_actors_count_per_actor_step_at_their_precision():
  runs = [single_run("fp32", 0, 4000, 375, 1.0), single_run("int8", 0, 4000, 375, 1.0)]
  runs[1]["learner_us"]["publish"] = 100_000.0  # int8: 0.1 s of conversion per learner step
  costs = ir.serial_costs(runs)
  assert costs.publish_s == pytest.approx({"fp32": 0.0, "int8": 0.1 * 375 / 4000})
  # At SPI 1 (12 learner steps) the conversions stay per actor step (one per pull).
  assert ir.predict_serial(costs, "int8", 4000, 12) == pytest.approx(
      4000 / (4000 * (0.001 + 0.1 * 375 / 4000) + 12 * 0.1))


def test_lower_spi_is_predicted_from_the_calibration_at_the_highest():
  high = workload(ir.SINGLE, 32.0, [single_run("fp32", 0, 4000, 375, 80.0),
                                    single_run("int8", 0, 4000, 375, 100.0)])
  # At SPI 1 the runs' own actor costs are different (they must not be used).
  low_runs = [single_run("fp32", 0, 4000, 12, 400.0), single_run("int8", 0, 4000, 12, 700.0)]
  for r in low_runs:
    r["actor_us"]["inference"] *= 3
  low_runs[0]["learner_us"]["update"] = 199000.0  # this run's learner took 0.2 s a step
  low = workload(ir.SINGLE, 1.0, low_runs)
  rows, costs = ir.points([low, high], cores=2.0)
  assert costs["d4pg/single"]["learner_s"] == pytest.approx(0.1)
  by = {(r["samples_per_insert"], r["precision"]): r for r in rows}
  fp32_low = 4000 / (4000 * 0.002 + 12 * 0.1)
  assert by[(1.0, "fp32")]["predicted"] == pytest.approx(fp32_low)
  assert by[(1.0, "fp32")]["error"] == pytest.approx(fp32_low / 400.0 - 1)
  assert by[(1.0, "fp32")]["calibrated_on"] == "SPI 32"
  assert by[(1.0, "fp32")]["learner_step_vs_calibration"] == pytest.approx(2.0)
  assert by[(1.0, "fp32")]["predicted_own_learner"] == pytest.approx(4000 / (8 + 12 * 0.2))
  assert by[(1.0, "int8")]["predicted_own_learner"] == pytest.approx(by[(1.0, "int8")]["predicted"])
  assert by[(32.0, "int8")]["calibrated_on"] == "itself (calibration point)"
  summary = {s["samples_per_insert"]: s for s in ir.ratios(rows)}
  assert summary[1.0]["ratio_measured"] == pytest.approx(700 / 400)
  assert summary[1.0]["ratio_predicted"] == pytest.approx(
      (4000 / (4000 * 0.001 + 12 * 0.1)) / fp32_low)


def test_distributed_points_use_the_scaling_model_with_the_point_s_spi():
  high = workload(ir.LOCAL_MP, 32.0, [distributed_run("fp32", 0, 32.0, 20.0),
                                      distributed_run("int8", 0, 32.0, 21.0)])
  low = workload(ir.LOCAL_MP, 1.0, [distributed_run("fp32", 0, 1.0, 300.0),
                                    distributed_run("int8", 0, 1.0, 500.0)])
  rows, _ = ir.points([high, low], cores=2.0)
  base = scaling.calibrate(list(high.runs), 2.0)
  for r in rows:
    want = scaling.predict(scaling.dataclasses.replace(base, samples_per_insert=r[
        "samples_per_insert"]), r["precision"], 2)
    assert (r["predicted"], r["bound"]) == (pytest.approx(want.steps_per_s), want.bound)
  # At SPI 32 the 0.1 s learner bounds both (256 / (32 x 0.1) = 80); at SPI 1 it does not.
  by = {(r["samples_per_insert"], r["precision"]): r for r in rows}
  assert by[(32.0, "fp32")]["bound"] == "learner"
  assert by[(1.0, "int8")]["bound"] != "learner"


def test_ratios_pair_by_seed():
  rows = [dict(agent="a", launch="single", samples_per_insert=8.0, on_policy=False, seed=s,
               precision=p, measured=m, predicted=m, error=0.0, bound="serial")
          for s, p, m in ((0, "fp32", 10.0), (0, "int8", 30.0), (1, "fp32", 20.0),
                          (1, "int8", 20.0), (2, "fp32", 5.0), (2, "int8", 10.0))]
  [s] = ir.ratios(rows)
  assert s["ratio_measured"] == pytest.approx(2.0)  # median of 3, 1, 2 (not 60/35)
  assert s["fp32_measured"] == 10.0 and s["seeds"] == [0, 1, 2]


def _write(directory, name, meta, runs):
  os.makedirs(directory, exist_ok=True)
  with open(os.path.join(directory, name), "w", encoding="utf-8") as f:
    json.dump({"meta": meta, "runs": runs}, f)
  return str(directory)


def test_on_policy_workloads_count_a_rollout_batch_per_learner_step(tmp_path):
  d = _write(tmp_path / "imp", "bench.json", {"agent": "impala", "overrides": {}},
             [single_run("fp32", 0, 6000, 37, 50.0), single_run("int8", 0, 6000, 37, 60.0)])
  config = types.SimpleNamespace(batch_size=8, rollout_length=20)
  w = ir.load_workload(d, ir.SINGLE, config_of=lambda agent, overrides: config)
  assert (w.batch_size, w.samples_per_insert, w.on_policy) == (160, 1.0, True)
  with pytest.raises(FileNotFoundError, match="no bench_distributed.json"):
    ir.load_workload(d, ir.LOCAL_MP, config_of=lambda agent, overrides: config)


def test_cli_writes_the_table_and_the_figure(tmp_path, capsys):
  meta = lambda spi: {"agent": "d4pg", "overrides": {"samples_per_insert": spi}}
  dirs = [_write(tmp_path / f"s{spi}", "bench.json", meta(spi),
                 [single_run("fp32", 0, 4000, l, m32), single_run("int8", 0, 4000, l, m8)])
          for spi, l, m32, m8 in ((32.0, 375, 88.0, 96.0), (1.0, 12, 100.0, 150.0))]
  out = tmp_path / "out"
  assert ir_cli.main(["--single", *dirs, "--cores", "2", "--out", str(out)]) == 0
  table = (out / "table.md").read_text()
  assert "**1.50x**" in table and "| d4pg | single | 1 |" in table
  assert (out / "int8_regimes.png").stat().st_size > 10_000
  data = json.loads((out / "int8_regimes.json").read_text())
  assert len(data["points"]) == 4 and "d4pg/single" in data["model_curves"]
  assert ir_cli.main(["--out", str(out)]) == 2
  assert ir_cli.main(["--single", str(tmp_path / "nowhere"), "--out", str(out)]) == 2
  assert "no bench.json" in capsys.readouterr().err


def test_timed_learner_keeps_the_first_step_apart():
  sleeps = iter((0.05, 0.0, 0.0))

  class Learner:
    def step(self):
      time.sleep(next(sleeps))

  timed = profiling.TimedLearner(Learner())
  for _ in range(3):
    timed.step()
  assert timed.steps == 3
  assert 0.05 <= timed.first_step_seconds <= timed.step_seconds < timed.first_step_seconds + 0.02
