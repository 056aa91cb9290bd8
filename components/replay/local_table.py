"""The tables of the in-process replay (`local_replay.LocalReplayClient`).

`LocalTable` holds one table's items, built from a `reverb.Table`'s `info`: one ring
buffer per flattened signature column (numpy, allocated at 1,024 slots and doubled as
the table fills, up to `max_size`), the items' priorities and, for a prioritized table,
a 16-ary sum tree of p_i^alpha (`sum_tree.SumTree`). Items leave oldest first (FIFO
remover, FIFO sampler), so the live keys are always the contiguous range
[first, next) of insertion counters and key k lives in slot k % capacity.

Sampling draws from the generator it is given:
  * uniform: P(i) = 1 / N;
  * prioritized: P(i) = p_i^alpha / sum_k p_k^alpha (Schaul et al. 2016, eq. 1); an item
    of priority 0 is never drawn (also with alpha = 0), and when every priority is 0 the
    draw is uniform, as Reverb's PrioritizedSelector;
  * fifo: the oldest item; with max_times_sampled m > 0 it leaves after m samples
    (`reverb.Table.queue`: m = 1).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, Optional, Sequence

import numpy as np
import reverb
import tree

from actorq.components.replay import priorities, sum_tree

_INITIAL_CAPACITY = 1024  # slots allocated first; doubled as a table fills, up to max_size
_SAMPLERS = ("uniform", "prioritized", "fifo")


class NotEnoughItemsError(RuntimeError):
  """A sample from a table holding fewer items than its min size to sample (or, for a
  queue, than the batch). Reverb would block; a single-process run never waits."""


class TableFullError(RuntimeError):
  """An insert into a full queue (a bug in a single-process run: nobody else samples)."""


@dataclasses.dataclass(frozen=True)
class LocalTableInfo:
  """What `LocalReplayClient.server_info()` reports per table (cf. `reverb.TableInfo`).

  Attributes:
    name: the table's name.
    sampler: "uniform", "prioritized" or "fifo".
    max_size: items the table holds at most.
    max_times_sampled: samples after which an item is removed (0: unlimited).
    min_size_to_sample: items needed before a sample.
    current_size: items held now.
    num_inserted: items inserted so far (the next item's key).
    signature: the table's signature (nest of `tf.TensorSpec`).
  """
  name: str
  sampler: str
  max_size: int
  max_times_sampled: int
  min_size_to_sample: int
  current_size: int
  num_inserted: int
  signature: Any


def _column_names(signature: Any) -> List[str]:
  return ["/".join(str(p) for p in path) or "<root>"
          for path, _ in tree.flatten_with_path(signature)]


class LocalTable:
  """One table's items and its sampler (see the module docstring).

  Args:
    table: the `reverb.Table` whose `name` and `info` (sampler, remover, max size, max
      times sampled, min size to sample, signature) it copies.

  Raises:
    ValueError: no signature, or a signature shape that is not fully defined.
    NotImplementedError: a sampler other than uniform, prioritized, fifo; a remover other
      than fifo; max_times_sampled with a uniform or prioritized sampler.
  """

  def __init__(self, table: reverb.Table):
    info = table.info
    self.name = table.name
    self.sampler = info.sampler_options.WhichOneof("distribution")
    remover = info.remover_options.WhichOneof("distribution")
    self.alpha = float(info.sampler_options.prioritized.priority_exponent)
    self.max_size = int(info.max_size)
    self.max_times_sampled = max(int(info.max_times_sampled), 0)
    self.min_size = max(int(info.rate_limiter_info.min_size_to_sample), 1)
    if self.sampler not in _SAMPLERS or remover != "fifo":
      raise NotImplementedError(
          f"table {self.name!r}: sampler {self.sampler!r} with remover {remover!r}; the local "
          f"replay has samplers {', '.join(_SAMPLERS)} with the fifo remover")
    if self.max_times_sampled and self.sampler != "fifo":
      raise NotImplementedError(
          f"table {self.name!r}: max_times_sampled={self.max_times_sampled} with the "
          f"{self.sampler} sampler would remove items out of order; not supported locally")
    self.is_queue = self.sampler == "fifo" and self.max_times_sampled == 1
    if info.signature is None:
      raise ValueError(f"table {self.name!r} has no signature; the local replay needs one")
    self.signature = info.signature
    self.names = _column_names(info.signature)
    self.specs = []  # (dtype, shape) per flattened column
    for name, spec in zip(self.names, tree.flatten(info.signature)):
      if not spec.shape.is_fully_defined():
        raise ValueError(f"table {self.name!r}: column {name!r} has shape {spec.shape}; the "
                         "local replay needs fully defined signature shapes")
      self.specs.append((np.dtype(spec.dtype.as_numpy_dtype), tuple(spec.shape.as_list())))
    self.first, self.next = 0, 0
    self.head_times_sampled = 0  # samples taken of the oldest item (fifo sampler)
    self._allocate(min(_INITIAL_CAPACITY, self.max_size))

  @property
  def size(self) -> int:
    """Items held now."""
    return self.next - self.first

  def _allocate(self, capacity: int, tree_nodes: Optional[np.ndarray] = None) -> None:
    self.capacity = capacity
    self.columns = [np.zeros((capacity, *shape), dtype) for dtype, shape in self.specs]
    self.priorities = np.zeros(capacity, np.float64)
    self.tree = (sum_tree.SumTree(capacity, nodes=tree_nodes) if self.sampler == "prioritized"
                 else None)

  def _live_slots(self) -> np.ndarray:
    return np.arange(self.first, self.next, dtype=np.int64) % self.capacity

  def _grow(self) -> None:
    old_slots = self._live_slots()
    columns, priorities = [c[old_slots] for c in self.columns], self.priorities[old_slots]
    self._allocate(min(2 * self.capacity, self.max_size))
    slots = self._live_slots()
    for column, values in zip(self.columns, columns):
      column[slots] = values
    self.priorities[slots] = priorities
    if self.tree is not None:
      self.tree.set(slots, self._weights(priorities))

  def _weights(self, priorities: np.ndarray) -> np.ndarray:
    """p^alpha, and 0 for p = 0 also when alpha = 0 (as Reverb: such items are never drawn)."""
    return np.where(priorities > 0, priorities ** self.alpha, 0.0)

  def check(self, values: Sequence[np.ndarray]) -> None:
    """Raises ValueError naming the column when `values` do not fit the signature."""
    if len(values) != len(self.specs):
      raise ValueError(f"cannot insert into table {self.name!r}: the item has {len(values)} "
                       f"columns but the table signature has {len(self.specs)} "
                       f"({', '.join(self.names)})")
    for name, (dtype, shape), v in zip(self.names, self.specs, values):
      if v.dtype != dtype or v.shape != shape:
        raise ValueError(f"cannot insert into table {self.name!r}: column {name!r} is {v.dtype} "
                         f"{list(v.shape)} but the table signature says {dtype} {list(shape)}")

  def insert(self, values: Sequence[np.ndarray], priority: float) -> None:
    """Stores copies of one item's flattened columns with `priority`; a full table drops
    its oldest item first.

    Raises:
      ValueError: a column that does not fit the signature (named), or a priority that
        is NaN, +-inf or negative; nothing is stored then.
      TableFullError: the table is a full queue.
    """
    self.check(values)
    priority = priorities.validate_priorities([priority])
    if self.size >= self.max_size:
      if self.is_queue:
        raise TableFullError(f"queue {self.name!r} is full ({self.max_size} items): nothing "
                             "samples it in between, so Reverb would block forever")
      self._remove_oldest()
    if self.size >= self.capacity:
      self._grow()
    slot = self.next % self.capacity
    for column, v in zip(self.columns, values):
      column[slot] = v
    self.priorities[slot] = priority[0]
    if self.tree is not None:
      self.tree.set(slot, float(self._weights(priority)[0]))
    self.next += 1

  def insert_batch(self, columns: Sequence[np.ndarray], priorities_: np.ndarray) -> None:
    """Stores copies of K items at once: `columns[c]` is column c of every item, shape
    `[K, *shape]`, and `priorities_` float [K]. The table ends as K `insert` calls in
    row order would leave it (a full table drops its oldest items first).

    Raises:
      ValueError: a column that does not fit the signature (named) or whose leading dims
        differ, or a priority that is NaN, +-inf or negative; nothing is stored then.
      TableFullError: a queue without room for all K items (nothing is stored).
    """
    p = priorities.validate_priorities(priorities_)
    k = int(p.shape[0])
    if len(columns) != len(self.specs):
      raise ValueError(f"cannot insert into table {self.name!r}: the items have "
                       f"{len(columns)} columns but the table signature has {len(self.specs)} "
                       f"({', '.join(self.names)})")
    for name, (dtype, shape), v in zip(self.names, self.specs, columns):
      if v.dtype != dtype or tuple(v.shape) != (k,) + shape:
        raise ValueError(f"cannot insert into table {self.name!r}: column {name!r} is {v.dtype} "
                         f"{list(v.shape)} but {k} items of the table signature are {dtype} "
                         f"{[k] + list(shape)}")
    if k == 0:
      return
    if self.is_queue and self.size + k > self.max_size:
      raise TableFullError(f"queue {self.name!r} has no room for {k} items ({self.size} of "
                           f"{self.max_size} held): nothing samples it in between, so Reverb "
                           "would block forever")
    if k > self.max_size:  # only the newest max_size survive, as with k single inserts
      self.first = self.next = self.next + (k - self.max_size)
      if self.tree is not None:
        self.tree.set(np.arange(self.capacity), 0.0)
      self.head_times_sampled = 0
      columns, p, k = [v[k - self.max_size:] for v in columns], p[k - self.max_size:], \
          self.max_size
    overflow = self.size + k - self.max_size
    if overflow > 0:
      if self.tree is not None:
        self.tree.set(np.arange(self.first, self.first + overflow) % self.capacity, 0.0)
      self.first += overflow
      self.head_times_sampled = 0
    while self.size + k > self.capacity:
      self._grow()
    start = self.next % self.capacity
    if start + k <= self.capacity:  # one run of slots: slices, no index arrays
      run = slice(start, start + k)
      for column, v in zip(self.columns, columns):
        column[run] = v
      self.priorities[run] = p
      if self.tree is not None:
        self.tree.set_range(start, self._weights(p))
    else:
      slots = np.arange(self.next, self.next + k, dtype=np.int64) % self.capacity
      for column, v in zip(self.columns, columns):
        column[slots] = v
      self.priorities[slots] = p
      if self.tree is not None:
        self.tree.set(slots, self._weights(p))
    self.next += k

  def _remove_oldest(self) -> None:
    if self.tree is not None:
      self.tree.set(self.first % self.capacity, 0.0)
    self.first += 1
    self.head_times_sampled = 0

  def sample(self, rng: np.random.Generator, batch_size: int) -> reverb.ReplaySample:
    """B items (see `LocalReplayClient.sample_batch`)."""
    size = self.size
    need = max(self.min_size, batch_size if self.is_queue else 1)
    if size < need:
      queue = f", a batch of {batch_size} from a queue" if self.is_queue else ""
      raise NotEnoughItemsError(
          f"table {self.name!r} holds {size} items but a sample needs {need} (min size to "
          f"sample {self.min_size}{queue}); a single-process run samples only what has been "
          "written (Reverb would block here)")
    head = None
    if self.sampler == "fifo":
      keys, sizes, head = self._take_fifo(batch_size)
      probabilities = np.ones(batch_size, np.float64)
    else:
      keys, probabilities = self._draw(rng, batch_size)
      sizes = np.full(batch_size, size, np.int64)
    slots = keys % self.capacity
    info = reverb.SampleInfo(key=keys.astype(np.uint64), probability=probabilities,
                             table_size=sizes, priority=self.priorities[slots])
    data = tree.unflatten_as(self.signature, [c[slots] for c in self.columns])
    if head is not None:  # the queue's sampled items leave now
      key, taken = head
      while self.first < key:
        self._remove_oldest()
      self.head_times_sampled = taken
    return reverb.ReplaySample(info=info, data=data)

  def _draw(self, rng: np.random.Generator, batch_size: int):
    size = self.size
    if self.sampler == "uniform":
      return self.first + rng.integers(0, size, batch_size), np.full(batch_size, 1.0 / size)
    u = rng.random(batch_size)
    total = self.tree.total
    if not total > 0:  # every priority is 0: uniform, as Reverb's PrioritizedSelector
      index = np.minimum((u * size).astype(np.int64), size - 1)
      return self.first + index, np.full(batch_size, 1.0 / size)
    slots = self.tree.find(u * total)
    keys = self.first + (slots - self.first) % self.capacity
    return keys, self.tree.get(slots) / total

  def _take_fifo(self, batch_size: int):
    """Keys and table sizes of B samples from the head, and the head afterwards
    (key, times sampled); nothing is removed here.

    Raises:
      NotEnoughItemsError: the items run out within the batch.
    """
    m, key, taken, size = self.max_times_sampled, self.first, self.head_times_sampled, self.size
    keys, sizes = np.empty(batch_size, np.int64), np.empty(batch_size, np.int64)
    for b in range(batch_size):
      if size == 0:
        raise NotEnoughItemsError(f"table {self.name!r} runs out of items within a batch of "
                                  f"{batch_size}")
      keys[b], sizes[b] = key, size
      taken += 1
      if m and taken >= m:
        key, taken, size = key + 1, 0, size - 1
    return keys, sizes, (key, taken)

  def mutate(self, updates: Dict[int, float]) -> None:
    """Sets priorities `{key: priority}`; keys not in the table are ignored.

    Raises:
      ValueError: a priority NaN, +-inf or negative, or a key outside uint64; nothing is
        written then.
    """
    p = priorities.validate_priorities(list(updates.values()), list(updates))  # before any write
    try:
      keys = np.fromiter(updates, dtype=np.uint64, count=len(updates))
    except OverflowError:
      raise ValueError("item keys are integers in 0 .. 2**64 - 1") from None
    self._set_priorities(keys, p)

  def mutate_arrays(self, keys, priorities_) -> None:
    """`mutate(dict(zip(keys, priorities_)))` without the dict: a repeated key takes its
    last priority, as in the dict.

    Raises:
      ValueError: as `mutate`, or keys and priorities of different lengths.
    """
    p = priorities.validate_priorities(priorities_, keys)  # before any write
    k = np.asarray(keys).reshape(-1)
    if k.dtype != np.uint64:
      if k.size and (not np.issubdtype(k.dtype, np.integer) or k.min() < 0):
        raise ValueError(f"item keys are integers in 0 .. 2**64 - 1, got {k.dtype} {k[:8]}")
      k = k.astype(np.uint64)
    if k.size > 1:  # the dict's semantics: one write per key, its last priority
      last = k.size - 1 - np.unique(k[::-1], return_index=True)[1]
      if last.size < k.size:
        k, p = k[last], p[last]
    self._set_priorities(k, p)

  def _set_priorities(self, keys: np.ndarray, p: np.ndarray) -> None:
    live = (keys >= np.uint64(self.first)) & (keys < np.uint64(self.next))  # others: ignored
    slots = (keys[live] % np.uint64(self.capacity)).astype(np.int64)
    self.priorities[slots] = p[live]
    if self.tree is not None and slots.size:
      self.tree.set(slots, self._weights(p[live]))

  def info(self) -> LocalTableInfo:
    """The table's settings and sizes now."""
    return LocalTableInfo(self.name, self.sampler, self.max_size, self.max_times_sampled,
                          self.min_size, self.size, self.next, self.signature)

  def state(self) -> Dict[str, Any]:
    """Settings, counters and copies of the live items (oldest first), their priorities
    and the sum tree's nodes: numpy arrays and plain Python values."""
    slots = self._live_slots()
    return {"sampler": self.sampler, "max_size": self.max_size, "capacity": self.capacity,
            "first": self.first, "next": self.next,
            "head_times_sampled": self.head_times_sampled,
            "columns": [c[slots] for c in self.columns], "priorities": self.priorities[slots],
            "tree_nodes": None if self.tree is None else self.tree.nodes}

  def check_state(self, state: Dict[str, Any]) -> None:
    """Raises ValueError unless `state` is a `state()` of a table like this one."""
    if state["sampler"] != self.sampler or int(state["max_size"]) != self.max_size:
      raise ValueError(f"table {self.name!r}: the state is of a {state['sampler']} table of "
                       f"max size {state['max_size']}, this one is {self.sampler}, {self.max_size}")
    size, capacity = int(state["next"]) - int(state["first"]), int(state["capacity"])
    if not 0 <= size <= capacity <= self.max_size:
      raise ValueError(f"table {self.name!r}: the state holds {size} items in {capacity} slots, "
                       f"which a table of max size {self.max_size} cannot")
    if self.sampler == "prioritized":
      sum_tree.SumTree(capacity, nodes=state["tree_nodes"])  # raises on a wrong node count
    if len(state["columns"]) != len(self.specs):
      raise ValueError(f"table {self.name!r}: the state has {len(state['columns'])} columns, "
                       f"the signature {len(self.specs)}")
    if np.shape(state["priorities"]) != (size,):
      raise ValueError(f"table {self.name!r}: the state has {np.shape(state['priorities'])} "
                       f"priorities for {size} items")
    for name, (dtype, shape), c in zip(self.names, self.specs, state["columns"]):
      c = np.asarray(c)
      if c.dtype != dtype or c.shape != (size, *shape):
        raise ValueError(f"table {self.name!r}: state column {name!r} is {c.dtype} "
                         f"{list(c.shape)}, expected {dtype} {[size, *shape]}")

  def restore(self, state: Dict[str, Any]) -> None:
    """Takes back a `state()` (checked by `check_state` first)."""
    self._allocate(int(state["capacity"]), state["tree_nodes"])
    self.first, self.next = int(state["first"]), int(state["next"])
    self.head_times_sampled = int(state["head_times_sampled"])
    slots = self._live_slots()
    for column, values in zip(self.columns, state["columns"]):
      column[slots] = values
    self.priorities[slots] = np.asarray(state["priorities"], np.float64)
