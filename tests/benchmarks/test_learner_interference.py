"""The neighbours of `actorq.benchmarks.learner_interference` do what they stand for."""
import time

from actorq.benchmarks import learner_interference as li
from actorq.cli.benchmarks import learner_interference as li_cli


def test_spin_burns_the_cpu_time_asked_for():
  step = li.spin_step(0.02)
  start = time.thread_time()
  step()
  assert 0.02 <= time.thread_time() - start < 0.06


def test_stream_reads_the_policy_s_bytes():
  assert li.stream_step(4_000)() == 1_000.0
  assert li.POLICY_BYTES == 33_628_164


def test_bad_arguments_exit_2(capsys):
  assert li_cli.main(["--rounds", "0"]) == 2
  assert "--rounds and --steps must be >= 1" in capsys.readouterr().err
