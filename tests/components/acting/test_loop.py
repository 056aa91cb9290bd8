"""The one actor loop: step order, hooks, the episode step cap (case B4) and stopping."""
import pytest

from actorq.components.acting import loop as loop_lib
from actorq.testing import fakes


class _Hook(loop_lib.Hook):

  def __init__(self, calls):
    self.calls, self.steps_seen, self.episodes = calls, [], []

  def on_episode_start(self, loop, timestep):
    self.calls.append("hook-start")

  def on_step(self, loop, action, timestep):
    self.calls.append("hook-step")
    self.steps_seen.append(loop.steps)

  def on_episode_end(self, loop, stats):
    self.calls.append("hook-end")
    self.episodes.append(stats)


def test_step_order_hooks_and_counts():
  actor = fakes.RecordingActor()
  hook = _Hook(actor.calls)
  loop = loop_lib.ActorLoop(fakes.ScriptedEnvironment(reward=1.5, episode_length=2), actor, hooks=[hook])
  finished = loop.run(num_episodes=2)
  one_episode = ["first", "hook-start", "select", "observe", "hook-step", "update",
                 "select", "observe", "hook-step", "update", "hook-end"]
  assert actor.calls == one_episode + one_episode
  assert (loop.steps, loop.episodes) == (4, 2) and hook.steps_seen == [1, 2, 3, 4]
  assert [(e.episode_return, e.episode_length, e.truncated_by_cap) for e in finished] == [
      (3.0, 2, False), (3.0, 2, False)]


def test_a_never_ending_episode_is_capped_as_a_truncation():
  env, actor = fakes.ScriptedEnvironment(reward=1.5), fakes.RecordingActor()
  loop = loop_lib.ActorLoop(env, actor, max_episode_steps=7)
  finished = loop.run(num_episodes=3)
  assert [(e.episode_length, e.truncated_by_cap) for e in finished] == [(7, True)] * 3
  assert env.resets == 3 and len(env.actions) == 21
  last = [ts for ts in actor.observed if ts.last()]
  assert len(last) == 3 and all(ts.discount == 1.0 for ts in last)  # bootstrap: truncation
  mids = [ts for ts in actor.observed if ts.mid()]
  assert len(mids) == 18


def test_a_termination_at_the_cap_stays_a_termination():
  actor = fakes.RecordingActor()
  finished = loop_lib.ActorLoop(fakes.ScriptedEnvironment(reward=1.5, episode_length=4), actor, max_episode_steps=4).run(num_episodes=1)
  assert finished[0].truncated_by_cap is False
  assert actor.observed[-1].last() and actor.observed[-1].discount == 0.0


def test_evaluation_of_an_episode_that_never_ends_returns():
  stats = loop_lib.evaluate(fakes.ScriptedEnvironment(reward=1.5), fakes.RecordingActor(), episodes=2, max_episode_steps=50)
  assert stats == {"episode_return": 75.0, "episode_return_std": 0.0, "episode_length": 50.0}
  assert loop_lib.DEFAULT_MAX_EPISODE_STEPS == 27_000


def test_should_stop_ends_the_run_and_evaluate_returns_none():
  actor = fakes.RecordingActor()
  stop = {"after": 5}
  loop = loop_lib.ActorLoop(fakes.ScriptedEnvironment(reward=1.5), actor,
                            should_stop=lambda: loop.steps >= stop["after"])
  assert loop.run() == [] and loop.steps == 5
  assert loop_lib.evaluate(fakes.ScriptedEnvironment(reward=1.5), fakes.RecordingActor(), 3, should_stop=lambda: True) is None


def test_num_steps_counts_this_call_and_a_new_call_starts_an_episode():
  env, actor = fakes.ScriptedEnvironment(reward=1.5), fakes.RecordingActor()
  loop = loop_lib.ActorLoop(env, actor)
  loop.steps = 100  # a resumed run
  loop.run(num_steps=3)
  loop.run(num_steps=2)
  assert loop.steps == 105 and env.resets == 2


def test_acting_only_does_not_observe_or_update():
  actor = fakes.RecordingActor()
  loop_lib.ActorLoop(fakes.ScriptedEnvironment(reward=1.5, episode_length=3), actor, learn=False).run(num_episodes=1)
  assert actor.calls == ["select"] * 3


@pytest.mark.parametrize("cap", [0, -3, 2.5, True, "10"])
def test_bad_step_caps_are_refused(cap):
  with pytest.raises(ValueError, match=r"max_episode_steps must be an integer >= 1"):
    loop_lib.ActorLoop(fakes.ScriptedEnvironment(), fakes.RecordingActor(), max_episode_steps=cap)


def test_periodic_hooks():
  seen = []
  loop = loop_lib.ActorLoop(fakes.ScriptedEnvironment(reward=1.5), fakes.RecordingActor(), learn=False,
                            hooks=[loop_lib.EveryNSteps(4, lambda l: seen.append(l.steps))])
  loop.run(num_steps=10)
  assert seen == [4, 8]
  with pytest.raises(ValueError, match="period"):
    loop_lib.EveryNSteps(0, print)


class _Raising(fakes.ScriptedEnvironment):
  """Raises in `call` ("step" or "reset") on its `at`-th call of it."""

  def __init__(self, call, at, episode_length=None):
    super().__init__(episode_length=episode_length)
    self.call, self.at, self.count = call, at, 0

  def _maybe_raise(self, call):
    if call == self.call:
      self.count += 1
      if self.count == self.at:
        raise RuntimeError("no such body\nsecond line")

  def reset(self):
    self._maybe_raise("reset")
    return super().reset()

  def step(self, action):
    self._maybe_raise("step")
    return super().step(action)


@pytest.mark.parametrize("call,at,when", [
    ("step", 7, "at actor step 7 (step 1 of episode 4)"),
    ("reset", 3, "at the start of episode 3 (after 4 actor steps)"),
])
def test_an_environment_that_raises_is_one_line_naming_call_step_and_place(call, at, when):
  """Episodes of 2 steps: actor step 7 is the first of episode 4, the third reset starts
  episode 3. The message is one line (the first of the error's); the error is its cause."""
  from actorq import core
  env = _Raising(call, at, episode_length=2)
  loop = loop_lib.ActorLoop(env, fakes.RecordingActor(), learn=True)
  with pytest.raises(core.EnvironmentFailure) as e:
    loop.run(num_steps=100)
  message = str(e.value)
  assert message.startswith(f"the environment's {call}() raised RuntimeError: no such body (at "
                            f"test_loop.py:")
  assert message.endswith(f" in _maybe_raise) {when}")
  assert "\n" not in message and isinstance(e.value.__cause__, RuntimeError)
