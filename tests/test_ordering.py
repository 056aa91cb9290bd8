"""`actorq.testing.ordering`: under pytest-xdist the files with the most `slow` tests are
collected first, each file's tests together and in their order; without xdist the
collection's order is kept."""
import textwrap

from actorq.testing import ordering

pytest_plugins = ("pytester",)


class _Item:
  def __init__(self, nodeid, slow):
    self.nodeid, self._slow = nodeid, slow

  def get_closest_marker(self, name):
    return object() if name == ordering.SLOW and self._slow else None


def test_files_are_sorted_by_their_slow_tests_and_keep_their_own_order():
  items = [_Item("a.py::t1", False), _Item("a.py::t2", False),
           _Item("b.py::t1", True), _Item("b.py::t2", False),
           _Item("c.py::t[1]", True), _Item("c.py::t[2]", True), _Item("c.py::u", False),
           _Item("d.py::t", True)]
  order = [i.nodeid for i in ordering.slow_files_first(items)]
  assert order == ["c.py::t[1]", "c.py::t[2]", "c.py::u",  # two slow tests
                   "b.py::t1", "b.py::t2", "d.py::t",       # one each: collection order
                   "a.py::t1", "a.py::t2"]


def test_a_worker_collects_slow_files_first_and_a_plain_run_does_not(pytester, monkeypatch):
  pytester.makeconftest("from actorq.testing.ordering import pytest_collection_modifyitems\n")
  pytester.makepyfile(
      test_a="def test_quick():\n  pass\n",
      test_b=textwrap.dedent("""
          import pytest
          @pytest.mark.slow
          def test_long():
            pass
          def test_quick():
            pass
          """))
  monkeypatch.delenv(ordering.XDIST_WORKER_ENV, raising=False)
  plain = pytester.runpytest_inprocess("--collect-only", "-q", "-p", "no:xdist")
  assert [l for l in plain.outlines if "::" in l] == [
      "test_a.py::test_quick", "test_b.py::test_long", "test_b.py::test_quick"]
  monkeypatch.setenv(ordering.XDIST_WORKER_ENV, "gw0")
  worker = pytester.runpytest_inprocess("--collect-only", "-q", "-p", "no:xdist")
  assert [l for l in worker.outlines if "::" in l] == [
      "test_b.py::test_long", "test_b.py::test_quick", "test_a.py::test_quick"]
