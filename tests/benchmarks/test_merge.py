"""`actorq bench --merge`: benchmarks of different seeds combine into one report whose
medians are those over all seeds; incompatible benchmarks are refused."""
import json
import math

import pytest

from actorq.benchmarks import actorq_bench as ab
from actorq.benchmarks import merge
from actorq.cli import main as cli


def _run(precision, seed, final_return, time_to_target):
  run = {f: 1.0 for f in ab.RUN_FIELDS}
  run.update(precision=precision, seed=seed, agent="d4pg", env="dmc:cartpole-balance",
             jax_backend="cpu", final_return=final_return, time_to_target_s=time_to_target,
             actor_us={c: 10.0 for c in ab.ACTOR_COMPONENTS + ab.ASYNC_COMPONENTS},
             learner_us={c: 100.0 for c in ab.LEARNER_COMPONENTS},
             curve=[{"actor_steps": s, "learner_steps": s // 8, "train_seconds": s / 50.0,
                     "episode_return": final_return * s / 2000, "episode_return_std": 1.0}
                    for s in (1000, 2000)])
  return run


def _meta(seeds, **changes):
  meta = {"agent": "d4pg", "env": "dmc:cartpole-balance", "precisions": ["fp32", "int8"],
          "seeds": seeds, "steps": 2000, "eval_every": 1000, "eval_episodes": 10,
          "target": 900.0, "overrides": {"policy_hidden_sizes": [2048, 2048, 2048]},
          "acting_steps": 100, "watts_per_core": 5.0, "watts_per_gpu": 300.0,
          "machine": {"nproc": 2, "cpu_model": "AMD EPYC", "loadavg_1_5_15": [0.5, 0.5, 0.5]},
          "started": "2026-11-29 20:00:00"}
  meta.update(changes)
  return meta


def _bench_dir(tmp_path, name, runs, meta, peer_steps_per_s):
  d = tmp_path / name
  ab.report(str(d.mkdir() or d), runs, [{"kind": "peer", "seed": meta["seeds"][0],
                                         "acting_steps_per_s": peer_steps_per_s}], meta)
  return str(d)


@pytest.fixture
def two_benches(tmp_path):
  a = _bench_dir(tmp_path, "a", [_run("fp32", 0, 950.0, 800.0), _run("int8", 0, 990.0, 700.0)],
                 _meta([0]), 300.0)
  b = _bench_dir(tmp_path, "b", [_run("fp32", 1, 970.0, 600.0), _run("int8", 1, 980.0, math.nan),
                                 _run("fp32", 2, 1000.0, 500.0), _run("int8", 2, 996.0, 400.0)],
                 _meta([1, 2], started="2026-11-30 10:00:00"), 500.0)
  return a, b


def test_merged_medians_are_over_all_seeds(two_benches, tmp_path):
  out = tmp_path / "ab"
  summary, table = merge.merge(two_benches, str(out))
  assert summary["fp32"]["runs"] == 3 and summary["int8"]["runs"] == 3
  assert summary["fp32"]["final_return"] == 970.0  # median of 950, 970, 1000
  assert summary["int8"]["final_return"] == 990.0  # median of 990, 980, 996
  assert summary["fp32"]["time_to_target_s"] == 600.0  # median of 800, 600, 500
  assert summary["int8"]["time_to_target_s"] == 700.0  # median of 700, inf, 400
  assert summary["int8"]["reached_target"] == 2
  data = json.loads((out / "bench.json").read_text())
  assert data["meta"]["seeds"] == [0, 1, 2]
  assert [s["dir"] for s in data["meta"]["merged_from"]] == list(two_benches)
  assert {r["source"] for r in data["runs"]} == set(two_benches)
  assert "seeds [0, 1, 2]" in table
  fp32_row = table.splitlines()[2].split("|")
  assert fp32_row[1].strip() == "fp32" and fp32_row[-2].strip() == "400"  # peer: median(300, 500)
  # The merged directory renders again from its own bench.json.
  assert ab.render(str(out))[1] == table


@pytest.mark.parametrize("change, message", [
    ({"steps": 4000}, "differs from .* in steps: 4000 vs 2000"),
    ({"overrides": {"policy_hidden_sizes": [256, 256]}}, "in overrides"),
    ({"machine": {"nproc": 16, "cpu_model": "AMD EPYC"}}, r"another machine .* \(nproc: 16 vs 2\)"),
])
def test_incompatible_benchmarks_are_refused(tmp_path, change, message):
  a = _bench_dir(tmp_path, "a", [_run("fp32", 0, 950.0, 800.0)], _meta([0]), 300.0)
  b = _bench_dir(tmp_path, "b", [_run("fp32", 1, 950.0, 800.0)], _meta([1], **change), 300.0)
  with pytest.raises(merge.IncompatibleBenchError, match=message):
    merge.merge([a, b], str(tmp_path / "out"))


def test_the_same_run_twice_is_refused(tmp_path):
  a = _bench_dir(tmp_path, "a", [_run("fp32", 0, 950.0, 800.0)], _meta([0]), 300.0)
  b = _bench_dir(tmp_path, "b", [_run("fp32", 0, 960.0, 700.0)], _meta([0]), 300.0)
  with pytest.raises(merge.IncompatibleBenchError, match="fp32 seed 0 is in both"):
    merge.merge([a, b], str(tmp_path / "out"))


def test_cli_merge_errors_exit_2_and_write_nothing(two_benches, tmp_path, capsys):
  a, b = two_benches
  cases = [
      (["--merge", a, b], "--merge needs --logdir"),
      (["--merge", a, b, "--logdir", a], "is one of the merged benchmarks"),
      (["--merge", a, str(tmp_path / "nope"), "--logdir", str(tmp_path / "o")],
       "no bench.json there"),
      (["--merge", a, "--logdir", str(tmp_path / "o")], "at least two benchmark directories"),
  ]
  for argv, message in cases:
    assert cli.main(["bench"] + argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err
  assert not (tmp_path / "o").exists()
  assert cli.main(["bench", "--merge", a, b, "--logdir", str(tmp_path / "o")]) == 0
  assert "int8/fp32" in capsys.readouterr().out
  assert (tmp_path / "o" / "returns_vs_wallclock.png").exists()
