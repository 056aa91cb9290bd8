"""benchmarks/hosts_train.py: the figures it reads from a run directory's CSVs, its
summary paired by seed, and the launcher command it runs in the first namespace."""
import time

import psutil
import pytest

from actorq.benchmarks import hosts_train
from actorq.cli.benchmarks import hosts_train as hosts_train_cli
from actorq.components import aggregate as ag


def _counter(*rows):
  return [dict(zip(("wall_seconds", "actor_steps", "learner_steps"), map(str, r))) for r in rows]


def test_rates_count_from_the_first_row_with_actor_steps():
  rows = _counter((0.5, 0, 0), (5.5, 0, 0), (10.5, 500, 100), (15.5, 1500, 300),
                  (20.5, 2500, 550))
  got = hosts_train.rates(rows)
  assert got["actor_sps"] == pytest.approx(2000 / 10.0)  # (2500 - 500) / (20.5 - 10.5)
  assert got["learner_sps"] == pytest.approx(450 / 10.0)
  # The training window starts at the first row with learner steps (the same row here).
  assert got["train_actor_sps"] == pytest.approx(200.0)
  rows = _counter((0.5, 0, 0), (5.5, 1000, 0), (10.5, 1100, 50), (20.5, 1300, 150))
  got = hosts_train.rates(rows)
  assert got["actor_sps"] == pytest.approx(300 / 15.0)  # filling replay included
  assert got["train_actor_sps"] == pytest.approx(200 / 10.0)
  assert got["train_learner_sps"] == pytest.approx(100 / 10.0)
  assert hosts_train.rates(_counter((0.5, 0, 0), (5.5, 10, 0))) == {
      "actor_sps": None, "learner_sps": None, "train_actor_sps": None,
      "train_learner_sps": None}


def test_evaluations_find_the_first_return_at_the_target():
  rows = [{"actor_steps": str(s), "episode_return": str(g), "wall_seconds": str(w)}
          for s, g, w in ((5000, 120.0, 40.0), (10000, 480.0, 80.0), (15000, 300.0, 120.0))]
  got = hosts_train.evaluations(rows, 475.0)
  assert (got["final"], got["best"]) == (300.0, 480.0)
  assert (got["first_target_steps"], got["first_target_wall_s"]) == (10000.0, 80.0)
  assert hosts_train.evaluations(rows, 500.0)["first_target_steps"] is None
  assert hosts_train.evaluations([], 1.0)["final"] is None


def _run(precision, seed, sps, final, hit):
  return {"precision": precision, "seed": seed, "exit": 0, "actor_sps": sps,
          "learner_sps": sps / 2, "train_actor_sps": sps, "train_learner_sps": sps / 2, "final": final, "best": final, "first_target_steps": hit,
          "first_target_wall_s": hit, "link_rx_Bps": 10.0 * sps, "link_tx_Bps": 1.0,
          "wall_s": 100.0}


def test_summary_counts_seeds_and_pairs_int8_with_fp32_by_seed():
  runs = [_run("fp32", 0, 100.0, 500.0, 5000), _run("int8", 0, 150.0, 480.0, 6000),
          _run("fp32", 1, 200.0, 200.0, None), _run("int8", 1, 500.0, 490.0, 9000)]
  summary = hosts_train.summarize(runs, ["fp32", "int8"], 475.0)
  assert summary["fp32"]["reached_target"] == 1 and summary["int8"]["reached_target"] == 2
  assert summary["fp32"]["final_ge_target"] == 1 and summary["int8"]["final_ge_target"] == 2
  assert summary["fp32"]["actor_sps"] == 150.0  # median of 100 and 200
  assert summary["int8/fp32"]["actor_sps"] == pytest.approx((1.5 + 2.5) / 2)  # per seed
  table = hosts_train.format_table(runs, summary, dict(hosts_train.PRESETS["dqn"]), "100mbit")
  assert "| fp32 | 1 | 0 | 200.0 | 200.0 / 100.00 |" in table and "not reached" in table
  assert "link 100mbit" in table
  # The final return's IQM over seeds with its interval, as `actorq sweep` computes it.
  assert summary["fp32"]["final_iqm"] == list(ag.interval([500.0, 200.0], "iqm"))
  assert summary["int8"]["final_iqm"][0] == pytest.approx(485.0)
  assert "final IQM 485.0 [480.0, 490.0] (95% stratified bootstrap)" in table
  none = hosts_train.summarize([dict(_run("fp32", 0, 1.0, None, None))], ["fp32"], 475.0)
  assert none["fp32"]["final_iqm"] is None


def test_the_launcher_command_is_a_hosts_launch_in_the_first_namespace():
  class Pair:
    names = ["aq7n0", "aq7n1"]
    addresses = ["10.231.0.1", "10.231.0.2"]

    def exec_argv(self, index):
      return ["ip", "netns", "exec", self.names[index]]

  settings = dict(hosts_train.PRESETS["actorq"])
  argv = hosts_train.train_argv(Pair(), settings, "int8", 3, "/tmp/x")
  assert argv[:4] == ["ip", "netns", "exec", "aq7n0"]
  joined = " ".join(argv)
  assert "--launch hosts --hosts 10.231.0.1,10.231.0.2" in joined
  assert argv[argv.index("--start") + 1] == "ip netns exec aq7n{index}"
  assert "--actor-precision int8 --eval-every 6000" in joined and "--seed 3" in joined
  assert "policy_hidden_sizes=[2048, 2048, 2048]" in argv


@pytest.mark.parametrize("argv", [["--seeds", "a"], ["--seeds", "1,1"], ["--precisions", "int3"],
                                  ["--rate", "fast"], ["--preset", "nope"], ["--busy", "-1"],
                                  ["--busy", "two"]])
def test_bad_flags_exit_2(argv, capsys):
  with pytest.raises(SystemExit) as e:
    hosts_train_cli.main(argv)
  assert e.value.code == 2
  assert f"argument {argv[0]}" in capsys.readouterr().err


def test_busy_load_runs_cpu_bound_processes_and_reaps_them():
  with hosts_train.busy_load(2) as pids:
    assert len(pids) == 2
    procs = [psutil.Process(pid) for pid in pids]
    deadline = time.time() + 20.0  # spinning, not sleeping: CPU time grows (a loaded CI too)
    while time.time() < deadline and not all(
        sum(p.cpu_times()[:2]) > 0.2 for p in procs):
      time.sleep(0.2)
    assert all(sum(p.cpu_times()[:2]) > 0.2 for p in procs)
  assert not any(psutil.pid_exists(pid) for pid in pids)  # killed and reaped
  with hosts_train.busy_load(0) as pids:
    assert pids == []
