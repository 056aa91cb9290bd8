"""The trajectory writer of the in-process replay (`local_replay.LocalReplayClient`).

`LocalTrajectoryWriter` has the methods and semantics of `reverb.TrajectoryWriter`
(dm-reverb 0.7.0) that acme's Reverb adders use, so `NStepTransitionAdder`,
`SequenceAdder` and actorq's adders write through it unchanged:

* `append(data, partial_step=False)`: one step of a nested structure; its leaves are
  copied (numpy) into one history column per path. A step can be built by several
  `partial_step=True` calls closed by one plain call; `episode_steps` counts closed
  steps. A field first seen later is padded with None in the earlier steps.
* `history`: the appended structure with `LocalColumnHistory` leaves, indexed like a
  list over the whole episode (`[i]`, `[-1]`, `[a:b]`, `[[i, j]]`) of which the last
  `num_keep_alive_refs` steps are kept; indexing returns a `LocalTrajectoryColumn`
  (`numpy()`, `shape`, `dtype`, further indexing).
* `create_item(table, priority, trajectory)`: inserts at once (there is no server, so
  `flush` has nothing to wait for); `end_episode`, `close`.

Like Reverb's writer, a column keeps the dtype and shape of its first value: a later
value of another dtype or shape raises ValueError naming the column.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
import tree


def _name(path: Tuple[Any, ...]) -> str:
  return "/".join(str(p) for p in path)


class LocalTrajectoryColumn:
  """Steps of one history column that an item references (`reverb.TrajectoryColumn`).

  Args:
    values: numpy arrays of equal dtype and shape, oldest first.
    squeeze: the column is one step without a time dimension (made by an int index).
    path: the column's path, for error messages.

  Raises:
    ValueError: a value is None (the step has no data in this column, or it is older
      than the writer's `num_keep_alive_refs`), or `squeeze` with other than one value.
  """
  __slots__ = ("_values", "is_squeezed")

  def __init__(self, values: Sequence[Optional[np.ndarray]], *, squeeze: bool = False,
               path: Tuple[Any, ...] = ()):
    if squeeze and len(values) != 1:
      raise ValueError(f"a squeezed column holds exactly one step, got {len(values)}")
    if any(v is None for v in values):
      raise ValueError(f"column {_name(path)!r} references a step that has no data in it or "
                       "is older than the writer's num_keep_alive_refs")
    self._values = tuple(values)
    self.is_squeezed = bool(squeeze)

  def __len__(self) -> int:
    return len(self._values)

  def __iter__(self):
    return iter(self._values)

  def __getitem__(self, index) -> "LocalTrajectoryColumn":
    if isinstance(index, (int, np.integer)):
      return LocalTrajectoryColumn([self._values[index]], squeeze=True)
    if isinstance(index, slice):
      return LocalTrajectoryColumn(self._values[index])
    if isinstance(index, list):
      return LocalTrajectoryColumn([self._values[i] for i in index])
    raise TypeError(f"column indices must be integers, slices or lists, not {type(index)}")

  @property
  def shape(self) -> Tuple[int, ...]:
    """The value's shape (squeezed) or `(steps, *value shape)`."""
    first = self._values[0].shape
    return tuple(first) if self.is_squeezed else (len(self._values), *first)

  @property
  def dtype(self) -> np.dtype:
    return self._values[0].dtype

  def numpy(self) -> np.ndarray:
    """A new array: the value (squeezed) or the steps stacked on axis 0."""
    return self._values[0].copy() if self.is_squeezed else np.stack(self._values)

  def array(self) -> np.ndarray:
    """As `numpy()`, but a squeezed column's value is the writer's own (not a copy): for
    the table, which copies it into its buffers."""
    return self._values[0] if self.is_squeezed else np.stack(self._values)


class LocalColumnHistory:
  """One field's values since the episode began, of which the last `keep` are held.

  Indexed like a list over the whole episode (`len` counts every step); an index of a
  step older than the last `keep` yields None, which `LocalTrajectoryColumn` refuses.
  """
  __slots__ = ("path", "_cells", "_dropped", "_keep", "_dtype", "_shape")

  def __init__(self, path: Tuple[Any, ...], keep: int, steps: int):
    self.path = path
    self._keep = int(keep)
    self._cells: List[Optional[np.ndarray]] = [None] * min(steps, self._keep)
    self._dropped = steps - len(self._cells)
    self._dtype: Optional[np.dtype] = None
    self._shape: Optional[Tuple[int, ...]] = None

  def __len__(self) -> int:
    return self._dropped + len(self._cells)

  def check(self, value: Any) -> np.ndarray:
    """A numpy copy of `value`, whose dtype and shape must be the column's first ones."""
    arr = np.array(value)
    if self._dtype is None:
      self._dtype, self._shape = arr.dtype, arr.shape
    elif arr.dtype != self._dtype or arr.shape != self._shape:
      raise ValueError(f"column {_name(self.path)!r} got {arr.dtype} {list(arr.shape)} but holds "
                       f"{self._dtype} {list(self._shape)} (set by its first value)")
    return arr

  def append(self, value: Optional[np.ndarray]) -> None:
    self._cells.append(value)
    if len(self._cells) > self._keep:
      del self._cells[0]
      self._dropped += 1

  def last_is_set(self) -> bool:
    return bool(self._cells) and self._cells[-1] is not None

  def set_last(self, value: np.ndarray) -> None:
    self._cells[-1] = value

  def reset(self) -> None:
    self._cells, self._dropped = [], 0

  def _cell(self, i: int) -> Optional[np.ndarray]:
    j = i - self._dropped
    return self._cells[j] if j >= 0 else None

  def _step(self, index: int) -> int:
    n = len(self)
    i = int(index) + n if index < 0 else int(index)
    if not 0 <= i < n:
      raise IndexError(f"history index {index} out of range for {n} steps")
    return i

  def __getitem__(self, index) -> LocalTrajectoryColumn:
    path = self.path + (index,)
    if isinstance(index, (int, np.integer)):
      return LocalTrajectoryColumn([self._cell(self._step(index))], squeeze=True, path=path)
    if isinstance(index, slice):
      return LocalTrajectoryColumn([self._cell(i) for i in range(len(self))[index]], path=path)
    if isinstance(index, list):
      return LocalTrajectoryColumn([self._cell(self._step(i)) for i in index], path=path)
    raise TypeError(f"history indices must be integers, slices or lists, not {type(index)}")


_LEAF_TYPES = frozenset([np.ndarray, bool, int, float, complex, type(None)])


class _Uncached(Exception):
  """A nest `_structure_key` does not know (its paths are then not cached)."""


def _structure_key(x: Any) -> Any:
  """A hashable key of a nest's structure: dicts, lists, tuples and namedtuples over numpy
  arrays, numpy scalars and Python scalars. Raises `_Uncached` for anything else."""
  t = type(x)
  if t in _LEAF_TYPES or isinstance(x, np.generic):
    return 0
  if t is dict:
    return (t, tuple([(k, _structure_key(v)) for k, v in x.items()]))
  if t is list or isinstance(x, tuple):
    return (t, tuple([_structure_key(v) for v in x]))
  raise _Uncached


def _union(a: Any, b: Any) -> Any:
  """The union of two nests whose mappings may differ in keys (leaves: None)."""
  if isinstance(a, dict) and isinstance(b, dict):
    return {**{k: _union(v, b[k]) if k in b else v for k, v in a.items()},
            **{k: v for k, v in b.items() if k not in a}}
  return a


class LocalTrajectoryWriter:
  """Writes steps and items into the tables of a `LocalReplayClient`.

  Made by `LocalReplayClient.trajectory_writer(num_keep_alive_refs)`; see the module
  docstring for the semantics. `insert(table, priority, flat_columns)` is the client's
  insertion function (validates against the table signature, then stores copies).

  Raises (from `append`, `create_item`):
    RuntimeError: the writer is closed.
    ValueError: a field set twice in one step, a value of another dtype or shape than
      its column's, or an item the table rejects (see `LocalReplayClient`).
    TypeError: an item whose leaves are not `LocalTrajectoryColumn`s.
  """

  def __init__(self, insert: Callable[[str, float, List[np.ndarray]], None],
               num_keep_alive_refs: int):
    if num_keep_alive_refs < 1:
      raise ValueError(f"num_keep_alive_refs ({num_keep_alive_refs}) must be a positive integer")
    self._insert = insert
    self._keep = int(num_keep_alive_refs)
    self._columns: Dict[Tuple[Any, ...], LocalColumnHistory] = {}
    self._structure: Any = None  # the union of the appended structures, leaves None
    self._history: Any = None
    self._episode_steps = 0
    self._open = False  # the last step was appended with partial_step=True
    self._closed = False
    self._paths: Dict[Any, List[Tuple[Any, ...]]] = {}  # structure key -> leaf paths

  def __enter__(self) -> "LocalTrajectoryWriter":
    return self

  def __exit__(self, *exc_info) -> None:
    self.flush()

  @property
  def episode_steps(self) -> int:
    """Closed steps (appends without `partial_step`) since the last `end_episode`."""
    return self._episode_steps

  @property
  def history(self) -> Any:
    """The appended structure with a `LocalColumnHistory` per leaf.

    Raises:
      RuntimeError: before the first `append`.
    """
    if self._history is None:
      raise RuntimeError("history cannot be accessed before `append` is called at least once.")
    return self._history

  def append(self, data: Any, *, partial_step: bool = False) -> None:
    """Appends one (partial) step; its leaves are copied. See the module docstring."""
    if self._closed:
      raise RuntimeError("append on a closed LocalTrajectoryWriter")
    flat = [(p, v) for p, v in self._flatten_with_path(data) if v is not None]
    if any(p not in self._columns for p, _ in flat):
      self._add_columns(data, [p for p, _ in flat])
    values = {p: self._columns[p].check(v) for p, v in flat}
    if self._open:
      for p in values:
        if self._columns[p].last_is_set():
          raise ValueError(f"Field {p} has already been set in the active step by a previous "
                           "(partial) append call and must be omitted or set to None")
      for p, v in values.items():
        self._columns[p].set_last(v)
    else:
      for p, column in self._columns.items():
        column.append(values.get(p))
    self._open = bool(partial_step)
    if not partial_step:
      self._episode_steps += 1

  def _flatten_with_path(self, data: Any) -> List[Tuple[Tuple[Any, ...], Any]]:
    """`tree.flatten_with_path(data)`, with the paths of a structure seen before cached
    (dm-tree's path flattening is pure Python; its plain `flatten` is native)."""
    try:
      key = _structure_key(data)
    except _Uncached:
      return tree.flatten_with_path(data)
    paths = self._paths.get(key)
    if paths is None:
      flat = tree.flatten_with_path(data)
      self._paths[key] = [p for p, _ in flat]
      return flat
    return list(zip(paths, tree.flatten(data)))

  def _add_columns(self, data: Any, paths: List[Tuple[Any, ...]]) -> None:
    """Columns for the new `paths` of `data` (None in the steps so far); a new history."""
    steps = len(next(iter(self._columns.values()))) if self._columns else 0
    for path in paths:
      if path not in self._columns:
        self._columns[path] = LocalColumnHistory(path, self._keep, steps)
    skeleton = tree.map_structure(lambda _: None, data)
    self._structure = skeleton if self._structure is None else _union(self._structure, skeleton)
    every_path = [p for p, _ in tree.flatten_with_path(self._structure)]
    self._history = tree.unflatten_as(self._structure, [self._columns.get(p) for p in every_path])

  def create_item(self, table: str, priority: float, trajectory: Any) -> None:
    """Inserts an item referencing `trajectory` (a nest of `LocalTrajectoryColumn`s) into
    `table` with `priority`, now: it can be sampled as soon as this returns."""
    if self._closed:
      raise RuntimeError("create_item on a closed LocalTrajectoryWriter")
    flat = tree.flatten(trajectory)
    if not all(isinstance(c, LocalTrajectoryColumn) for c in flat):
      raise TypeError(f"All leaves of `trajectory` must be `LocalTrajectoryColumn` but got "
                      f"{trajectory}")
    self._insert(table, priority, [c.array() for c in flat])

  def flush(self, block_until_num_items: int = 0, timeout_ms: Optional[int] = None) -> None:
    """Nothing to wait for: items are inserted by `create_item`.

    Raises:
      ValueError: block_until_num_items < 0 (as Reverb).
    """
    del timeout_ms
    if block_until_num_items < 0:
      raise ValueError(f"block_until_num_items must be >= 0, got {block_until_num_items}")

  def end_episode(self, clear_buffers: bool = True, timeout_ms: Optional[int] = None) -> None:
    """Starts a new episode: `episode_steps` is 0 and, with `clear_buffers`, the history
    is empty (an open partial step is dropped)."""
    del timeout_ms
    self._episode_steps = 0
    if clear_buffers:
      for column in self._columns.values():
        column.reset()
      self._open = False

  def close(self) -> None:
    """Drops the history; later appends and items raise RuntimeError. Idempotent."""
    self._closed = True
    for column in self._columns.values():
      column.reset()
