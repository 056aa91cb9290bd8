"""benchmarks/network_pull.py's table and input checks (the measurement itself needs root
and ~90 s: it is run by hand, figures in docs/results/network/README.md)."""
import pytest

from actorq.benchmarks import network_pull
from actorq.cli.benchmarks import network_pull as network_pull_cli


def _pull(net, precision, latency, wire, payload=100):
  return {"net": net, "precision": precision, "latency_s": latency, "wire_bytes": wire,
          "payload_bytes": payload}


def test_summary_takes_medians_and_fp32_over_int8_ratios():
  pulls = []
  for net in network_pull.NETWORKS:
    pulls += [_pull(net, "fp32", s, 4000) for s in (0.4, 0.8, 0.5)]
    pulls += [_pull(net, "int8", s, 1000) for s in (0.1, 0.3, 0.2)]
  table = network_pull.summarize([{"rate": "100mbit", "goodput_mbit": 90.0, "pulls": pulls}])
  assert [r["net"] for r in table] == list(network_pull.NETWORKS)
  row = table[0]
  assert row["fp32_latency_s"] == 0.5 and row["int8_latency_s"] == 0.2
  assert row["latency_ratio"] == pytest.approx(2.5) and row["wire_ratio"] == 4.0
  assert (row["rate"], row["goodput_mbit"]) == ("100mbit", 90.0)


@pytest.mark.parametrize("argv", [["--rates", "fast"], ["--rates", "100mb"], ["--pulls", "0"]])
def test_bad_input_exits_2_before_anything_runs(argv, capsys):
  with pytest.raises(SystemExit) as e:
    network_pull_cli.main(argv)
  assert e.value.code == 2
  err = capsys.readouterr().err.strip()
  assert len(err.splitlines()) == 1 and err.startswith("network_pull: error:"), err
