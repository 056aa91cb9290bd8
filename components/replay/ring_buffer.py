"""In-graph replay: a ring buffer of per-environment timesteps as pure JAX functions
(jittable, vmappable over seeds), uniform or prioritized, for `--launch anakin`.

Why not Reverb or flashbax: Reverb runs outside the jitted program (a C++ server), and
flashbax (the JAX replay library Stoix uses) needs chex >= 0.1.8 while the pinned stack
has chex 0.1.7, so it does not install here (checked with pip's resolver).

Layout: `items` is a pytree whose leaves are `[C, E, ...]`: C rows (time) of E
environments' steps, written one row per acting step at `position` (the oldest row is
overwritten once C rows were written). A step record holds what an n-step transition of
it needs (`nstep_transitions`): ``observation, action, reward, discount, next_observation,
last`` (`last`: its episode ended there, termination or truncation).

Sampling picks (row, env) slots. A slot is sampleable once the `lookahead` rows after it
were written (n - 1 for n-step returns: the newest n - 1 rows of each environment wait,
where Acme's n-step adder would have emitted the episode's last transitions early).

  * uniform: every sampleable slot with probability 1 / (their number);
  * prioritized (Schaul et al. 2016, sec. 3.3, proportional variant): P(i) = p_i^alpha /
    sum_k p_k^alpha over sampleable slots, by inverse-CDF sampling on cumulative sums
    in three levels (O(C E) per batch: no sum tree, which in XLA would serialise its
    scatter updates).
    The buffer keeps p_i^alpha (raised once, when a priority is set) and 0 for slots not
    sampleable yet. New slots get priority 1.0 once sampleable, as the local runs'
    adders write them (Reverb items written with `priority_fns={table: None}`).

Every function is pure: the buffer goes in and a new one comes out; randomness comes
from the key passed in (seeded runs are reproducible).
"""
from __future__ import annotations

from typing import Any, NamedTuple, Tuple

import jax
import jax.numpy as jnp

INITIAL_PRIORITY = 1.0


class RingBuffer(NamedTuple):
  """items: pytree of `[C, E, ...]`; priorities: float32 `[C, E]`, p_i^alpha of sampleable
  slots and 0 for the others; position: int32 row written next; rows: int32 rows written
  so far, capped at C."""
  items: Any
  priorities: jnp.ndarray
  position: jnp.ndarray
  rows: jnp.ndarray

  @property
  def capacity(self) -> int:
    return int(self.priorities.shape[0])

  @property
  def num_envs(self) -> int:
    return int(self.priorities.shape[1])


def init(example_item: Any, capacity: int, num_envs: int) -> RingBuffer:
  """An empty buffer of `capacity` rows for `num_envs` environments; `example_item` is one
  environment's step (leaves without the `[C, E]` axes), zeros of its shapes and dtypes.

  Raises:
    ValueError: capacity or num_envs < 1.
  """
  if capacity < 1 or num_envs < 1:
    raise ValueError(f"capacity and num_envs must be >= 1, got {capacity}, {num_envs}")
  items = jax.tree_util.tree_map(
      lambda x: jnp.zeros((capacity, num_envs) + jnp.shape(x), jnp.asarray(x).dtype),
      example_item)
  return RingBuffer(items, jnp.zeros((capacity, num_envs), jnp.float32),
                    jnp.zeros((), jnp.int32), jnp.zeros((), jnp.int32))


def add(buffer: RingBuffer, row: Any, lookahead: int = 0) -> RingBuffer:
  """`buffer` with `row` (leaves `[E, ...]`: one step of every environment) written at
  `position`; the row written `lookahead` rows before it becomes sampleable (priority
  `INITIAL_PRIORITY`), the new one is not yet (priority 0) unless `lookahead` is 0."""
  c = buffer.capacity
  items = jax.tree_util.tree_map(
      lambda store, x: jax.lax.dynamic_update_index_in_dim(store, x.astype(store.dtype),
                                                           buffer.position, 0),
      buffer.items, row)
  e = buffer.num_envs
  priorities = jax.lax.dynamic_update_index_in_dim(
      buffer.priorities, jnp.full((e,), INITIAL_PRIORITY if lookahead == 0 else 0.0),
      buffer.position, 0)
  if lookahead:
    ready = (buffer.position - lookahead) % c
    ready_value = jnp.where(buffer.rows >= lookahead, INITIAL_PRIORITY, 0.0)
    priorities = jax.lax.dynamic_update_index_in_dim(
        priorities, jnp.full((e,), ready_value, jnp.float32), ready, 0)
  return RingBuffer(items, priorities, (buffer.position + 1) % c,
                    jnp.minimum(buffer.rows + 1, c))


def size(buffer: RingBuffer) -> jnp.ndarray:
  """int32: steps held (rows written, capped at C, times E)."""
  return buffer.rows * buffer.num_envs


