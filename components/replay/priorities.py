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


def update_priorities(client: Any, table: str, keys: Any, priorities: Any) -> None:
  """`client.mutate_priorities(table, {key: priority})` after `validate_priorities`.

  Nothing is written when any priority is invalid. Keys no longer in the table (removed
  by the FIFO remover since they were sampled) are ignored by Reverb.

  Raises:
    ValueError: see `validate_priorities`.
  """
  p = validate_priorities(priorities, keys)
  k = np.asarray(keys).reshape(-1)
  if getattr(client, "mutate_priority_arrays", None) is not None:  # the in-process replay
    # Same result as the dict below, without building it: the learner writes B priorities
    # every step, and the dict round trip was a measurable share of a step (issue 20).
    client.mutate_priority_arrays(table, k, p)
    return
  client.mutate_priorities(table, updates={int(key): float(v) for key, v in zip(k, p)})
