"""Atomic checkpoints: keep-K, corrupt/truncated files skipped, Reverb tables restored."""
import os
import warnings

import numpy as np
import pytest
import reverb

from actorq.components import checkpointing


def _state(i):
  return {"w": np.full((3,), float(i), np.float32), "actor_steps": i}


def test_keeps_the_newest_k_and_ignores_temporary_files(tmp_path):
  d = str(tmp_path)
  for step in (10, 20, 30, 40):
    checkpointing.save(d, _state(step), step, keep=2)
  (tmp_path / ".ckpt-leftover.tmp").write_bytes(b"half written")
  names = [os.path.basename(p) for p in checkpointing.list_checkpoints(d)]
  assert names == ["ckpt-000000000030.pkl", "ckpt-000000000040.pkl"]
  path, state = checkpointing.restore_latest(d)
  assert path.endswith("ckpt-000000000040.pkl") and state["actor_steps"] == 40
  np.testing.assert_array_equal(state["w"], np.full((3,), 40.0, np.float32))


@pytest.mark.parametrize("damage", ["truncate", "flip_byte", "empty"])
def test_damaged_newest_falls_back_to_the_previous(tmp_path, damage):
  d = str(tmp_path)
  for step in (100, 200, 300):
    checkpointing.save(d, _state(step), step)
  newest = checkpointing.list_checkpoints(d)[-1]
  data = open(newest, "rb").read()
  if damage == "truncate":
    data = data[: len(data) // 2]
  elif damage == "flip_byte":
    data = data[:-5] + bytes([data[-5] ^ 0xFF]) + data[-4:]
  else:
    data = b""
  open(newest, "wb").write(data)
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    path, state = checkpointing.restore_latest(d)
  assert path.endswith("ckpt-000000000200.pkl") and state["actor_steps"] == 200
  assert any("ckpt-000000000300.pkl" in str(w.message) for w in caught)
  with pytest.raises(checkpointing.CheckpointError):
    checkpointing.load(newest)


def test_a_failed_write_is_one_line_and_keeps_the_older_checkpoints(tmp_path, monkeypatch):
  """A full disk (ENOSPC from the write): RunDirectoryError naming the file and why, no
  temporary file left, and the older checkpoints untouched."""
  import errno
  from actorq import core
  d = str(tmp_path)
  checkpointing.save(d, _state(100), 100)
  real_fsync = os.fsync

  def full(fd):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

  monkeypatch.setattr(os, "fsync", full)
  with pytest.raises(core.RunDirectoryError) as e:
    checkpointing.save(d, _state(200), 200)
  monkeypatch.setattr(os, "fsync", real_fsync)
  assert str(e.value) == (f"cannot write {d}/ckpt-000000000200.pkl: No space left on device; "
                          "the checkpoints written before are kept")
  assert sorted(os.listdir(d)) == ["ckpt-000000000100.pkl"]
  assert checkpointing.restore_latest(d)[1]["actor_steps"] == 100


def test_no_checkpoint_gives_none(tmp_path):
  assert checkpointing.restore_latest(str(tmp_path)) == (None, None)
  with pytest.raises(ValueError, match="keep must be >= 1"):
    checkpointing.save(str(tmp_path), {}, 1, keep=0)


def _table():
  import tensorflow as tf
  return [reverb.Table("t", reverb.selectors.Fifo(), reverb.selectors.Fifo(), 100,
                       reverb.rate_limiters.MinSize(1), max_times_sampled=1,
                       signature=tf.TensorSpec((), tf.float32))]


def _items(client, n):
  ds = reverb.TimestepDataset.from_table_signature(
      server_address=client.server_address, table="t", max_in_flight_samples_per_worker=1,
      rate_limiter_timeout_ms=2000)
  return sorted(float(s.data) for s in ds.take(n).as_numpy_iterator())


def test_run_checkpoints_restore_the_reverb_table_they_were_saved_with(tmp_path):
  d = str(tmp_path / "checkpoints")
  os.makedirs(d)
  server = reverb.Server(_table(), checkpointer=checkpointing.reverb_checkpointer(d))
  client = reverb.Client(f"localhost:{server.port}")
  for step in (1, 2, 3):
    client.insert(np.float32(step), {"t": 1.0})
    checkpointing.save_run(d, {"actor_steps": step}, step, keep=2, replay_client=client)
  server.stop()
  assert sorted(n for n in os.listdir(d) if n.startswith("replay-")) == [
      "replay-000000000002", "replay-000000000003"]  # pruned with their pickles
  assert os.listdir(os.path.join(d, checkpointing.REPLAY_STAGING)) == []

  # The newest pickle is truncated: its replay folder must not be used either.
  newest = checkpointing.list_checkpoints(d)[-1]
  open(newest, "r+b").truncate(10)
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    path, state = checkpointing.restore_latest(d, checkpointing.validate_run)
  assert state["actor_steps"] == 2 and state["replay_checkpoint"] == "replay-000000000002"
  server = reverb.Server(_table(), checkpointer=checkpointing.reverb_checkpointer(
      d, state["replay_checkpoint"]))
  client = reverb.Client(f"localhost:{server.port}")
  assert client.server_info()["t"].current_size == 2
  assert _items(client, 2) == [1.0, 2.0]
  server.stop()


def test_a_missing_replay_folder_makes_the_checkpoint_unusable(tmp_path):
  d = str(tmp_path)
  checkpointing.save(d, {"actor_steps": 1, "replay_checkpoint": None}, 1)
  checkpointing.save(d, {"actor_steps": 2, "replay_checkpoint": "replay-000000000002"}, 2)
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    _, state = checkpointing.restore_latest(d, checkpointing.validate_run)
  assert state["actor_steps"] == 1
  assert any("replay checkpoint replay-000000000002 is missing" in str(w.message) for w in caught)
