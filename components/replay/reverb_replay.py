"""Reverb replay: tables built from the adder's signature, a server, datasets.

Tables carry a signature built from the environment spec *and* the actor's extras
spec (handed case E3), so a full episode of an actor with extras is accepted and a
write of the wrong dtype or shape, or a NaN/inf value (case B3), is rejected by
`ValidatingAdder` with a Python error naming the column, before it reaches Reverb's
native code.

Every blocking call has a timeout (handed case R1): datasets pass
`rate_limiter_timeout_ms` to Reverb, and `sample` raises `ReplayTimeoutError`.
"""
from __future__ import annotations

import math
from typing import Any, Iterator, Optional, Tuple

import numpy as np
import reverb
import tensorflow as tf
import tree
from acme import specs, types
from acme.adders import base as adders_base
from acme.adders import reverb as adders_reverb

from actorq.components.replay import local_replay

DEFAULT_TIMEOUT_MS = 60_000


class ReplayTimeoutError(TimeoutError):
  """A Reverb call did not complete within its timeout."""


def rate_limiter(min_size: int, samples_per_insert: Optional[float] = None,
                 error_buffer: Optional[float] = None) -> reverb.rate_limiters.RateLimiter:
  """MinSize, or SampleToInsertRatio when `samples_per_insert` is given.

  `samples_per_insert` counts sampled *items* per inserted item (Acme's unit):
  with batch size B, one learner step per `B / samples_per_insert` inserts.
  """
  if min_size < 1:
    raise ValueError(f"min_size must be >= 1, got {min_size}")
  if samples_per_insert is None:
    return reverb.rate_limiters.MinSize(min_size)
  if samples_per_insert <= 0:
    raise ValueError(f"samples_per_insert must be > 0, got {samples_per_insert}")
  if error_buffer is None:
    error_buffer = max(2.0 * samples_per_insert, min_size * samples_per_insert * 0.1, 1.0)
  return reverb.rate_limiters.SampleToInsertRatio(
      samples_per_insert=samples_per_insert, min_size_to_sample=min_size,
      error_buffer=error_buffer)


def transition_table(name: str, environment_spec: specs.EnvironmentSpec,
                     extras_spec: types.NestedSpec = (), *, max_size: int,
                     min_size: int, samples_per_insert: Optional[float] = None,
                     prioritized: bool = False, priority_exponent: float = 0.6) -> reverb.Table:
  """A table of n-step transitions with the `NStepTransitionAdder` signature."""
  sampler = (reverb.selectors.Prioritized(priority_exponent) if prioritized
             else reverb.selectors.Uniform())
  return reverb.Table(
      name=name, sampler=sampler, remover=reverb.selectors.Fifo(), max_size=int(max_size),
      rate_limiter=rate_limiter(min_size, samples_per_insert),
      signature=adders_reverb.NStepTransitionAdder.signature(environment_spec, extras_spec))


def make_server(tables, port: Optional[int] = None, checkpoint_dir: Optional[str] = None) -> reverb.Server:
  """An in-process Reverb server (Reverb's own checkpointer when `checkpoint_dir`)."""
  checkpointer = None
  if checkpoint_dir is not None:
    checkpointer = reverb.checkpointers.DefaultCheckpointer(path=checkpoint_dir)
  return reverb.Server(tables=list(tables), port=port, checkpointer=checkpointer)


def make_dataset(server_address: str, table: str, batch_size: int, *,
                 num_parallel_calls: int = 2, prefetch_size: int = 4,
                 timeout_ms: int = DEFAULT_TIMEOUT_MS) -> tf.data.Dataset:
  """A batched `reverb.TrajectoryDataset` over `table`.

  Like `acme.datasets.make_reverb_dataset`, plus a rate-limiter timeout so that a
  sampler never waits forever (acme's has none) and fewer parallel readers (2 cores).
  Elements are `reverb.ReplaySample(info, data)` with leading dim `batch_size`.
  """

  def _one(_):
    return reverb.TrajectoryDataset.from_table_signature(
        server_address=server_address, table=table,
        max_in_flight_samples_per_worker=2 * batch_size,
        rate_limiter_timeout_ms=timeout_ms).batch(batch_size, drop_remainder=True)

  ds = tf.data.Dataset.range(num_parallel_calls).interleave(
      _one, cycle_length=num_parallel_calls, num_parallel_calls=num_parallel_calls,
      deterministic=False)
  return ds.prefetch(prefetch_size)


def numpy_iterator(dataset: tf.data.Dataset) -> Iterator[reverb.ReplaySample]:
  """Iterates numpy batches of an endless replay dataset.

  Reverb ends a dataset's sequence when its rate-limiter timeout expires; for a
  replay dataset (which is otherwise endless) that is a timeout, so it raises.

  Raises:
    ReplayTimeoutError: on that timeout, or when the server is unavailable.
  """
  it = dataset.as_numpy_iterator()
  while True:
    try:
      yield next(it)
    except StopIteration:
      raise ReplayTimeoutError(
          "no replay sample within the rate limiter's timeout (is the table below its "
          "min size, or are samples ahead of inserts?)") from None
    except tf.errors.DeadlineExceededError as e:
      raise ReplayTimeoutError(f"replay sample timed out: {e.message}") from None
    except (tf.errors.UnavailableError, tf.errors.CancelledError) as e:
      raise ReplayTimeoutError(f"replay server unavailable: {e.message}") from None


