"""The scaling model (`actorq.benchmarks.scaling`) against hand-computed values."""
import dataclasses
import math

import pytest

from actorq.benchmarks import scaling
from actorq.cli.benchmarks import scaling as scaling_cli

# fp32: r_a = 1 / (0.002 + 0.1 / 1000) = 476.19 steps/s; int8: 1 / (0.001 + 0.05 / 1000) = 952.38.
ACTORS = dict(actor_s={"fp32": 0.002, "int8": 0.001}, pull_s={"fp32": 0.1, "int8": 0.05},
              update_period=1000, replay_cpu_s=0.0005, batch_size=256, samples_per_insert=32.0)
# A CPU learner of 100 ms on 2 cores, 0.2 of them taken by the evaluator.
CPU = scaling.Costs(learner_s=0.1, learner_cpu_s=0.1, fixed_cores=0.2, cores=2.0, **ACTORS)
# A 2 ms GPU learner with 1 ms of host CPU per step on 16 cores, 1 for the evaluator.
GPU = scaling.Costs(learner_s=0.002, learner_cpu_s=0.001, fixed_cores=1.0, cores=16.0, **ACTORS)


def test_terms_match_the_equations():
  assert scaling.actor_rate(CPU, "fp32") == pytest.approx(1 / 0.0021)
  assert scaling.actor_rate(CPU, "int8") == pytest.approx(1 / 0.00105)
  assert scaling.learner_bound(CPU) == pytest.approx(256 / (32 * 0.1))  # 80
  # (C - e) / (t_a + t_pull / K + c_r + SPI / B * c_L) = 1.8 / (0.0021 + 0.0005 + 0.0125)
  assert scaling.core_bound(CPU, "fp32") == pytest.approx(1.8 / 0.0151)
  assert scaling.core_bound(GPU, "int8") == pytest.approx(15 / (0.00105 + 0.0005 + 0.000125))


def test_a_slow_cpu_learner_bounds_both_precisions_alike():
  for p in ("fp32", "int8"):
    for n in (1, 2):
      pred = scaling.predict(CPU, p, n)
      assert (pred.steps_per_s, pred.bound) == (pytest.approx(80.0), "learner")


def test_a_fast_learner_is_actor_bound_then_learner_bound():
  few = scaling.predict(GPU, "fp32", 4)
  assert few.bound == "actor" and few.steps_per_s == pytest.approx(4 / 0.0021)
  many = scaling.predict(GPU, "fp32", 12)
  assert many.bound == "learner" and many.steps_per_s == pytest.approx(4000.0)
  # int8 actors saturate the 4000 steps/s learner with half as many actors.
  assert scaling.saturation_point(GPU, "fp32")["num_actors"] == pytest.approx(4000 * 0.0021)
  assert scaling.saturation_point(GPU, "int8") == {
      "num_actors": pytest.approx(4000 * 0.00105), "bound": "learner",
      "steps_per_s": pytest.approx(4000.0)}
  assert scaling.predict(GPU, "int8", 4).steps_per_s == pytest.approx(4 / 0.00105)


def test_too_few_cores_make_it_core_bound():
  small = scaling.Costs(learner_s=0.002, learner_cpu_s=0.001, fixed_cores=1.0, cores=4.0,
                        **ACTORS)
  pred = scaling.predict(small, "fp32", 4)
  assert pred.bound == "cores" and pred.steps_per_s == pytest.approx(3 / 0.002725)
  assert scaling.saturation_point(small, "fp32")["bound"] == "cores"


def _run(precision, actor_cpu_us, steps=(600, 400)):
  return {"precision": precision, "seed": 0, "num_actors": len(steps),
          "actor_steps_per_s": 50.0, "learner_steps_window": 125.0,
          "variable_update_period": 100, "batch_size": 256, "samples_per_insert": 32.0,
          "actor_us": [{"steps": s, "pulls_total": s / 100, "pull_s_total": 0.010 * s / 100,
                        "cpu": actor_cpu_us} for s in steps],
          "learner_us": {"update": 90_000.0, "publish": 1_000.0, "cpu": 95_000.0},
          "cpu_cores": {"replay/0": 0.05, "counter/0": 0.02, "limiter/0": 0.03,
                        "evaluator/0": 0.1, "learner/0": 0.9}}


