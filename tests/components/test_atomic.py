"""`components.atomic.atomic_write`: whole new file or the old one, never a part."""
import os
import stat

import pytest

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
