"""Reverb writes that cannot block forever (handed case R1, reverb#4).

acme 0.4.0's adders call `TrajectoryWriter.flush(n)` and `end_episode()` without a
timeout: when the server is gone, or a rate limiter holds inserts back because the
learner died, an actor blocks forever. `TimeoutClient` wraps a `reverb.Client` so that
every writer it hands out gives those calls a total timeout, waited in short slices so
that a stop request (`should_stop()`) is noticed within one slice.

    client = TimeoutClient(reverb.Client(address), timeout_s=60, should_stop=event.is_set)
    adder = builder.make_adder(client, environment_spec, policy)   # unchanged adder code

Errors:
  `actorq.components.replay.reverb_replay.ReplayTimeoutError` naming the call, the table server and the
  timeout; `WriterStoppedError` (a subclass) when `should_stop()` became true while waiting.
"""
from __future__ import annotations

from typing import Callable, Optional

import reverb

from actorq.components.replay.reverb_replay import ReplayTimeoutError

_SLICE_MS = 500


class WriterStoppedError(ReplayTimeoutError, reverb.errors.DeadlineExceededError):
  """A blocking write was abandoned because the program is stopping (also a
  `reverb.errors.DeadlineExceededError`, which acme's adders catch when they flush
  on deletion)."""


class TimeoutTrajectoryWriter:
  """A `reverb.TrajectoryWriter` whose `flush` and `end_episode` time out.

  Args:
    writer: the wrapped writer.
    address: the server address (for error messages).
    timeout_s: total seconds one blocking call may take (> 0).
    should_stop: polled every 0.5 s while blocked; True abandons the call.
  Other attributes (`append`, `create_item`, `history`, `close`, ...) pass through.
  """

  def __init__(self, writer: reverb.TrajectoryWriter, address: str, timeout_s: float,
               should_stop: Optional[Callable[[], bool]] = None):
    if timeout_s <= 0:
      raise ValueError(f"timeout_s must be > 0 seconds, got {timeout_s}")
    self._writer = writer
    self._address = address
    self._timeout_ms = int(timeout_s * 1000)
    self._should_stop = should_stop or (lambda: False)

  def __getattr__(self, name):
    return getattr(self._writer, name)

  def _wait(self, what: str, first_call: Callable[[int], None], block_until_num_items: int):
    """Runs `first_call(slice_ms)`, then `flush(block_until_num_items, slice)` until done."""
    waited = 0
    call = first_call
    while True:
      slice_ms = min(_SLICE_MS, self._timeout_ms - waited)
      try:
        call(slice_ms)
        return
      except reverb.errors.DeadlineExceededError:
        waited += slice_ms
      call = lambda ms: self._writer.flush(block_until_num_items, timeout_ms=ms)
      if self._should_stop():
        raise WriterStoppedError(
            f"reverb {what} to {self._address} abandoned after {waited / 1000:.1f} s: "
            "the program is stopping")
      if waited >= self._timeout_ms:
        raise ReplayTimeoutError(
            f"reverb {what} to {self._address} did not complete within "
            f"{self._timeout_ms / 1000:.1f} s (is the server gone, or is the table's rate "
            "limiter holding inserts back because nothing samples?)")

  def flush(self, block_until_num_items: int = 0, timeout_ms: Optional[int] = None):
    """Like `TrajectoryWriter.flush`; `timeout_ms=None` means this writer's timeout."""
    if timeout_ms is not None:
      return TimeoutTrajectoryWriter(self._writer, self._address, timeout_ms / 1000,
                                     self._should_stop).flush(block_until_num_items)
    self._wait("flush", lambda ms: self._writer.flush(block_until_num_items, timeout_ms=ms),
               block_until_num_items)

  def end_episode(self, clear_buffers: bool = True, timeout_ms: Optional[int] = None):
    """Like `TrajectoryWriter.end_episode`; then waits (sliced) for pending items."""
    if timeout_ms is not None:
      return self._writer.end_episode(clear_buffers, timeout_ms=timeout_ms)
    # Wait for pending items in stop-aware slices first: reverb 0.7.0's end_episode skips
    # clearing its Python-side history when it times out, which would leave the adder's
    # indices pointing at released references in the next episode.
    self._wait("end_episode", lambda ms: self._writer.flush(0, timeout_ms=ms), 0)
    try:
      self._writer.end_episode(clear_buffers, timeout_ms=self._timeout_ms)
    except reverb.errors.DeadlineExceededError:
      if clear_buffers:
        for column in getattr(self._writer, "_column_history", []):
          column.reset()
      raise ReplayTimeoutError(
          f"reverb end_episode to {self._address} did not complete within "
          f"{self._timeout_ms / 1000:.1f} s") from None


class TimeoutClient:
  """A `reverb.Client` whose trajectory writers time out (see the module docstring).

  Args:
    client: the wrapped client.
    timeout_s: total seconds for one blocking write, and for `server_info`.
    should_stop: see `TimeoutTrajectoryWriter`.
  """

  def __init__(self, client: reverb.Client, timeout_s: float,
               should_stop: Optional[Callable[[], bool]] = None):
    if timeout_s <= 0:
      raise ValueError(f"timeout_s must be > 0 seconds, got {timeout_s}")
    self._client = client
    self._timeout_s = float(timeout_s)
    self._should_stop = should_stop

  def __getattr__(self, name):
    return getattr(self._client, name)

  @property
  def server_address(self) -> str:
    return self._client.server_address

  def trajectory_writer(self, num_keep_alive_refs: int, *, get_signature_timeout_ms=None, **kw):
    if get_signature_timeout_ms is None:
      get_signature_timeout_ms = int(self._timeout_s * 1000)
    writer = self._client.trajectory_writer(
        num_keep_alive_refs, get_signature_timeout_ms=get_signature_timeout_ms, **kw)
    return TimeoutTrajectoryWriter(writer, self._client.server_address, self._timeout_s,
                                   self._should_stop)

  def server_info(self, timeout: Optional[int] = None):
    """Table infos; `timeout` in whole seconds (default: this client's timeout)."""
    if timeout is None:
      timeout = max(int(self._timeout_s), 1)
    try:
      return self._client.server_info(timeout)
    except (reverb.errors.DeadlineExceededError, RuntimeError) as e:
      raise ReplayTimeoutError(
          f"reverb server_info from {self._client.server_address} did not answer within "
          f"{timeout} s: {e}") from None
