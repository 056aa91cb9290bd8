"""A seeded, in-process replay for deterministic single-process runs.

Why: a single-process run (`launch/local.py`) used an embedded Reverb server, whose
samplers cannot be seeded and whose `tf.data` datasets prefetch on other threads, so
which items a learner step sees depended on thread timing and a seeded run was not
reproducible. Each step through a Reverb adder also cost ~300-480 us (gRPC stream,
chunking, compression). `LocalReplayClient` replaces the server in one process:

* the same adder semantics behind the same builder methods: it implements the part of
  `reverb.Client` that dm-acme 0.4.0's Reverb adders and actorq use
  (`trajectory_writer`, `server_info`, `mutate_priorities`, `server_address`), so
  `acme.adders.reverb.NStepTransitionAdder`, `SequenceAdder` and actorq's adders write
  into it unchanged (`local_writer.LocalTrajectoryWriter`);
* tables built from the very `reverb.Table`s a builder's `make_replay_tables` returns
  (sampler, remover, max size, max times sampled, signature, min size to sample);
* all sampling from ONE `numpy.random.Generator` seeded at construction, on the calling
  thread, with no prefetch: the same seed and the same inserts give the same batches,
  and `state()`/`restore()` carry the tables and the generator through a checkpoint.

Distributed runs (actors in other processes) stay on Reverb.

Sampling (items are drawn with replacement, except from queues):
  * uniform: P(i) = 1 / N;
  * prioritized with exponent alpha: P(i) = p_i^alpha / sum_k p_k^alpha (Schaul et al.
    2016, "Prioritized Experience Replay", eq. 1) on a 16-ary sum tree
    (`components/sum_tree.py`); when every priority is 0, uniform (as Reverb);
  * FIFO (`reverb.Table.queue`: max_times_sampled = 1): oldest first, a sample removes.
The FIFO remover drops the oldest item when a table is full; a full queue refuses an
insert instead (Reverb would block the writer forever in one process).

Batches are `reverb.ReplaySample(info, data)` with a leading batch dim B: `info` is
`SampleInfo(key uint64 [B], probability float64 [B], table_size int64 [B], priority
float64 [B])` and `data` the table signature's structure of arrays `[B, *shape]` of the
signature's dtypes, as Reverb's datasets yield them (`replay.numpy_iterator`,
`onpolicy.RolloutIterator`). Keys are the insertion counter (0, 1, 2, ...).

Supported tables: samplers Uniform, Prioritized, Fifo; remover Fifo; max_times_sampled
0 (unlimited) or, with the Fifo sampler, any; a signature with fully defined shapes.
Rate limiters: only `min_size_to_sample` is kept (the single-process loop enforces
samples per insert itself); sampling below it raises instead of blocking.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Dict, Iterator, List, Optional, Sequence

import numpy as np
import reverb
import tree

from actorq.components import local_writer, replay, sum_tree

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


class _Table:
  """One table's items: a ring buffer per flattened signature column, keyed by insertion.

  Live keys are always the contiguous range [first, next): items leave oldest first
  (FIFO remover, FIFO sampler), so key k lives in slot k % capacity.
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
    self.specs = [(np.dtype(s.dtype.as_numpy_dtype), s.shape) for s in tree.flatten(info.signature)]
    for name, (_, shape) in zip(self.names, self.specs):
      if not shape.is_fully_defined():
        raise ValueError(f"table {self.name!r}: column {name!r} has shape {shape}; the local "
                         "replay needs fully defined signature shapes")
    self.specs = [(d, tuple(s.as_list())) for d, s in self.specs]
    self.first, self.next = 0, 0
    self.head_times_sampled = 0  # samples taken of the oldest item (fifo sampler)
    self._allocate(min(_INITIAL_CAPACITY, self.max_size))

  @property
  def size(self) -> int:
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
    self.check(values)
    priority = float(priority)
    if not (math.isfinite(priority) and priority >= 0):
      replay.validate_priorities([priority])  # raises ValueError with its message
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
    self.priorities[slot] = priority
    if self.tree is not None:
      self.tree.set(slot, priority ** self.alpha if priority > 0 else 0.0)
    self.next += 1

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
      what = "a batch of a queue" if self.is_queue and batch_size > self.min_size else (
          "its min size to sample")
      raise NotEnoughItemsError(
          f"table {self.name!r} holds {size} items; {what} needs {need} (a single-process "
          "run samples only what has been written; Reverb would block here)")
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
    p = replay.validate_priorities(list(updates.values()), list(updates))  # before any write
    try:
      keys = np.fromiter(updates, dtype=np.uint64, count=len(updates))
    except OverflowError:
      raise ValueError("item keys are integers in 0 .. 2**64 - 1") from None
    live = (keys >= self.first) & (keys < self.next)  # others were removed: ignored
    slots = (keys[live] % np.uint64(self.capacity)).astype(np.int64)
    self.priorities[slots] = p[live]
    if self.tree is not None and slots.size:
      self.tree.set(slots, self._weights(p[live]))

  def info(self) -> LocalTableInfo:
    return LocalTableInfo(self.name, self.sampler, self.max_size, self.max_times_sampled,
                          self.min_size, self.size, self.next, self.signature)

  def state(self) -> Dict[str, Any]:
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
    size = int(state["next"]) - int(state["first"])
    if len(state["columns"]) != len(self.specs):
      raise ValueError(f"table {self.name!r}: the state has {len(state['columns'])} columns, "
                       f"the signature {len(self.specs)}")
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