def sampleable(buffer: RingBuffer, lookahead: int = 0) -> jnp.ndarray:
  """bool `[C, E]`: slots written with at least `lookahead` rows written after them."""
  c = buffer.capacity
  age = (buffer.position - 1 - jnp.arange(c)) % c  # 0: the newest row
  ok = (age < buffer.rows) & (age >= lookahead)
  return jnp.broadcast_to(ok[:, None], buffer.priorities.shape)


def sample_uniform(buffer: RingBuffer, key: jax.Array, batch_size: int, lookahead: int = 0
                   ) -> Tuple[jnp.ndarray, jnp.ndarray, jnp.ndarray]:
  """`batch_size` slots drawn uniformly (with replacement) among the sampleable ones.

  Returns:
    (int32 rows [B], int32 envs [B], float32 probabilities [B] = 1 / sampleable slots).
    With no sampleable slot the draws are meaningless (the caller gates on `size`).
  """
  c, e = buffer.capacity, buffer.num_envs
  k_row, k_env = jax.random.split(key)
  valid_rows = jnp.maximum(buffer.rows - lookahead, 1)
  # Age a in [lookahead, rows): the row written a rows before the newest.
  age = lookahead + jax.random.randint(k_row, (batch_size,), 0, valid_rows)
  rows = (buffer.position - 1 - age) % c
  envs = jax.random.randint(k_env, (batch_size,), 0, e)
  prob = jnp.full((batch_size,), 1.0, jnp.float32) / (valid_rows * e).astype(jnp.float32)
  return rows.astype(jnp.int32), envs.astype(jnp.int32), prob


def _last_positive(weights: jnp.ndarray) -> jnp.ndarray:
  """int32 [...]: the index of the last positive entry along the last axis (0 if none)."""
  k = weights.shape[-1]
  return (k - 1 - jnp.argmax(jnp.flip(weights > 0, -1), axis=-1)).astype(jnp.int32)


def _group_size(n: int, root: int) -> int:
  """The entries per group when `n` entries are split in groups of about `root` (static):
  the smallest divisor of n in [root, 2 root) (the groups tile the entries exactly, so
  no padded copy is made), else `root` (the last group padded)."""
  root = max(1, root)
  return next((k for k in range(root, 2 * root) if n % k == 0), root)


def _ceil_root(n: int, power: int) -> int:
  """The smallest integer r >= 1 with r ** power >= n."""
  r = max(1, int(round(n ** (1.0 / power))))
  while r ** power < n:
    r += 1
  while r > 1 and (r - 1) ** power >= n:
    r -= 1
  return r


