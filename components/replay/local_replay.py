"""A seeded, in-process replay for deterministic single-process runs.

Why: a single-process run (`launch/local.py`) used an embedded Reverb server, whose
samplers cannot be seeded and whose `tf.data` datasets prefetch on other threads, so
which items a learner step sees depended on thread timing and a seeded run was not
reproducible. Each step through a Reverb adder also cost ~300-480 us (gRPC stream,
chunking, compression; `benchmarks/replay_cost.py` measures both paths side by side).
`LocalReplayClient` replaces the server in one process:

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
    (`components/replay/sum_tree.py`); a priority of 0 is never drawn (also with alpha = 0)
    and when every priority is 0 the draw is uniform (both as Reverb);
  * FIFO (`reverb.Table.queue`: max_times_sampled = 1): oldest first, a sample removes.
The FIFO remover drops the oldest item when a table is full; a full queue refuses an
insert instead (Reverb would block the writer forever in one process).

Batches are `reverb.ReplaySample(info, data)` with a leading batch dim B: `info` is
`SampleInfo(key uint64 [B], probability float64 [B], table_size int64 [B], priority
float64 [B])` and `data` the table signature's structure of arrays `[B, *shape]` of the
signature's dtypes, as Reverb's datasets yield them (`replay.numpy_iterator`,
`rollouts.RolloutIterator`); like them, `data` is built from the signature decoded from
the table's info (its namedtuples are TF's rebuilt classes with acme's fields). Keys are
the insertion counter (0, 1, 2, ...). `replay.make_iterator(client, table, B)` picks
`client.iterator` or Reverb's dataset for whichever client a builder gets.

Supported tables: samplers Uniform, Prioritized, Fifo; remover Fifo; max_times_sampled
0 (unlimited) or, with the Fifo sampler, any; a signature with fully defined shapes.
Rate limiters: only `min_size_to_sample` is kept (the single-process loop enforces
samples per insert itself); sampling below it raises instead of blocking.
"""
from __future__ import annotations

from typing import Any, Dict, Iterator, List, Optional, Sequence

import numpy as np
import reverb

from actorq.components.replay import local_table, local_writer

# The errors and the table info, re-exported: the client's public API.
NotEnoughItemsError = local_table.NotEnoughItemsError
TableFullError = local_table.TableFullError
LocalTableInfo = local_table.LocalTableInfo


class LocalReplayClient:
  """An in-process replay with `reverb.Client`'s writer API and seeded sampling.

  One thread at a time: writers and samples run on the single-process loop's thread (it
  has no locks; nothing here blocks or waits).

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
    self._tables: Dict[str, local_table.LocalTable] = {}
    for table in tables:
      t = local_table.LocalTable(table)
      if t.name in self._tables:
        raise ValueError(f"two tables are named {t.name!r}")
      self._tables[t.name] = t
    self._rng = np.random.default_rng(seed)

  @property
  def server_address(self) -> str:
    """A description (there is no server): ``in-process local replay (tables: ...)``."""
    return f"in-process local replay (tables: {', '.join(self._tables)})"

  def _table(self, name: str) -> local_table.LocalTable:
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

  def insert_batch(self, table: str, columns: Sequence[np.ndarray],
                   priorities: Any) -> None:
    """Inserts K items in one call (the batched adder's write, no writer needed).

    Args:
      table: the table's name.
      columns: the items' flattened signature columns, each `[K, *shape]` of the
        column's dtype (in `tree.flatten(signature)` order).
      priorities: float [K].

    Raises:
      ValueError: an unknown table, a column that does not fit the signature, or a
        priority that is NaN, +-inf or negative; nothing is stored then.
      TableFullError: a queue without room for the K items.
    """
    self._table(table).insert_batch(list(columns), np.asarray(priorities, np.float64))

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
        is written: `priorities.validate_priorities`, case R2).
      NotImplementedError: `deletes` (items leave only oldest first here).
    """
    t = self._table(table)
    if deletes:
      raise NotImplementedError("LocalReplayClient.mutate_priorities: deletes are not supported "
                                "(items leave oldest first)")
    t.mutate(dict(updates or {}))

  def mutate_priority_arrays(self, table: str, keys: Any, priorities: Any) -> None:
    """`mutate_priorities(table, dict(zip(keys, priorities)))` without the dict: keys
    uint64-valued int [N], priorities float [N]; a repeated key takes its last priority.

    Raises:
      ValueError: an unknown table, a key outside uint64, keys and priorities of different
        lengths, or any priority NaN, +-inf or negative (nothing is written then).
    """
    self._table(table).mutate_arrays(keys, priorities)

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