class LocalReplayClient:
  """An in-process replay with `reverb.Client`'s writer API and seeded sampling.

  Args:
    tables: the `reverb.Table`s a builder's `make_replay_tables` returns (read through
      `table.name` and `table.info`; the objects are not used afterwards).
    seed: seeds the one `numpy.random.Generator` every sample draws from.

  Raises:
    ValueError: duplicate table names, a table without a signature or with a shape that
      is not fully defined.
    NotImplementedError: a sampler, remover or max_times_sampled this replay does not
      implement (see the module docstring).
  """

  def __init__(self, tables: Sequence[reverb.Table], seed: int):
    self._tables: Dict[str, _Table] = {}
    for table in tables:
      t = _Table(table)
      if t.name in self._tables:
        raise ValueError(f"two tables are named {t.name!r}")
      self._tables[t.name] = t
    self._rng = np.random.default_rng(seed)

  @property
  def server_address(self) -> str:
    """A description (there is no server): ``in-process local replay (tables: ...)``."""
    return f"in-process local replay (tables: {', '.join(self._tables)})"

  def _table(self, name: str) -> _Table:
    if name not in self._tables:
      raise ValueError(f'Could not find table "{name}". The following tables exist: '
                       f'{", ".join(self._tables)}.')
    return self._tables[name]

  def trajectory_writer(self, num_keep_alive_refs: int, *,
                        get_signature_timeout_ms: Optional[int] = None
                        ) -> local_writer.LocalTrajectoryWriter:
    """A writer whose `create_item` inserts into these tables (`reverb.Client`'s
    signature; the timeout is ignored: the signatures are at hand).

    Raises:
      ValueError: num_keep_alive_refs < 1.
    """
    del get_signature_timeout_ms
    return local_writer.LocalTrajectoryWriter(self._insert, num_keep_alive_refs)

  def _insert(self, table: str, priority: float, columns: List[np.ndarray]) -> None:
    """Checks an item's flattened `columns` against the table's signature (ValueError
    naming the column) and its priority (finite, >= 0), then stores copies."""
    self._table(table).insert(columns, priority)

  def server_info(self, timeout: Optional[int] = None) -> Dict[str, LocalTableInfo]:
    """Table name -> `LocalTableInfo` (has `current_size`). `timeout` is ignored."""
    del timeout
    return {name: t.info() for name, t in self._tables.items()}

  def mutate_priorities(self, table: str, updates: Optional[Dict[int, float]] = None,
                        deletes: Optional[List[int]] = None) -> None:
    """Sets the priorities of items `{key: priority}`; keys no longer (or never) in the
    table are ignored, as by Reverb.

    Raises:
      ValueError: an unknown table, or any priority NaN, +-inf or negative (then nothing
        is written: `replay.validate_priorities`, case R2).
      NotImplementedError: `deletes` (items leave only oldest first here).
    """
    t = self._table(table)
    if deletes:
      raise NotImplementedError("LocalReplayClient.mutate_priorities: deletes are not supported "
                                "(items leave oldest first)")
    t.mutate(dict(updates or {}))

  def sample_batch(self, table: str, batch_size: int) -> reverb.ReplaySample:
    """One batch of `batch_size` items from `table`, drawn from the client's generator.

    Returns:
      `reverb.ReplaySample` with `info` = `SampleInfo(key uint64 [B], probability
      float64 [B], table_size int64 [B], priority float64 [B])` and `data` the table
      signature's structure of arrays `[B, *shape]` (copies). A queue's items are taken
      oldest first and removed; `table_size` is the size when each was taken.

    Raises:
      ValueError: an unknown table or batch_size < 1.
      NotEnoughItemsError: fewer items than the table's min size to sample (or, for a
        queue, than the batch); nothing is drawn or removed.
    """
    if batch_size < 1:
      raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    return self._table(table).sample(self._rng, int(batch_size))

  def iterator(self, table: str, batch_size: int) -> Iterator[reverb.ReplaySample]:
    """An endless iterator of `sample_batch(table, batch_size)`: each batch is drawn when
    `next` is called (no prefetch), so inserts and samples interleave deterministically.

    Raises:
      ValueError: at once, for an unknown table or batch_size < 1; from `next`, see
        `sample_batch`.
    """
    self._table(table)
    if batch_size < 1:
      raise ValueError(f"batch_size must be >= 1, got {batch_size}")

    def batches():
      while True:
        yield self.sample_batch(table, batch_size)

    return batches()

  def state(self) -> Dict[str, Any]:
    """Every table's items, priorities and counters and the generator's state, as numpy
    arrays and plain Python values (picklable). In-flight writer history is not part of
    it (as in Reverb's checkpoints): a resumed run starts new episodes."""
    return {"version": 1, "rng": self._rng.bit_generator.state,
            "tables": {name: t.state() for name, t in self._tables.items()}}

  def restore(self, state: Dict[str, Any]) -> None:
    """Takes back a `state()`; the sample stream continues where it was saved.

    Raises:
      ValueError: a state of other tables (names, samplers, max sizes, column dtypes or
        shapes) or of an unknown version; then nothing is changed.
    """
    if state.get("version") != 1:
      raise ValueError(f"unknown local replay state version {state.get('version')!r}")
    if set(state["tables"]) != set(self._tables):
      raise ValueError(f"the state has tables {sorted(state['tables'])}, this client "
                       f"{sorted(self._tables)}")
    for name, t in self._tables.items():
      t.check_state(state["tables"][name])
    for name, t in self._tables.items():
      t.restore(state["tables"][name])
    self._rng.bit_generator.state = state["rng"]