def _groups(x: jnp.ndarray, size: int) -> jnp.ndarray:
  """`x` [n] as [ceil(n / size), size], zero-padded (a reshape, no copy, without a pad)."""
  n = x.shape[0]
  count = -(-n // size)
  if count * size != n:
    x = jnp.pad(x, (0, count * size - n))
  return x.reshape(count, size)


def _inverse_cdf(weights: jnp.ndarray, u: jnp.ndarray) -> Tuple[jnp.ndarray, jnp.ndarray]:
  """One level of inverse-CDF sampling: for each row b of `weights` [B, m] (>= 0) the
  index i whose cumulative-sum interval [cdf_{i-1}, cdf_i) holds u[b] in [0, sum), and
  u[b] - cdf_{i-1} (in [0, weights[b, i])), the draw within that entry. Rounding may put
  u at or past the last positive entry's end: the index stays on positive mass."""
  cdf = jnp.cumsum(weights, axis=-1)
  index = jnp.minimum(jnp.sum(cdf <= u[:, None], axis=-1).astype(jnp.int32),
                      _last_positive(weights))
  before = jnp.take_along_axis(cdf - weights, index[:, None], axis=-1)[:, 0]
  return index, jnp.maximum(u - before, 0.0)


def sample_prioritized(buffer: RingBuffer, key: jax.Array, batch_size: int
                       ) -> Tuple[jnp.ndarray, jnp.ndarray, jnp.ndarray]:
  """`batch_size` slots drawn with P(i) = p_i^alpha / sum_k p_k^alpha over the sampleable
  slots (with replacement, inverse-CDF sampling; the buffer holds p^alpha, see
  `set_priorities`, and the lookahead its rows were `add`ed with).

  The inverse CDF is taken in three levels: the N = C E slots in leaf groups of
  K ~ N^(1/3), the leaf groups' sums in groups of about sqrt(N / K), and those groups'
  sums; a draw u in [0, total) picks a group at each level by the cumulative sum of that
  level's entries, then the slot within its leaf group (`_inverse_cdf`). That is the
  distribution of one cumulative sum over all N slots, in O(N) (the sums, one pass) +
  O(batch_size N^(1/3)) work. XLA's cumulative sum over m entries is an associative scan
  of log2(m) passes, each slicing and padding its [B, m] operand, and its searchsorted a
  loop copying the array in (profiled for issue 54 at 30 seeds x 100k slots: one level
  over N was out of the question, and with two levels the [B, sqrt(N)] cumulative sums of
  the leaf blocks still cost most of a learner step's sampling time).

  Returns:
    (int32 rows [B], int32 envs [B], float32 probabilities P(i) [B]).
  """
  e = buffer.num_envs
  weight = buffer.priorities.reshape(-1)
  n = weight.shape[0]
  leaf_size = _group_size(n, _ceil_root(n, 3))
  leaves = _groups(weight, leaf_size)  # [m, K]
  leaf_sum = jnp.sum(leaves, axis=1)  # [m]
  mid_size = _group_size(leaf_sum.shape[0], _ceil_root(leaf_sum.shape[0], 2))
  mids = _groups(leaf_sum, mid_size)  # [g, mid_size]
  top = jnp.sum(mids, axis=1)  # [g]
  total = jnp.cumsum(top)[-1]
  u = jax.random.uniform(key, (batch_size,), jnp.float32) * total
  group, u = _inverse_cdf(jnp.broadcast_to(top, (batch_size,) + top.shape), u)
  mid, u = _inverse_cdf(mids[group], u)
  leaf = group * mid_size + mid
  slot, _ = _inverse_cdf(leaves[leaf], u)
  flat = leaf * leaf_size + slot
  prob = weight[flat] / jnp.maximum(total, 1e-30)
  return (flat // e).astype(jnp.int32), (flat % e).astype(jnp.int32), prob


def set_priorities(buffer: RingBuffer, rows: jnp.ndarray, envs: jnp.ndarray,
                   priorities: jnp.ndarray, priority_exponent: float,
                   active: Any = True) -> RingBuffer:
  """`buffer` with slots (rows[i], envs[i]) given priority `priorities[i]` (float32 [B],
  >= 0; stored raised to alpha = `priority_exponent`); a slot drawn twice keeps one of its
  values. `active` False: `buffer` unchanged."""
  old = buffer.priorities[rows, envs]
  new = jnp.where(active, jnp.power(priorities.astype(jnp.float32), priority_exponent), old)
  return buffer._replace(priorities=buffer.priorities.at[rows, envs].set(new))


def nstep_transitions(buffer: RingBuffer, rows: jnp.ndarray, envs: jnp.ndarray, n: int,
                      discount: Any):
  """The n-step transitions starting at slots (rows, envs), as Acme's
  `NStepTransitionAdder` writes them (Sutton and Barto 2018, sec. 7.1):

    reward   = sum_{k<m} gamma^k (prod_{j<k} d_{t+j}) r_{t+k}
    discount = gamma^(m-1) prod_{k<m} d_{t+k}
    next_observation = the next observation of step t + m - 1

  where m <= n stops at the first step of the episode's end (`last`), so a transition
  never crosses into the next episode (0 discount after a termination; after a
  time-limit truncation the discount is gamma^(m-1) and the bootstrap is from the true
  last observation). The learner multiplies `discount` by gamma once more (DQN's
  `transition_td_errors`).

  Args:
    buffer: items with ``observation, action, reward, discount, next_observation, last``.
    rows, envs: int32 [B] slots whose `n - 1` following rows are written.
    n: steps per transition (>= 1, static).
    discount: gamma (float or float32 scalar).

  Returns:
    `acme.types.Transition` with leaves [B, ...] (extras empty).
  """
  from acme import types  # pylint: disable=g-import-not-at-top
  items = buffer.items
  c = buffer.capacity
  gamma = jnp.asarray(discount, jnp.float32)
  reward = jnp.zeros(rows.shape, jnp.float32)
  weight = jnp.ones(rows.shape, jnp.float32)  # gamma^k prod d of the steps so far
  alive = jnp.ones(rows.shape, bool)  # the episode had not ended before step k
  end_row = rows
  for k in range(n):
    r_k = (rows + k) % c
    step_r = items["reward"][r_k, envs]
    step_d = items["discount"][r_k, envs]
    step_last = items["last"][r_k, envs]
    reward = reward + jnp.where(alive, weight * step_r, 0.0)
    end_row = jnp.where(alive, r_k, end_row)
    new_weight = weight * step_d
    weight = jnp.where(alive, jnp.where(step_last | (k == n - 1), new_weight,
                                        new_weight * gamma), weight)
    alive = alive & ~step_last
  return types.Transition(
      observation=items["observation"][rows, envs], action=items["action"][rows, envs],
      reward=reward, discount=weight, next_observation=items["next_observation"][end_row, envs],
      extras=())