def test_costs_from_a_run():
  c = scaling.costs_from_run(_run("fp32", 3000.0), cores=2)
  # (fetch + load) seconds over all pulls / pulls
  assert c["pull_s"] == pytest.approx(0.010)
  assert c["actor_s"] == pytest.approx(0.003 - 0.010 / 100)
  assert c["learner_s"] == pytest.approx(0.091) and c["learner_cpu_s"] == pytest.approx(0.095)
  assert c["replay_cpu_s"] == pytest.approx(0.05 / 50.0)  # replay cores / actor steps/s
  assert c["fixed_cores"] == pytest.approx(0.1 + 0.02 + 0.03)  # evaluator, counter, limiter
  assert (c["update_period"], c["cores"]) == (100, 2.0)


def test_calibrate_and_validate():
  runs = [_run("fp32", 3000.0), _run("int8", 1500.0)]
  costs = scaling.calibrate(runs, cores=2)
  assert costs.actor_s == {"fp32": pytest.approx(0.0029), "int8": pytest.approx(0.0014)}
  rows = scaling.validate(costs, runs)
  # X_L = 256 / (32 * 0.091) = 87.9 steps/s; X_C fp32 = 1.85 / (0.003 + 0.001 + 0.011875).
  assert scaling.core_bound(costs, "fp32") == pytest.approx(1.85 / 0.015875)
  assert rows[0]["predicted"] == pytest.approx(256 / (32 * 0.091))
  assert rows[0]["bound"] == "learner"
  assert rows[0]["error"] == pytest.approx(rows[0]["predicted"] / 50.0 - 1)
  assert all(math.isfinite(r["error"]) for r in rows)


@pytest.mark.parametrize("change,name", [
    ({"learner_s": 0.0}, "learner_s"), ({"fixed_cores": 2.0}, "fixed_cores"),
    ({"update_period": 0}, "update_period"), ({"actor_s": {"fp32": 0.0, "int8": 1.0}}, "actor_s"),
    ({"pull_s": {"fp32": 0.1}}, "pull_s"),
])
def test_bad_costs_are_named(change, name):
  kwargs = dict(dataclasses.asdict(CPU), **change)
  with pytest.raises(ValueError, match=name):
    scaling.Costs(**kwargs)
  with pytest.raises(ValueError, match="num_actors"):
    scaling.predict(CPU, "fp32", 0)


def test_plot_writes_a_png(tmp_path):
  path = scaling.plot([{"title": "t", "costs": GPU, "max_actors": 16,
                        "measured": [(1, "fp32", 400.0)]}], str(tmp_path / "s.png"))
  with open(path, "rb") as f:
    assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_main_without_a_bench_is_a_one_line_error(tmp_path, capsys):
  assert scaling_cli.main(["--calibrate", str(tmp_path), "--out", str(tmp_path / "o")]) == 2
  err = capsys.readouterr().err
  assert err.count("\n") == 1 and "no bench_distributed.json" in err
  assert not (tmp_path / "o").exists()


def test_parse_us():
  assert scaling.parse_us("fp32=2000,int8=1000", {"fp32": 1.0, "int8": 1.0}) == {
      "fp32": pytest.approx(0.002), "int8": pytest.approx(0.001)}
  assert scaling.parse_us(None, {"fp32": 0.5}) == {"fp32": 0.5}
  for bad in ("fp32=x", "fp32=1", "fp32=0,int8=1"):
    with pytest.raises(ValueError):
      scaling.parse_us(bad, {"fp32": 1.0, "int8": 1.0})
