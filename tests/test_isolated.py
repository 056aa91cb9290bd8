"""`actorq.testing.isolated`: tests marked ``isolated`` run in a child pytest process, so a
native abort or a hang fails that one test with the child's output (faulthandler's
stacks), the file's later tests still run, and outcomes and failure texts are as
in-process. Checked on a pytest session of its own (pytester, in a subprocess)."""
import textwrap

import pytest

pytest_plugins = ("pytester",)
# Every test here runs pytest sessions in subprocesses: slow as pytest.ini defines it.
pytestmark = pytest.mark.slow

CONFTEST = """
from actorq.testing import isolated
from actorq.testing.isolated import pytest_configure, pytest_runtest_protocol
isolated.TEST_TIMEOUT_S = 4.0  # the hang below ends after 4 s, not 900
"""

TESTS = """
import os, time
import pytest

def _pid(name):
  with open(os.path.join(os.environ["PIDS"], name), "w") as f:
    f.write(str(os.getpid()))

@pytest.mark.isolated
def test_a_passes(tmp_path):
  _pid("a")
  assert tmp_path.exists()

@pytest.mark.isolated
def test_b_aborts():
  _pid("b")
  os.write(2, b"native message before the abort\\n")  # as C++ code writes to stderr
  os.abort()

@pytest.mark.isolated
def test_c_runs_after_the_abort():
  _pid("c")

@pytest.mark.isolated
def test_d_fails():
  print("printed by d")
  assert 1 + 1 == 3

def test_e_in_process():
  _pid("e")

@pytest.mark.isolated
def test_f_hangs():
  time.sleep(120)

@pytest.mark.isolated
def test_g_skips():
  _pid("g")
  pytest.skip("not here")
"""


def test_an_abort_and_a_hang_fail_their_test_only(pytester, tmp_path, monkeypatch):
  pids = tmp_path / "pids"
  pids.mkdir()
  monkeypatch.setenv("PIDS", str(pids))
  monkeypatch.setenv("TMPDIR", str(tmp_path))  # the children's folders (kept on a failure)
  pytester.makeconftest(CONFTEST)
  pytester.makepyfile(test_inner=TESTS)
  result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-rA")
  result.assert_outcomes(passed=3, failed=3, skipped=1)
  out = result.stdout.str()
  pid = {p.name: int(p.read_text()) for p in pids.iterdir()}
  assert sorted(pid) == ["a", "b", "c", "e", "g"]
  # a and b in one child (a file's tests share one), c in a fresh one after b's abort,
  # g after f's hang in another; e in the session's own process.
  assert pid["a"] == pid["b"] and len({pid["b"], pid["c"], pid["g"], pid["e"]}) == 4
  assert "FAILED test_inner.py::test_b_aborts" in out
  assert ("the child pytest process running this test (marker 'isolated', "
          "actorq.testing.isolated) was killed by SIGABRT in this test;") in out
  assert "Fatal Python error: Aborted" in out and "native message before the abort" in out
  assert 'File "' in out and "in test_b_aborts" in out  # faulthandler's stack of the test
  # A failure is reported as in-process: the assertion and the captured output.
  assert "FAILED test_inner.py::test_d_fails - assert (1 + 1) == 3" in out
  assert "printed by d" in out and "the child's whole output: " in out
  # The hang: faulthandler dumps the stacks after TEST_TIMEOUT_S and ends the child.
  assert "FAILED test_inner.py::test_f_hangs" in out
  assert "actorq.testing.isolated) exited with code 1 in this test;" in out
  assert "Timeout (0:00:04)!" in out and "in test_f_hangs" in out
  skip_line = (pytester.path / "test_inner.py").read_text().splitlines().index(
      '  pytest.skip("not here")') + 1
  assert f"SKIPPED [1] test_inner.py:{skip_line}: not here" in out


def test_under_pdb_a_marked_test_runs_in_process(pytester, tmp_path, monkeypatch):
  monkeypatch.setenv("PIDS", str(tmp_path))
  pytester.makeconftest(CONFTEST)
  pytester.makepyfile(test_inner=textwrap.dedent("""
      import os
      import pytest

      @pytest.mark.isolated
      def test_marked():
        with open(os.path.join(os.environ["PIDS"], "where"), "a") as f:
          f.write("child\\n" if os.environ.get("ACTORQ_ISOLATED_REPORTS") else "here\\n")
  """))
  pytester.runpytest_subprocess("-p", "no:cacheprovider").assert_outcomes(passed=1)
  pytester.runpytest_subprocess("-p", "no:cacheprovider", "--pdb").assert_outcomes(passed=1)
  assert (tmp_path / "where").read_text() == "child\nhere\n"


def test_a_crash_after_the_last_test_is_an_error_of_that_test(pytester):
  """A child that aborts at its exit (after every report: e.g. a thread left running)
  is reported as a teardown error of its last test."""
  pytester.makeconftest(CONFTEST)
  pytester.makepyfile(test_inner=textwrap.dedent("""
      import atexit, os
      import pytest

      @pytest.mark.isolated
      def test_registers_an_abort_at_exit():
        atexit.register(os.abort)
  """))
  result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
  result.assert_outcomes(passed=1, errors=1)
  out = result.stdout.str()
  assert "ERROR at teardown of test_registers_an_abort_at_exit" in out
  assert ("the child pytest process that ran this test (marker 'isolated', "
          "actorq.testing.isolated) was killed by SIGABRT after its last test;") in out


def test_a_file_ending_in_a_marked_test_tears_down_its_module_before_the_next_file(pytester,
                                                                                    tmp_path,
                                                                                    monkeypatch):
  """An in-process test sets up its module (and a module fixture) and a marked test ends
  the file: the module is torn down here before the next file's first test (the full
  suite saw "previous item was not torn down properly" in the next files' first tests)."""
  log = tmp_path / "log"
  monkeypatch.setenv("LOG", str(log))
  pytester.makeconftest(CONFTEST)
  pytester.makepyfile(
      test_a=textwrap.dedent("""
          import os
          import pytest

          def _log(line):
            with open(os.environ["LOG"], "a") as f:
              f.write(line + "\\n")

          @pytest.fixture(scope="module")
          def resource():
            _log("a: set up")
            yield
            _log("a: torn down")

          def test_in_process(resource):
            _log("a: in process")

          @pytest.mark.isolated
          def test_marked_last():
            pass
      """),
      test_b=textwrap.dedent("""
          import os

          def test_next_file():
            with open(os.environ["LOG"], "a") as f:
              f.write("b: first test\\n")
      """))
  result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-n", "0")
  result.assert_outcomes(passed=3)
  assert "not torn down properly" not in result.stdout.str()
  assert log.read_text().splitlines() == ["a: set up", "a: in process", "a: torn down",
                                          "b: first test"]
