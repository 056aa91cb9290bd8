"""Handed case R1: no Reverb call blocks forever (sample, and a writer's flush)."""
import time

import numpy as np
import pytest
import reverb
import tensorflow as tf

from actorq.components.replay import reverb_replay as replay, reverb_timeouts


def _table():
  return reverb.Table("t", reverb.selectors.Uniform(), reverb.selectors.Fifo(), max_size=100,
                      rate_limiter=reverb.rate_limiters.MinSize(5),
                      signature={"x": tf.TensorSpec([], tf.float32)})


def _write(writer, value):
  writer.append({"x": np.float32(value)})
  writer.create_item("t", 1.0, {"x": writer.history["x"][-1]})


def test_sample_below_min_size_times_out():
  server = reverb.Server([_table()])
  try:
    client = reverb.Client(f"localhost:{server.port}")
    writer = client.trajectory_writer(1)
    _write(writer, 0.0)
    _write(writer, 1.0)
    writer.flush()
    assert client.server_info()["t"].current_size == 2
    start = time.time()
    with pytest.raises(replay.ReplayTimeoutError, match="timeout"):
      replay.sample(f"localhost:{server.port}", "t", 1, timeout_s=2.0)
    elapsed = time.time() - start
    assert 1.9 <= elapsed < 3.0
  finally:
    server.stop()


def test_flush_to_a_stopped_server_times_out():
  server = reverb.Server([_table()])
  client = reverb_timeouts.TimeoutClient(reverb.Client(f"localhost:{server.port}"), timeout_s=2.0)
  writer = client.trajectory_writer(1)
  _write(writer, 0.0)
  writer.flush()
  server.stop()
  _write(writer, 1.0)
  start = time.time()
  with pytest.raises(replay.ReplayTimeoutError, match="did not complete within 2.0 s"):
    writer.flush()
  assert 1.9 <= time.time() - start < 3.0
  start = time.time()
  with pytest.raises(replay.ReplayTimeoutError):
    writer.end_episode()
  assert time.time() - start < 3.0


def test_flush_gives_up_when_stopping():
  server = reverb.Server([_table()])
  stopping = {"now": False}
  client = reverb_timeouts.TimeoutClient(reverb.Client(f"localhost:{server.port}"), timeout_s=60.0,
                                         should_stop=lambda: stopping["now"])
  writer = client.trajectory_writer(1)
  _write(writer, 0.0)
  writer.flush()
  server.stop()
  _write(writer, 1.0)
  stopping["now"] = True
  start = time.time()
  with pytest.raises(reverb_timeouts.WriterStoppedError, match="stopping"):
    writer.flush()
  assert time.time() - start < 1.5  # one 0.5 s slice, not the 60 s timeout


def test_timeouts_must_be_positive():
  with pytest.raises(ValueError, match="timeout_s must be > 0"):
    reverb_timeouts.TimeoutClient(None, timeout_s=0)
