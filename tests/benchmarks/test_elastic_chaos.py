"""benchmarks/elastic_chaos.py's measurements, on a made-up poll series (the benchmark
itself runs programs: not a test)."""
from actorq.benchmarks import elastic_chaos as ec


def _polls():
  # (time, counts) every 0.5 s: the learner steps until 2.0, stalls to 4.0, steps again;
  # actor 1 is killed at 1.0 (its last counter call lands at 1.5) and steps again at 5.0.
  out = []
  for k in range(13):
    t = 0.5 * k
    learner = min(t, 2.0) * 10 + max(0.0, t - 4.0) * 10
    actor = 10 if t < 1.5 else (12 if t < 5.0 else 12 + (t - 4.5) * 10)
    out.append((t, {"learner_steps": learner, "actor_1_steps": actor, "actor_steps": 100 + t}))
  return out


def test_longest_stall_is_the_longest_time_without_a_learner_step():
  polls = _polls()
  # 20 learner steps first seen at 2.0, a change first seen at 4.5: 2.5 s (the stall,
  # 2.0 .. 4.0-4.5, to the polls' resolution)
  assert ec.longest_stall(polls, 0.0, 6.0) == 2.5
  assert ec.longest_stall(polls, 3.0, 6.0) == 1.5  # only the part inside the window
  assert ec.longest_stall(polls, 5.0, 6.0) == 0.5  # poll spacing: a learner that steps


def test_a_restart_is_timed_from_the_kill_to_the_actor_stepping_past_its_settled_count():
  chaos = ec.Chaos(every_s=15.0, seed=0, num_actors=2, last_step=10**9)
  chaos.polls = _polls()
  chaos.kills = [{"t": 1.0, "actor": 1, "pid": 1, "settled": 12}]  # its count at 2.0
  out = ec.measure(chaos)
  # Not at 1.5 (the dead process's last call): at 5.0, the first count past 12.
  assert out["kills"] == [{"actor": 1, "at_s": 1.0, "restart_s": 4.0, "learner_stall_s": 2.5}]
  assert out["longest_stall_s"] == 2.5


def test_the_actor_to_kill_is_one_that_has_stepped_since_its_start():
  chaos = ec.Chaos(every_s=15.0, seed=0, num_actors=3, last_step=1000)
  chaos.on_poll({"learner_steps": 0, "actor_0_steps": 5})
  assert chaos.pick([0, 1, 2]) is None  # the learner has not stepped yet
  chaos.on_poll({"learner_steps": 3, "actor_0_steps": 5, "actor_steps": 5})
  assert chaos.pick([0, 1, 2]) == 0  # the only one that stepped
  chaos.killed(0, 123)
  chaos.on_poll({"learner_steps": 4, "actor_0_steps": 5, "actor_2_steps": 4, "actor_steps": 9})
  assert chaos.pick([1, 2]) is None  # 15 s have not passed
  chaos._last_kill -= 15.0
  assert chaos.pick([0, 1, 2]) == 2  # actor 0 has not stepped since its restart
  chaos.on_poll({"learner_steps": 9, "actor_2_steps": 9, "actor_steps": 1000})
  assert chaos.pick([0, 1, 2]) is None  # past --kill-until of the steps
