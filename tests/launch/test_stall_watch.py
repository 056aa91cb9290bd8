"""`distributed._StallWatch`: which actor stopped answering, from the counter's per-actor
step counts (no processes: counts and the clock are driven by the test)."""
from actorq.launch import distributed
from actorq.launch import distributed_nodes as nodes_lib

KEY0, KEY1 = nodes_lib.actor_steps_key(0), nodes_lib.actor_steps_key(1)


def _at(monkeypatch, t):
  monkeypatch.setattr(distributed.time, "time", lambda: t)


def test_an_actor_that_stepped_and_hung_before_the_first_poll_is_caught_by_the_stall_limit(
    monkeypatch):
  """Fresh run: actor 1 already took 100 steps and hung when the launcher first polls.
  It has stepped (100 != 0), so the 10 s stall limit applies, not the 300 s start limit."""
  _at(monkeypatch, 1000.0)
  watch = distributed._StallWatch(2, stall_s=10.0, start_s=300.0)
  _at(monkeypatch, 1005.0)
  assert watch.check({KEY0: 120, KEY1: 100}) is None
  _at(monkeypatch, 1012.0)
  assert watch.check({KEY0: 190, KEY1: 100}) is None  # 7 s since its last change
  _at(monkeypatch, 1016.0)
  problem = watch.check({KEY0: 250, KEY1: 100})
  assert problem == ("actor/1 took no step in 11 s (it stopped answering; the limit is 10 s)")


def test_a_resumed_run_starts_from_its_restored_counts(monkeypatch):
  """Resumed at 5,000 and 4,000 steps: an unchanged count is no step (start limit), a
  changed one is."""
  _at(monkeypatch, 0.0)
  watch = distributed._StallWatch(2, stall_s=10.0, start_s=60.0,
                                  start_counts={KEY0: 5000, KEY1: 4000})
  _at(monkeypatch, 30.0)
  assert watch.check({KEY0: 5000, KEY1: 4010}) is None  # actor 0 within its 60 s start
  _at(monkeypatch, 61.0)
  assert watch.check({KEY0: 5000, KEY1: 4020}) == (
      "actor/0 took no first step in 61 s (it stopped answering; the limit is 60 s)")
