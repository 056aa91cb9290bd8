"""TimedSource: a pull's conversion time is the calling thread's own, not another puller's."""
import threading
import time

import pytest

from actorq.components import profiling, variable_client as vc
from actorq.testing import fakes
from actorq.quantization import network_spec as ns
from actorq.quantization import payload as payload_lib

SPEC = ns.mlp(4, [8], 2)
CONVERT_S = 0.3


def test_pull_waiting_on_another_threads_conversion_is_transfer_not_conversion(monkeypatch):
  real = payload_lib.make_payload

  def slow_make_payload(*args, **kwargs):
    time.sleep(CONVERT_S)
    return real(*args, **kwargs)

  monkeypatch.setattr(payload_lib, "make_payload", slow_make_payload)
  server = vc.PolicyServer(fakes.CountingLearner(SPEC), SPEC)
  publisher = server.publisher("int8")
  timed = profiling.TimedSource(server)  # the training actor's view, as in the bench
  # An evaluation actor pulls the new version through the server itself, in its own
  # thread, and converts it; the training actor's pull arrives mid-conversion and waits.
  evaluator = threading.Thread(target=server.get_variables, args=([vc.policy_name("int8")],))
  evaluator.start()
  time.sleep(CONVERT_S / 3)
  timed.get_variables([vc.policy_name("int8")])
  evaluator.join()

  assert publisher.stats["conversions"] == 1
  assert publisher.stats["convert_seconds"] >= CONVERT_S
  # This thread converted nothing: all of its fetch time is waiting/transfer. Counting the
  # evaluator's conversion here made fetch - convert negative (pull_transfer clamped to 0).
  assert server.thread_convert_seconds() == 0.0
  assert timed.convert_seconds == 0.0
  assert 0.0 < timed.fetch_seconds < CONVERT_S


def test_own_conversion_counts_for_the_calling_thread():
  server = vc.PolicyServer(fakes.CountingLearner(SPEC), SPEC)
  timed = profiling.TimedSource(server)
  timed.get_variables([vc.policy_name("int8")])
  publisher = server.publisher("int8")
  assert timed.convert_seconds == pytest.approx(publisher.stats["convert_seconds"])
  assert 0.0 < timed.convert_seconds <= timed.fetch_seconds
  assert timed.pulls == 1 and timed.versions == {0}
