"""The k-ary sum tree against brute force: totals, prefix-sum search, updates."""
import numpy as np
import pytest

from actorq.components.replay import sum_tree

SIZES_AND_K = [(1, 2), (5, 2), (7, 3), (16, 16), (17, 16), (100, 4), (1000, 16), (5000, 32)]


def _brute_find(weights, targets):
  """Leaf i with sum_{j<i} w_j <= t < sum_{j<=i} w_j, by a full cumulative sum."""
  cums = np.cumsum(weights)
  return np.searchsorted(cums, targets, side="right")


@pytest.mark.parametrize("capacity,k", SIZES_AND_K)
def test_totals_and_leaves_after_updates_match_brute_force(capacity, k):
  rng = np.random.default_rng(capacity * 31 + k)
  tree = sum_tree.SumTree(capacity, branching=k)
  weights = np.zeros(capacity)
  for _ in range(20):  # batches with repeated indices and zeros
    idx = rng.integers(0, capacity, size=rng.integers(1, 40))
    w = rng.choice([0.0, 0.5, 3.0, 1e-3], size=idx.size) * rng.random(idx.size)
    tree.set(idx, w)
    for i, v in zip(idx, w):  # the last weight of a repeated index wins
      weights[i] = v
    np.testing.assert_allclose(tree.total, weights.sum(), rtol=1e-12, atol=1e-15)
    np.testing.assert_array_equal(tree.get(np.arange(capacity)), weights)
  for i in rng.integers(0, capacity, size=10):  # single-leaf updates
    tree.set(int(i), 2.5)
    weights[i] = 2.5
  np.testing.assert_allclose(tree.total, weights.sum(), rtol=1e-12)


@pytest.mark.parametrize("capacity,k", SIZES_AND_K)
def test_find_is_the_prefix_sum_search(capacity, k):
  rng = np.random.default_rng(capacity + 7 * k)
  weights = rng.random(capacity) * (rng.random(capacity) < 0.7)  # ~30% zeros
  weights[rng.integers(0, capacity)] = 1.0  # a positive total
  tree = sum_tree.SumTree(capacity, branching=k)
  tree.set(np.arange(capacity), weights)
  total = weights.sum()
  # Targets away from the interval edges (the tree and the brute force add in different
  # orders, so a target within rounding of an edge may land on either side).
  targets = rng.random(2000) * total
  cums = np.cumsum(weights)
  gap = np.min(np.abs(cums[:, None] - targets[None, :]), axis=0)
  targets = targets[gap > 1e-9 * total]
  found = tree.find(targets)
  np.testing.assert_array_equal(found, _brute_find(weights, targets))
  assert np.all(weights[found] > 0)


def test_find_never_returns_a_zero_weight_leaf_at_the_edges():
  tree = sum_tree.SumTree(10, branching=4)
  weights = np.array([0, 0, 3, 0, 0, 1, 0, 0, 0, 0], np.float64)
  tree.set(np.arange(10), weights)
  found = tree.find([0.0, 2.999999, 3.0, 3.5, 4.0, 4.0 + 1e-12, 1e9])
  np.testing.assert_array_equal(found, [2, 2, 5, 5, 5, 5, 5])


def test_sampling_frequencies_follow_the_weights():
  from scipy import stats
  rng = np.random.default_rng(0)
  weights = np.array([1.0, 2.0, 0.0, 4.0, 8.0, 0.5])
  tree = sum_tree.SumTree(6, branching=16)
  tree.set(np.arange(6), weights)
  counts = np.bincount(tree.find(rng.random(50_000) * tree.total), minlength=6)
  assert counts[2] == 0
  nz = weights > 0
  expected = 50_000 * weights[nz] / weights.sum()
  assert stats.chisquare(counts[nz], expected).pvalue > 1e-4


def test_internal_nodes_are_a_function_of_the_leaves():
  """Recomputed (not delta-updated) parents: any update order gives the same nodes."""
  rng = np.random.default_rng(3)
  weights = rng.random(300)
  a = sum_tree.SumTree(300, branching=16)
  a.set(np.arange(300), weights)
  b = sum_tree.SumTree(300, branching=16)
  for i in rng.permutation(300):
    b.set(int(i), rng.random() * 100)  # noise first, then the final weights one by one
  for i in rng.permutation(300):
    b.set(int(i), weights[i])
  np.testing.assert_array_equal(a.nodes, b.nodes)
  c = sum_tree.SumTree(300, branching=16, nodes=a.nodes)
  np.testing.assert_array_equal(c.find([0.1, 50.0, 140.0]), a.find([0.1, 50.0, 140.0]))


def test_depth_of_a_million_leaves():
  assert sum_tree.SumTree(1_000_000, branching=16).depth == 5
  assert sum_tree.SumTree(1_000_000, branching=32).depth == 4
  assert sum_tree.SumTree(1_000_000, branching=2).depth == 20


def test_invalid_weights_and_indices_raise_and_write_nothing():
  tree = sum_tree.SumTree(8)
  tree.set([0, 1], [1.0, 2.0])
  for bad in (np.nan, np.inf, -1.0):
    with pytest.raises(ValueError, match="finite and >= 0"):
      tree.set([2, 3], [5.0, bad])
  with pytest.raises(IndexError):
    tree.set([8], [1.0])
  np.testing.assert_array_equal(tree.get(np.arange(4)), [1.0, 2.0, 0.0, 0.0])
  assert tree.total == 3.0
  with pytest.raises(ValueError, match="total weight is 0"):
    sum_tree.SumTree(4).find([0.0])
  with pytest.raises(ValueError, match="has shape"):
    sum_tree.SumTree(8, nodes=np.zeros(3))


@pytest.mark.parametrize("capacity,k", SIZES_AND_K)
def test_set_range_leaves_the_nodes_of_set_bit_for_bit(capacity, k):
  """A run of consecutive leaves (a batch insert) set by slices gives exactly the nodes of
  `set` on the same indices, and the leaves and totals of brute force."""
  rng = np.random.default_rng(capacity + 7 * k)
  by_range, by_set = sum_tree.SumTree(capacity, k), sum_tree.SumTree(capacity, k)
  weights = np.zeros(capacity)
  for _ in range(60):
    n = int(rng.integers(1, min(capacity, 40) + 1))
    start = int(rng.integers(0, capacity - n + 1))
    w = rng.random(n) * rng.choice([1e-3, 1.0, 1e6])
    by_range.set_range(start, w)
    by_set.set(np.arange(start, start + n), w)
    weights[start:start + n] = w
    np.testing.assert_array_equal(by_range.nodes, by_set.nodes)
  np.testing.assert_array_equal(by_range.get(np.arange(capacity)), weights)
  assert by_range.total == pytest.approx(weights.sum(), rel=1e-12)


def test_set_range_refuses_a_run_outside_the_leaves_and_bad_weights():
  tree = sum_tree.SumTree(10, 4)
  with pytest.raises(IndexError, match="out of range"):
    tree.set_range(8, [1.0, 1.0, 1.0])
  with pytest.raises(ValueError, match="finite and >= 0"):
    tree.set_range(0, [1.0, -1.0])
  assert tree.total == 0.0
