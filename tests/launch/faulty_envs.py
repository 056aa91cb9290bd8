"""CartPole with an injected fault, for tests/launch/test_faults.py (a helper module, not
a test file). Its id is ``gym:faulty_envs:ActorqFaulty-v0``: Gymnasium imports this
module by name, so node processes find it too when its folder is on PYTHONPATH.

The fault comes from the environment variable `ACTORQ_FAULT`, read when an instance is
made (every node and every resumed run makes new instances), as ``kind:n[:arg]``; `n`
counts this instance's own calls:

  step:n        step() raises RuntimeError("injected fault") on its n-th call
  reset:n       reset() raises RuntimeError("injected fault") on its n-th call
  hang:n        the n-th step() never returns (sleeps; for the stalled-actor test)
  fill:n:DIR    the n-th step() fills the filesystem holding DIR with DIR/ballast
                (another process filling the disk)
  fsize:n       the n-th step() sets RLIMIT_FSIZE to 1 byte in this process (SIGXFSZ
                ignored), so every write that grows a file past it fails with EFBIG
  seed:s:FAULT  FAULT only in the instance made with seed s (one distributed actor)

Without `ACTORQ_FAULT` (or with an empty one) it is plain CartPole-v1. When a step, reset
or hang fault fires, the time goes to the file $ACTORQ_FAULT_MARK if that is set.
"""
import errno
import os
import resource
import signal
import time

import gymnasium
from gymnasium.envs.classic_control import cartpole

ENV_ID = "gym:faulty_envs:ActorqFaulty-v0"
BALLAST = "ballast"


def fill_filesystem(directory: str) -> None:
  """Writes `directory/ballast` until the filesystem is full (ENOSPC)."""
  fd = os.open(os.path.join(directory, BALLAST), os.O_WRONLY | os.O_CREAT | os.O_APPEND)
  try:
    for size in (1 << 16, 1 << 12, 1 << 9, 1):
      block = b"\0" * size
      try:
        while True:
          os.write(fd, block)
      except OSError as e:
        if e.errno != errno.ENOSPC:
          raise
  finally:
    os.close(fd)


def limit_file_size() -> None:
  """Every write that grows a file past 1 byte fails with EFBIG from now on."""
  signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
  _, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
  resource.setrlimit(resource.RLIMIT_FSIZE, (1, hard))


def _mark() -> None:
  """Writes the time a fault fires to the file $ACTORQ_FAULT_MARK, if set."""
  mark = os.environ.get("ACTORQ_FAULT_MARK")
  if mark:
    with open(mark, "w", encoding="utf-8") as f:
      f.write(repr(time.time()))


class FaultyCartPole(cartpole.CartPoleEnv):

  def __init__(self, **kwargs):
    super().__init__(**kwargs)
    self._fault = os.environ.get("ACTORQ_FAULT", "").split(":")
    self._steps = self._resets = 0
    self._seed = None

  def _armed(self, kind: str, count: int) -> bool:
    fault = self._fault
    if fault[0] == "seed":
      if self._seed is None or int(fault[1]) != self._seed:
        return False
      fault = fault[2:]
    return fault[0] == kind and int(fault[1]) == count

  def reset(self, *, seed=None, options=None):
    if seed is not None and self._seed is None:
      self._seed = int(seed)
    self._resets += 1
    if self._armed("reset", self._resets):
      _mark()
      raise RuntimeError("injected fault")
    return super().reset(seed=seed, options=options)

  def step(self, action):
    self._steps += 1
    if self._armed("step", self._steps):
      _mark()
      raise RuntimeError("injected fault")
    if self._armed("hang", self._steps):
      _mark()
      while True:
        time.sleep(1.0)
    if self._armed("fill", self._steps):
      fill_filesystem(self._fault[-1])
    if self._armed("fsize", self._steps):
      limit_file_size()
    return super().step(action)


if "ActorqFaulty-v0" not in gymnasium.registry:
  gymnasium.register(id="ActorqFaulty-v0", entry_point=FaultyCartPole, max_episode_steps=500)