def make_iterator(client: Any, table: str, batch_size: int) -> Iterator[reverb.ReplaySample]:
  """Endless numpy batches of `batch_size` items of `table`, from either replay.

  An in-process `local_replay.LocalReplayClient` (single-process runs) draws them itself,
  seeded and without prefetch (`client.iterator`); a Reverb client's come through
  `numpy_iterator(make_dataset(client.server_address, table, batch_size))`.
  """
  if isinstance(client, local_replay.LocalReplayClient):
    return client.iterator(table, batch_size)
  return numpy_iterator(make_dataset(client.server_address, table, batch_size))


def sample(server_address: str, table: str, num_samples: int = 1,
           timeout_s: float = DEFAULT_TIMEOUT_MS / 1000) -> list:
  """`num_samples` items (numpy `ReplaySample`s) from `table`.

  `reverb.Client.sample` (0.7.0) has no timeout and can block forever, so this goes
  through a `TrajectoryDataset` with a rate-limiter timeout, limited to `num_samples`
  (without the limit its workers ask for one more item and the call waits out the whole
  timeout for it, even when every item asked for was there).

  Raises:
    ReplayTimeoutError: when the items are not available within `timeout_s` seconds.
  """
  ds = reverb.TrajectoryDataset.from_table_signature(
      server_address=server_address, table=table, max_in_flight_samples_per_worker=num_samples,
      rate_limiter_timeout_ms=max(int(timeout_s * 1000), 0), max_samples=num_samples)
  it = numpy_iterator(ds)
  return [next(it) for _ in range(num_samples)]


class NonFiniteValueError(ValueError):
  """A NaN or +-inf value on its way into replay (case B3).

  Attributes:
    column: the column, e.g. ``reward`` or ``extras/logp``.
    value: the first non-finite value (a Python float).
    steps_seen: timesteps the adder had accepted before this one (`add_first` and `add`
      calls, all episodes).
  """

  def __init__(self, column: str, value: float, steps_seen: int, index: Tuple[int, ...] = ()):
    where = f" at index {index}" if index else ""
    super().__init__(
        f"column {column!r}: non-finite value {value!r}{where} in the adder's timestep "
        f"{steps_seen + 1} ({steps_seen} accepted before it); rewards, discounts, "
        "observations, actions and extras must be finite")
    self.column, self.value, self.steps_seen = column, value, steps_seen


_ADD = np.add.reduce  # `ndarray.sum` without its Python layer


