"""TimedSource: a pull's conversion time is the calling thread's own, not another
puller's; TimedActor marks the client's stats when acting starts."""
import threading
import time
import types

import pytest

from actorq.components.acting import variable_client as vc
from actorq.components import profiling
from actorq.quantization import network_spec as ns
from actorq.testing import fakes

SPEC = ns.mlp(4, [8], 2)
CONVERT_S = 0.3


def test_pull_waiting_on_another_threads_conversion_is_transfer_not_conversion(monkeypatch):
  real = vc.make_payload  # what the publisher converts with (the precision table's encoder)

  def slow_make_payload(*args, **kwargs):
    time.sleep(CONVERT_S)
    return real(*args, **kwargs)

  monkeypatch.setattr(vc, "make_payload", slow_make_payload)
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


def test_a_synchronous_clients_version_checks_are_not_pulls():
  learner = fakes.CountingLearner(SPEC)
  timed = profiling.TimedSource(vc.PolicyServer(learner, SPEC))
  client = vc.SynchronousVariableClient(timed, vc.make_runtime("int8", SPEC), update_period=1)
  client.update(wait=True)  # the first load: a payload fetch
  for _ in range(3):
    client.update(wait=True)  # the version is unchanged: version checks only
  assert timed.pulls == 1 and timed.versions == {0}
  assert client.stats["unchanged"] == 3 and timed.fetch_seconds > 0.0


class _ActorWithClient:
  """Just enough of a FeedForwardActor: a variable client whose stats grow on update."""

  def __init__(self):
    self._client = types.SimpleNamespace(stats={"pulls": 1, "load_seconds": 0.25})

  def observe_first(self, timestep):
    del timestep

  def update(self, wait=False):
    del wait
    self._client.stats["pulls"] += 1
    self._client.stats["load_seconds"] += 0.5


def test_client_stats_at_start_hold_only_the_pull_made_before_acting():
  # The builder pulls once in make_actor (stats pulls 1, 0.25 s of load) before the loop's
  # first observe_first; `client_at_start` keeps that, so a breakdown can subtract it.
  actor = profiling.TimedActor(_ActorWithClient())
  assert actor.client_at_start == {}
  actor.observe_first(None)
  actor.update()
  actor.observe_first(None)  # a second episode does not move the mark
  assert actor.client_at_start == {"pulls": 1, "load_seconds": 0.25}
  assert profiling.actor_client_stats(actor) == {"pulls": 2, "load_seconds": 0.75}
