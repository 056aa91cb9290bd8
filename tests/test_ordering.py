"""`actorq.testing.ordering`: under pytest-xdist the files with the most `slow` tests are
collected first, each file's tests together and in their order; without xdist the
collection's order is kept."""
from actorq.testing import ordering


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


def test_only_a_worker_reorders(monkeypatch):
  items = [_Item("a.py::t", False), _Item("b.py::t", True)]
  monkeypatch.delenv(ordering.XDIST_WORKER_ENV, raising=False)
  ordering.pytest_collection_modifyitems(None, None, items)  # -n 0: the collection's order
  assert [i.nodeid for i in items] == ["a.py::t", "b.py::t"]
  monkeypatch.setenv(ordering.XDIST_WORKER_ENV, "gw0")
  ordering.pytest_collection_modifyitems(None, None, items)  # in place
  assert [i.nodeid for i in items] == ["b.py::t", "a.py::t"]


def test_the_suites_xdist_keeps_the_order_the_workers_collected(pytestconfig):
  """pytest-xdist re-sorts the files by their test count unless told not to
  (``--loadscope-reorder`` is its default, under ``--dist loadfile`` too), which undoes
  `slow_files_first`: pytest.ini turns it off."""
  assert pytestconfig.getoption("loadscopereorder") is False