class ColumnChecker:
  """The checks of `ValidatingAdder` on one step's columns, or on K steps' at once.

  Each column (observation, action, reward, discount, each extra) is checked for its
  spec's dtype and shape, and a floating-point column for finiteness (one vectorised
  `np.isfinite(...).all()`, `math.isfinite` for a scalar; integer columns such as uint8
  frames cannot hold NaN). The columns' flattened specs are built once.

  Raises (from `check`, `check_rows`):
    TypeError: a value of another dtype than its column's spec (e.g. float64 into float32);
    ValueError: a value of another shape; both name the column, e.g. ``extras/logp``.
    NonFiniteValueError: a NaN or +-inf value, naming the column, the value and
      `steps_seen`.
  """

  def __init__(self, environment_spec: specs.EnvironmentSpec,
               extras_spec: types.NestedSpec = ()):
    # Per column, once: (spec, nested?, [(name, dtype, shape, floating?) per leaf]).
    self._columns = {
        column: self._leaves(column, spec) for column, spec in (
            ("observation", environment_spec.observations),
            ("action", environment_spec.actions), ("reward", environment_spec.rewards),
            ("discount", environment_spec.discounts), ("extras", extras_spec))}
    self._plain = {}  # `all_fine`'s columns -> their leaves' (dtype, shape, floating)

  @staticmethod
  def _leaves(column: str, spec: Any):
    leaves = []
    for path, s in tree.flatten_with_path(spec):
      dtype = np.dtype(s.dtype)
      leaves.append(("/".join([column] + [str(p) for p in path]), dtype, tuple(s.shape),
                     dtype.kind in "fc"))
    return spec, tree.is_nested(spec), leaves

  def all_fine(self, columns: Tuple[str, ...], values: Tuple[Any, ...], rows: int) -> bool:
    """True when every value is an `np.ndarray` of its column's dtype and shape
    `[rows, *shape]` (each column one array, not a nest) and the sum of the floating ones'
    float64 sums is finite, so that `check` would pass on each: a NaN or inf makes its sum
    non-finite. False when any of that fails, which does not mean a value is wrong (float64
    values near its largest may overflow the sum): then `check` each value to find out.
    Costs one reduction per floating column, where `check` costs two and a few
    conversions."""
    plain = self._plain.get(columns)
    if plain is None:
      plain = self._plain[columns] = self._plain_leaves(columns)
    if not plain:
      return False
    total = 0.0
    for (dtype, shape, floating), v in zip(plain, values):
      if (type(v) is not np.ndarray  # pylint: disable=unidiomatic-typecheck
          or v.dtype != dtype or v.shape != (rows,) + shape):
        return False
      if floating:  # summed in float64: float32/16 values cannot overflow it
        total += float(_ADD(v, axis=None, dtype=np.float64))
    return math.isfinite(total)

  def _plain_leaves(self, columns: Tuple[str, ...]) -> tuple:
    """(dtype, shape, floating?) of each column when every one is a single real-valued
    array (not a nest), else ()."""
    out = []
    for column in columns:
      _, nested, leaves = self._columns[column]
      if nested or len(leaves) != 1 or leaves[0][1].kind == "c":
        return ()
      out.append(leaves[0][1:])
    return tuple(out)

  def check(self, column: str, value: Any, steps_seen: int = 0, rows: int = -1) -> None:
    """Checks one step's `value` of `column` (`rows` < 0), or K = `rows` steps' values
    stacked on a leading axis (`[K, *shape]`)."""
    spec, nested, leaves = self._columns[column]
    if not leaves and value == ():  # e.g. no extras: nothing to check
      return
    if nested:
      try:
        values = tree.flatten_up_to(spec, value)
      except (ValueError, TypeError) as e:
        raise ValueError(f"column {column!r}: structure does not match its spec: {e}") from None
    else:
      values = (value,)
    lead = () if rows < 0 else (int(rows),)
    for (name, dtype, shape, floating), v in zip(leaves, values):
      arr = np.asarray(v)
      if arr.dtype != dtype:
        raise TypeError(f"column {name!r}: dtype {arr.dtype} does not match the table's {dtype}")
      if arr.shape != lead + shape:
        got = arr.shape if rows < 0 else arr.shape[1:]
        raise ValueError(f"column {name!r}: shape {got} does not match the table's {shape}")
      # math.isfinite on a scalar is ~30x cheaper than the ufunc; complex goes to numpy.
      if floating and not (math.isfinite(arr) if arr.ndim == 0 and dtype.kind == "f"
                           else np.isfinite(arr).all()):
        bad = np.argwhere(~np.isfinite(arr))[0]
        index = tuple(int(i) for i in bad)
        raise NonFiniteValueError(name, arr[tuple(bad)].item(),
                                  steps_seen + (index[0] if lead else 0),
                                  index[len(lead):])


class ValidatingAdder(adders_base.Adder):
  """Checks every step against the specs before it reaches Reverb (cases E3 and B3).

  The checks are `ColumnChecker`'s. A rejected step is not passed on, so the table holds
  only the steps before it.

  Attributes:
    steps_seen: timesteps accepted so far (`add_first` and `add` calls, all episodes).

  Raises:
    TypeError: a value of another dtype than its column's spec (e.g. float64 into float32);
    ValueError: a value of another shape; both name the column, e.g. ``extras/logp``.
    NonFiniteValueError: a NaN or +-inf value, naming the column, the value and how many
      steps the adder has seen.
  """

  def __init__(self, adder: adders_base.Adder, environment_spec: specs.EnvironmentSpec,
               extras_spec: types.NestedSpec = ()):
    self._adder = adder
    self.steps_seen = 0
    self._checker = ColumnChecker(environment_spec, extras_spec)

  def _check(self, column: str, value: Any) -> None:
    self._checker.check(column, value, self.steps_seen)

  @property
  def items_written(self) -> int:
    """Items the wrapped adder has written (see `actorq.core.ReplayProgress`)."""
    return int(self._adder.items_written)

  def add_first(self, timestep):
    self._check("observation", timestep.observation)
    self._adder.add_first(timestep)
    self.steps_seen += 1

  def add(self, action, next_timestep, extras: types.NestedArray = ()):
    self._check("action", action)
    self._check("observation", next_timestep.observation)
    self._check("reward", next_timestep.reward)
    self._check("discount", next_timestep.discount)
    self._check("extras", extras)
    self._adder.add(action, next_timestep, extras)
    self.steps_seen += 1

  def reset(self):
    self._adder.reset()

  def close(self) -> None:
    """Flushes and closes the Reverb writer (call while the server is up).

    acme 0.4.0's adders have no `close()`: their writer stays open until garbage
    collection, and a server waits ~5 s on `stop()` for an open writer stream.
    """
    try:
      self._adder.reset()  # may time out (or be abandoned on a stop): close anyway
    finally:
      writer = getattr(self._adder, "_ReverbAdder__writer", None)  # acme keeps it private
      if writer is not None:
        writer.close()
        setattr(self._adder, "_ReverbAdder__writer", None)
