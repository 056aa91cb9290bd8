"""Replay priorities, validated before they reach a table (case R2): Reverb's server or
the in-process replay (`local_replay`), whose tables check them the same way."""
from __future__ import annotations

from typing import Any, Optional

import numpy as np


def validate_priorities(priorities: Any, keys: Optional[Any] = None) -> np.ndarray:
  """Checks sampling priorities before they reach Reverb (case R2).

  Reverb's Prioritized selector samples item i with P(i) = p_i^alpha / sum_k p_k^alpha
  (Schaul et al. 2016, eq. 1), which needs every p_i finite and >= 0. Reverb 0.7's
  `mutate_priorities` accepts inf (the item then takes all the probability mass) and
  rejects NaN and negative values only inside its native call; here every value is
  checked before anything is sent.

  Args:
    priorities: float [N] priorities (any real dtype).
    keys: optional uint64 [N] item keys; when given, must have the same length.

  Returns:
    float64 [N] copy of `priorities`.

  Raises:
    ValueError: naming the offending positions (and keys) and values, when a priority is
      NaN, +-inf or negative, or when `keys` and `priorities` differ in length.
  """
  p = np.asarray(priorities, dtype=np.float64).reshape(-1)
  if keys is not None and np.asarray(keys).reshape(-1).shape[0] != p.shape[0]:
    raise ValueError(f"{np.asarray(keys).size} keys but {p.shape[0]} priorities: "
                     "one priority per key is allowed")
  bad = np.flatnonzero(~np.isfinite(p) | (p < 0))
  if bad.size:
    shown = bad[:8]
    where = [f"index {i}" + (f" (key {int(np.asarray(keys).reshape(-1)[i])})" if keys is not None
                             else "") + f": {p[i]!r}" for i in shown]
    more = f" and {bad.size - shown.size} more" if bad.size > shown.size else ""
    raise ValueError(f"invalid replay priorities at {', '.join(where)}{more}; priorities "
                     "must be finite and >= 0")
  return p


_UINT64_MAX = 2**64 - 1


def item_keys(keys: Any) -> np.ndarray:
  """Reverb item keys as an exact uint64 [N] array (case B12).

  Reverb's keys are random uint64 values, about half of them at or above 2**63. A Python
  list mixing such keys with smaller ones becomes float64 under `np.asarray`, whose
  53-bit mantissa rounds them: the rounded keys match no item and Reverb ignores the
  update without a word. Here a list is converted element by element, and an array must
  already be of an integer dtype.

  Args:
    keys: uint64-valued keys: a numpy integer array (any shape, flattened) or a sequence
      of Python/numpy integers.

  Returns:
    uint64 [N] keys, equal to the given ones.

  Raises:
    ValueError: a key that is not an integer (a float array, a float element, a bool), or
      an integer outside 0 .. 2**64 - 1; the message names the first offending key.
  """
  if isinstance(keys, np.ndarray):
    k = keys.reshape(-1)
    if k.dtype == np.uint64:
      return k
    if not np.issubdtype(k.dtype, np.integer):
      raise ValueError(f"replay item keys must be an integer (uint64) array, got {k.dtype} "
                       f"{k[:4]}: float keys above 2**53 are not exact and match no item")
    if k.size and k.min() < 0:
      raise ValueError(f"replay item keys must be in 0 .. 2**64 - 1, got {int(k.min())}")
    return k.astype(np.uint64)
  values = []
  for key in np.ravel(np.asarray(keys, dtype=object)):
    if isinstance(key, (bool, np.bool_)) or not isinstance(key, (int, np.integer)):
      raise ValueError(f"replay item keys must be integers (uint64), got {key!r} of type "
                       f"{type(key).__name__}")
    if not 0 <= int(key) <= _UINT64_MAX:
      raise ValueError(f"replay item keys must be in 0 .. 2**64 - 1, got {int(key)}")
    values.append(int(key))
  return np.array(values, dtype=np.uint64)


def update_priorities(client: Any, table: str, keys: Any, priorities: Any) -> None:
  """`client.mutate_priorities(table, {key: priority})` after `validate_priorities`,
  with the keys kept exact (`item_keys`).

  Nothing is written when any priority or key is invalid. Keys no longer in the table
  (removed by the FIFO remover since they were sampled) are ignored by Reverb.

  Raises:
    ValueError: see `validate_priorities` and `item_keys`.
  """
  k = item_keys(keys)
  p = validate_priorities(priorities, k)
  if getattr(client, "mutate_priority_arrays", None) is not None:  # the in-process replay
    # Same result as the dict below, without building it: the learner writes B priorities
    # every step, and the dict round trip was a measurable share of a step (issue 20).
    client.mutate_priority_arrays(table, k, p)
    return
  client.mutate_priorities(table, updates={int(key): float(v) for key, v in zip(k, p)})
