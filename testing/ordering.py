"""The order in which pytest-xdist hands test files to its workers: files with `slow` tests
first (most slow tests first), the many quick files last.

Why: under ``--dist loadfile`` (pytest.ini) the controller gives each worker the next file
of the collection, in collection order, whenever the worker is nearly out of work. In the
alphabetical order the heaviest files came last (``tests/launch/test_stops.py``,
``tests/studies/test_quantize_sweep.py``, ``tests/studies/test_sweep.py`` are among the last
ten of 131), so one worker could run a file of several minutes alone while the other had
finished. Longest jobs first (the LPT rule for two machines) leaves the quick files to even
out the two workers at the end.

pytest-xdist's own default (``--loadscope-reorder``, which applies to ``loadfile`` too)
re-sorts the files by their number of tests, most first, after this hook: that put the
heavy files with few tests at the end (``test_pbt_program``, one ~40 s test, 134th of 140;
``test_ddpg_learner`` 124th) and undid this order. pytest.ini passes
``--no-loadscope-reorder``, so the controller keeps the order the workers collected.

A file's cost is read from its tests' ``slow`` marker (training runs, programs,
subprocesses), the only cost the suite records; the order within a file, and between files
of equal count, is the collection's. Only the order changes: every test still runs.
"""
from __future__ import annotations

import os
from typing import Dict, List

import pytest

SLOW = "slow"
XDIST_WORKER_ENV = "PYTEST_XDIST_WORKER"  # set by pytest-xdist in its worker processes


def slow_files_first(items: List[pytest.Item]) -> List[pytest.Item]:
  """`items` with each file's tests kept together and in order, the files sorted by their
  count of ``slow`` tests, most first (stable: equal counts keep the collection's order)."""
  by_file: Dict[str, List[pytest.Item]] = {}
  for item in items:
    by_file.setdefault(item.nodeid.split("::", 1)[0], []).append(item)
  files = sorted(by_file.values(),
                 key=lambda tests: -sum(t.get_closest_marker(SLOW) is not None for t in tests))
  return [item for tests in files for item in tests]


def pytest_collection_modifyitems(session, config, items):  # pylint: disable=unused-argument
  """In a pytest-xdist worker, reorders `items` in place (`slow_files_first`); every
  worker sorts the same collection the same way, as xdist requires. A run without xdist
  (``-n 0``) keeps the collection's order."""
  if os.environ.get(XDIST_WORKER_ENV):
    items[:] = slow_files_first(items)
