"""A k-ary sum tree in one flat numpy array: prefix-sum sampling for prioritized replay.

Leaf i holds a non-negative weight w_i (prioritized replay stores w_i = p_i^alpha, so
that sampling leaf i with probability w_i / sum_k w_k is Schaul et al. 2016, eq. 1).
Every internal node holds the sum of its k children; node 0 (the root) is the total.

Layout: the k-ary heap order. Node n's children are `k*n + 1 .. k*n + k` and its parent
is `(n - 1) // k`; the leaves are the last `k**depth` nodes, starting at
`(k**depth - 1) // (k - 1)`, where `depth = ceil(log_k(capacity))`.

Why k = 16 and not 2: sampling a batch walks the tree level by level, each level being
one vectorised numpy step over the whole batch (gather the B x k children, cumulative
sum, compare with the targets). The cost of a level is dominated by numpy's per-call
overhead (microseconds), not by its k additions, so fewer levels win: a million leaves
need 5 levels at k = 16 and 20 at k = 2. Sixteen float64 children are 128 contiguous
bytes (two cache lines), read in one gather. Updates likewise touch `depth` parents.

A parent is always *recomputed* as the sum of its k children, never adjusted by a
delta, so millions of updates accumulate no rounding drift: the internal nodes are a
function of the leaves alone.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

DEFAULT_BRANCHING = 16


class SumTree:
  """Sums of `capacity` non-negative float64 leaf weights in a k-ary tree.

  Args:
    capacity: number of leaves that can hold a weight (>= 1); leaf indices are
      `0 .. capacity - 1`, all starting at weight 0.
    branching: k, children per internal node (>= 2).
    nodes: optional float64 node array (from `nodes` of a tree of the same capacity
      and branching) to take over verbatim, e.g. from a checkpoint.

  Raises:
    ValueError: capacity < 1, branching < 2, or `nodes` of the wrong length.
  """

  def __init__(self, capacity: int, branching: int = DEFAULT_BRANCHING,
               nodes: Optional[np.ndarray] = None):
    if capacity < 1:
      raise ValueError(f"capacity must be >= 1, got {capacity}")
    if branching < 2:
      raise ValueError(f"branching must be >= 2, got {branching}")
    self.capacity, self.branching = int(capacity), int(branching)
    depth, width = 1, self.branching
    while width < self.capacity:
      depth, width = depth + 1, width * self.branching
    self.depth = depth
    self._first_leaf = (width - 1) // (self.branching - 1)
    size = self._first_leaf + width
    if nodes is None:
      self._nodes = np.zeros(size, np.float64)
    else:
      nodes = np.array(nodes, np.float64)
      if nodes.shape != (size,):
        raise ValueError(f"nodes has shape {nodes.shape}; a tree of capacity {capacity} and "
                         f"branching {branching} has ({size},)")
      self._nodes = nodes
    self._offsets = np.arange(1, self.branching + 1)

  @property
  def nodes(self) -> np.ndarray:
    """float64 [num_nodes]: a copy of every node, root first (for checkpoints)."""
    return self._nodes.copy()

  @property
  def total(self) -> float:
    """The sum of all leaf weights."""
    return float(self._nodes[0])

  def get(self, indices) -> np.ndarray:
    """float64 weights of the leaves `indices` (int array of any shape)."""
    return self._nodes[self._first_leaf + np.asarray(indices, np.int64)]

  def set(self, indices, weights) -> None:
    """Sets the weights of leaves `indices` (int [N]) to `weights` (float [N] or a scalar).

    Repeated indices: the last weight wins.

    Raises:
      IndexError: an index outside `0 .. capacity - 1`.
      ValueError: a weight that is negative or not finite (nothing is written).
    """
    idx = np.atleast_1d(np.asarray(indices, np.int64))
    w = np.broadcast_to(np.asarray(weights, np.float64), idx.shape)
    if idx.size and (idx.min() < 0 or idx.max() >= self.capacity):
      raise IndexError(f"leaf index out of range 0..{self.capacity - 1}: {idx}")
    if not np.all(np.isfinite(w) & (w >= 0)):
      raise ValueError(f"sum tree weights must be finite and >= 0, got {w}")
    nodes = self._first_leaf + idx
    self._nodes[nodes] = w
    k = self.branching
    for _ in range(self.depth):
      parents = np.unique((nodes - 1) // k)
      self._nodes[parents] = self._nodes[parents[:, None] * k + self._offsets].sum(axis=1)
      nodes = parents

  def find(self, targets) -> np.ndarray:
    """int64 leaf indices whose prefix-sum interval holds each target.

    Leaf i is returned for a target t with `sum_{j<i} w_j <= t < sum_{j<=i} w_j`, so a
    target drawn uniformly from [0, total) returns leaf i with probability w_i / total;
    a leaf of weight 0 is never returned. Targets at or beyond the total (rounding)
    return the last leaf of positive weight.

    Args:
      targets: float [B], in [0, total).

    Raises:
      ValueError: the tree's total is 0 (no leaf can be returned).
    """
    if not self._nodes[0] > 0:
      raise ValueError("the sum tree's total weight is 0: nothing can be sampled")
    t = np.array(targets, np.float64).reshape(-1)
    node = np.zeros(t.shape, np.int64)
    rows = np.arange(t.shape[0])
    k = self.branching
    for _ in range(self.depth):
      children = node[:, None] * k + self._offsets
      weights = self._nodes[children]
      cums = np.cumsum(weights, axis=1)
      j = np.sum(cums <= t[:, None], axis=1)
      over = j >= k
      if over.any():  # rounding put t at or past this node's sum: take its last positive child
        last_positive = k - 1 - np.argmax(weights[over, ::-1] > 0, axis=1)
        j[over] = last_positive
      t = t - np.where(j > 0, cums[rows, np.maximum(j - 1, 0)], 0.0)
      node = children[rows, j]
    return node - self._first_leaf
