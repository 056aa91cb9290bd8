"""A distributed run's last evaluation is at its step limit: `distributed_nodes.next_evaluation`
and the `StepsLimiter`'s wait for the evaluator (no processes: a fake counter and the
limiter's own loop in a thread)."""
import threading
import types
import time

import pytest

from actorq.launch import distributed
from actorq.launch import distributed_nodes as nodes_lib


@pytest.mark.parametrize("steps, every, limit, expected", [
    (0, 5_000, 100_000, 5_000),         # fresh run
    (4_999, 5_000, 100_000, 5_000),
    (5_000, 5_000, 100_000, 10_000),    # just evaluated at 5,000
    (5_130, 5_000, 100_000, 10_000),    # evaluated a little late
    (95_170, 5_000, 100_000, 100_000),  # the last multiple is the limit
    (0, 10_000, 1_500, 1_500),          # a run shorter than eval_every
    (1_000, 1_000, 2_500, 2_000),
    (2_000, 1_000, 2_500, 2_500),       # the limit is no multiple of eval_every
    (2_600, 1_000, 2_500, 2_500),       # at or past the limit: now
    (7_000, 5_000, 100_000, 10_000),    # a resumed run
])
def test_next_evaluation(steps, every, limit, expected):
  assert nodes_lib.next_evaluation(steps, every, limit) == expected


class _FakeCounter:
  """The counter node's `get_counts` / `increment`, in this process."""

  def __init__(self, counts):
    self.counts = dict(counts)
    self.lock = threading.Lock()

  def get_counts(self):
    with self.lock:
      return dict(self.counts)

  def increment(self, **deltas):
    with self.lock:
      for key, value in deltas.items():
        self.counts[key] = self.counts.get(key, 0) + value
      return dict(self.counts)


def _run_limiter(monkeypatch, counter, **kw):
  stop = threading.Event()
  monkeypatch.setattr(nodes_lib.lp, "stop_event", lambda: stop)
  limiter = nodes_lib.StepsLimiter(counter, 1_000, None, **kw)
  thread = threading.Thread(target=limiter.run, daemon=True)
  start = time.monotonic()
  thread.start()
  return thread, stop, start


def test_the_limiter_waits_for_the_evaluation_at_the_limit(monkeypatch):
  counter = _FakeCounter({nodes_lib.ACTOR_STEPS: 1_020})
  thread, stop, _ = _run_limiter(monkeypatch, counter, final_eval_timeout_s=60.0)
  time.sleep(1.6)  # three polls past the limit, no evaluation yet
  assert thread.is_alive() and nodes_lib.LIMIT_REACHED not in counter.get_counts()
  counter.increment(**{nodes_lib.FINAL_EVALUATION: 1})
  thread.join(5.0)
  assert not thread.is_alive()
  assert counter.get_counts()[nodes_lib.LIMIT_REACHED] == 1
  stop.set()


def test_a_wait_that_runs_out_still_finishes_the_run_and_says_so(monkeypatch, capsys):
  counter = _FakeCounter({nodes_lib.ACTOR_STEPS: 1_000})
  thread, stop, start = _run_limiter(monkeypatch, counter, final_eval_timeout_s=1.0)
  thread.join(10.0)
  assert not thread.is_alive() and time.monotonic() - start >= 1.0
  assert counter.get_counts()[nodes_lib.LIMIT_REACHED] == 1
  assert capsys.readouterr().out.strip() == (
      "actorq: no evaluation at the step limit within 1 s; the run ends without it")
  stop.set()


def test_no_wait_and_below_the_limit(monkeypatch, capsys):
  counter = _FakeCounter({nodes_lib.ACTOR_STEPS: 999})
  thread, stop, _ = _run_limiter(monkeypatch, counter)  # default: no wait
  time.sleep(1.2)
  assert thread.is_alive() and nodes_lib.LIMIT_REACHED not in counter.get_counts()
  counter.increment(**{nodes_lib.ACTOR_STEPS: 1})
  thread.join(5.0)
  assert not thread.is_alive() and counter.get_counts()[nodes_lib.LIMIT_REACHED] == 1
  assert capsys.readouterr().out == ""
  stop.set()


def test_bad_waits_are_refused():
  with pytest.raises(ValueError, match="final_eval_timeout_s must be >= 0 seconds, got -1"):
    distributed.DistributedOptions(final_eval_timeout_s=-1)
  with pytest.raises(ValueError, match="final_eval_timeout_s must be >= 0 seconds, got nan"):
    nodes_lib.StepsLimiter(_FakeCounter({}), 10, None, final_eval_timeout_s=float("nan"))


def test_a_resumed_program_does_not_inherit_the_final_evaluation():
  state = {"actor_steps": 100_000, "learner_steps": 50_000, "episodes": 700,
           "counter": {"counts": {nodes_lib.ACTOR_STEPS: 100_000, nodes_lib.LIMIT_REACHED: 1,
                                  nodes_lib.FINAL_EVALUATION: 1, "actor_0_steps": 50_000}}}
  assert nodes_lib.restored_counts(state) == {
      nodes_lib.ACTOR_STEPS: 100_000, nodes_lib.ACTOR_EPISODES: 700,
      nodes_lib.LEARNER_STEPS: 50_000, "actor_0_steps": 50_000}


class _SlowLearnerNode:
  """A learner node's `checkpoint()` that takes `seconds` (a part's first step compiling)."""

  def __init__(self, seconds):
    self.seconds = seconds

  def dereference(self):
    return self

  def checkpoint(self):
    time.sleep(self.seconds)
    return "/run/checkpoints/ckpt-600"


def _program(tmp_path, seconds):
  return types.SimpleNamespace(config=types.SimpleNamespace(logdir=str(tmp_path)),
                               learner=_SlowLearnerNode(seconds))


def test_the_final_checkpoint_waits_for_a_slow_learner_and_says_when_it_gives_up(tmp_path,
                                                                                 capsys):
  """The launcher waits up to `final_checkpoint_timeout_s` for the learner node, whose
  checkpoint waits for every part's step in progress (a first step compiles: over 60 s
  on a loaded machine, the old fixed wait, which left a resumed run without its final
  checkpoint and said nothing); a wait that runs out is said in one line."""
  assert distributed._final_checkpoint(_program(tmp_path, 1.0), 30.0) == (
      "/run/checkpoints/ckpt-600")
  assert capsys.readouterr().err == ""
  assert distributed._final_checkpoint(_program(tmp_path, 30.0), 0.2) is None
  assert capsys.readouterr().err == (
      "actorq: no final checkpoint: the learner node did not write it within 0.2 s (it waits "
      "for every learner part's step in progress)\n")
  assert distributed.DistributedOptions().final_checkpoint_timeout_s == 600.0
  with pytest.raises(ValueError, match="final_checkpoint_timeout_s must be > 0 seconds, got 0"):
    distributed.DistributedOptions(final_checkpoint_timeout_s=0)
