"""benchmarks/export_parity: the summary and table on hand-worked export reports (the
exports themselves are covered by tests/launch/test_export.py)."""
import pytest

from actorq.benchmarks import export_parity
from actorq.cli.benchmarks import export_parity as export_parity_cli


def _report(run, seed, precision, exported, fp32, agreement, tflite=77_000):
  return {"model": {"precision": precision},
          "source": {"run": f"/somewhere/{run}", "seed": seed, "actor_steps": 20000},
          "parity": {"tflite_bytes": tflite, "export_payload_bytes": tflite - 5000,
                     "export_return_mean": exported, "fp32_return_mean": fp32,
                     "greedy_action_agreement": agreement, "observations_compared": 4000}}


def test_rows_and_paired_summary():
  rows = [export_parity.report_row(r) for r in (
      _report("fp32-s0", 0, "int8", 400.0, 410.0, 0.9),
      _report("fp32-s1", 1, "int8", 500.0, 500.0, 1.0),
      _report("fp32-s2", 2, "int8", 300.0, 280.0, 0.8),
      _report("fp32-s0", 0, "fp32", 410.0, 410.0, 1.0, 270_000),
      _report("fp32-s1", 1, "fp32", 500.0, 500.0, 1.0, 270_000),
      _report("fp32-s2", 2, "fp32", 280.0, 280.0, 1.0, 270_000))]
  assert rows[0]["run"] == "fp32-s0" and rows[0]["seed"] == 0
  s = export_parity.summarize(rows)
  int8 = s["int8"]
  assert int8["runs"] == 3
  assert int8["export_return_mean"] == pytest.approx(400.0)
  assert int8["fp32_return_mean"] == pytest.approx(1190.0 / 3)
  assert int8["paired_difference"] == pytest.approx((-10.0 + 0.0 + 20.0) / 3)
  low, high = int8["paired_difference_ci"]
  assert -10.0 <= low <= int8["paired_difference"] <= high <= 20.0
  assert int8["median_agreement"] == 0.9 and int8["lowest_agreement"] == 0.8
  assert s["fp32"]["paired_difference"] == 0.0 and s["fp32"]["paired_difference_ci"] == [0.0, 0.0]
  text = export_parity.table(rows, s)
  assert text.splitlines()[2].startswith("| fp32-s0 | 0 | int8 | 77,000 | 400.0 | 410.0 | 0.900")
  assert "**+3.3 [" in text


def test_summarize_refuses_unpaired_runs_and_nothing():
  rows = [export_parity.report_row(_report("fp32-s0", 0, "int8", 1.0, 1.0, 1.0)),
          export_parity.report_row(_report("fp32-s1", 1, "fp32", 1.0, 1.0, 1.0))]
  with pytest.raises(ValueError, match="same runs"):
    export_parity.summarize(rows)
  with pytest.raises(ValueError, match="no export reports"):
    export_parity.summarize([])


def test_bad_flags_are_refused_before_any_export(capsys):
  with pytest.raises(SystemExit) as e:
    export_parity_cli.main(["--runs", "r", "--out", "o", "--precisions", "int8,fp16"])
  assert e.value.code == 2 and ("--precisions 'fp16' not allowed; allowed: int8, fp32, a "
                                "per-layer precision policy file") in capsys.readouterr().err
  with pytest.raises(SystemExit) as e:
    export_parity_cli.main(["--runs", "r", "--out", "o", "--precisions", "int8;mixed:int9,int8"])
  assert e.value.code == 2 and "'int9' not understood" in capsys.readouterr().err
  with pytest.raises(SystemExit):
    export_parity_cli.main(["--runs", "r", "--out", "o", "--episodes", "0"])
  assert "--episodes must be a positive integer" in capsys.readouterr().err
