"""`components.atomic.atomic_write`: whole new file or the old one, never a part."""
import json
import os
import resource
import signal
import stat
import threading

import pytest

from actorq import core
from actorq.components import atomic


def test_writes_text_and_bytes_and_replaces_the_old_file(tmp_path):
  path = str(tmp_path / "run.json")
  with atomic.atomic_write(path) as f:
    f.write("old\n")
  with atomic.atomic_write(path) as f:
    f.write("new\n")
  assert open(path).read() == "new\n"
  with atomic.atomic_write(path, "wb", durable=True) as f:
    f.write(b"\x00\x01")
  assert open(path, "rb").read() == b"\x00\x01"
  assert os.listdir(tmp_path) == ["run.json"]  # no temporary file left


def test_an_error_in_the_block_keeps_the_old_file_and_leaves_no_temporary(tmp_path):
  path = str(tmp_path / "table.csv")
  with atomic.atomic_write(path) as f:
    f.write("a,b\n1,2\n")
  with pytest.raises(KeyError):
    with atomic.atomic_write(path) as f:
      f.write("a,b\n")
      raise KeyError("half written")
  assert open(path).read() == "a,b\n1,2\n"
  assert os.listdir(tmp_path) == ["table.csv"]


def test_permissions_follow_the_umask_or_the_owner_only_request(tmp_path):
  old = os.umask(0o022)
  try:
    default, private = str(tmp_path / "a"), str(tmp_path / "b")
    with atomic.atomic_write(default) as f:
      f.write("x")
    with atomic.atomic_write(private, "wb", permissions=0o600) as f:
      f.write(b"x")
  finally:
    os.umask(old)
  assert stat.S_IMODE(os.stat(default).st_mode) == 0o644
  assert stat.S_IMODE(os.stat(private).st_mode) == 0o600


def test_a_bad_mode_is_refused(tmp_path):
  with pytest.raises(ValueError, match="atomic_write mode must be 'w' or 'wb', got 'a'"):
    with atomic.atomic_write(str(tmp_path / "x"), "a"):
      pass


def _pair(tmp_path):
  model, meta = str(tmp_path / "policy.tflite"), str(tmp_path / "policy.json")
  atomic.write_together({model: b"old model", meta: '{"old": true}'})
  return model, meta


def test_write_together_replaces_a_pair_whole(tmp_path):
  model, meta = _pair(tmp_path)
  assert open(model, "rb").read() == b"old model" and open(meta).read() == '{"old": true}'
  atomic.write_together({model: b"new model", meta: '{"new": true}'}, durable=True)
  assert open(model, "rb").read() == b"new model" and open(meta).read() == '{"new": true}'
  assert sorted(os.listdir(tmp_path)) == ["policy.json", "policy.tflite"]


def test_write_together_a_failed_second_rename_puts_the_first_file_back(tmp_path, monkeypatch):
  model, meta = _pair(tmp_path)
  real = os.replace
  calls = []

  def replace(src, dst):
    calls.append(dst)
    if dst == meta and len(calls) == 2:  # the model is in place, the JSON's rename fails
      raise OSError(28, "No space left on device", dst)
    return real(src, dst)

  monkeypatch.setattr(atomic.os, "replace", replace)
  with pytest.raises(OSError, match="No space left on device"):
    atomic.write_together({model: b"new model", meta: '{"new": true}'})
  assert open(model, "rb").read() == b"old model" and open(meta).read() == '{"old": true}'
  assert sorted(os.listdir(tmp_path)) == ["policy.json", "policy.tflite"]
  # A pair that did not exist before is not left half there either.
  calls.clear()
  fresh_model, fresh_meta = str(tmp_path / "b.tflite"), str(tmp_path / "b.json")
  meta = fresh_meta
  with pytest.raises(OSError):
    atomic.write_together({fresh_model: b"m", fresh_meta: "{}"})
  assert sorted(os.listdir(tmp_path)) == ["policy.json", "policy.tflite"]


def test_write_together_a_failed_write_replaces_nothing(tmp_path):
  model, meta = _pair(tmp_path)
  soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
  previous = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
  resource.setrlimit(resource.RLIMIT_FSIZE, (1000, hard))  # a "full disk" at 1000 bytes
  try:
    with pytest.raises(OSError) as info:
      atomic.write_together({model: b"x" * 5000, meta: "{}"})
  finally:
    resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    signal.signal(signal.SIGXFSZ, previous)
  assert info.value.strerror == "File too large"
  assert open(model, "rb").read() == b"old model" and open(meta).read() == '{"old": true}'
  assert sorted(os.listdir(tmp_path)) == ["policy.json", "policy.tflite"]


def test_ensure_writable_dir_is_safe_when_runs_start_together(tmp_path):
  # Two sweeps started at once (one per core) create and probe one logdir at the same time;
  # a shared probe name let one remove the other's probe (FileNotFoundError -> UsageError).
  path = str(tmp_path / "logdir")
  errors = []

  def probe():
    for _ in range(200):
      try:
        atomic.ensure_writable_dir(path)
      except core.UsageError as e:
        errors.append(str(e))

  threads = [threading.Thread(target=probe) for _ in range(4)]
  for t in threads:
    t.start()
  for t in threads:
    t.join()
  assert errors == [] and os.listdir(path) == []


def test_write_json_makes_the_folder_and_replaces_the_file_whole(tmp_path):
  path = str(tmp_path / "new" / "result.json")
  atomic.write_json(path, {"b": 1, "a": [1.5, None]})
  assert open(path).read() == '{\n "b": 1,\n "a": [\n  1.5,\n  null\n ]\n}'
  atomic.write_json(path, {"b": 2, "a": 0}, indent=2, sort_keys=True)
  assert json.load(open(path)) == {"a": 0, "b": 2}
  assert open(path).read().startswith('{\n  "a": 0')
  with pytest.raises(TypeError):
    atomic.write_json(path, {"x": object()})
  assert json.load(open(path)) == {"a": 0, "b": 2}  # the old file, and no temporary left
  assert os.listdir(os.path.dirname(path)) == ["result.json"]
