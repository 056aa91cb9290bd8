"""Adders: acme's Reverb adders, with one correction.

`NStepTransitionAdder` is acme's, except that it does not write the N-1 *shortened*
transitions acme emits at the start of every episode (from s0 with 1, 2, ... steps).
Those over-sample first states and break the contract the learner relies on (handed
case E1): every transition starting at s_t covers min(N, steps to the episode end)
steps, so its next observation is s_{t+N} or the episode's last observation. Each
transition stores

    reward   = R_t = sum_{k<m} gamma^k (prod_{j<k} d_{t+j}) r_{t+k}     (m = steps covered)
    discount = gamma^(m-1) prod_{k<m} d_{t+k}

and the learner bootstraps with `gamma * discount` (0 after a termination, gamma^m
after a time-limit truncation, whose environment discount is 1).
"""
from __future__ import annotations

import dm_env
import numpy as np
import tree
from acme.adders import base as adders_base
from acme.adders import reverb as adders_reverb

from actorq.components.replay import local_replay, reverb_replay as replay


class NStepTransitionAdder(adders_reverb.NStepTransitionAdder):
  """acme's n-step transition adder without the shortened episode-start transitions.

  Attributes:
    items_written: transitions written so far (one per table they go to is not counted
      twice: it counts transitions).
  """

  def __init__(self, *args, **kwargs):
    super().__init__(*args, **kwargs)
    self.items_written = 0

  def add(self, action, next_timestep, extras=()):
    self._adding_last = next_timestep.last()
    super().add(action, next_timestep, extras)

  def _write(self):
    full_window = self._n_step >= self.n_step
    if full_window or getattr(self, "_adding_last", False):
      super()._write()
      self.items_written += 1


# ---------------------------------------------------------------------------------------
# Batched adders: B environments' steps written by one object (vectorized actors).

# Steps of B rows a vector actor's adder stages before computing and writing their
# transitions (`BlockNStepTransitionAdder`): items reach the table at most this many loop
# iterations late; the per-block work (returns, gathers, one table write) is spread over
# them.
BLOCK_STEPS = 16
_COLUMNS = ("action", "observation", "reward", "discount")  # `add`'s, in check order


def _masked_rows(mask, *arrays):
  """A bool [B] `mask` as int rows [K] (where it is True) and each of `arrays` ([B, ...])
  at those rows: the int form of a batched adder's `add`."""
  rows = np.flatnonzero(mask)
  return rows, [np.asarray(a)[rows] for a in arrays]


class PerEnvAdders:
  """B independent adders, one per environment of a batch: each env's steps go through
  its own adder state (episode boundaries, n-step windows, sequences per env). The
  generic batched adder, for any builder's `make_adder` (e.g. on-policy rollouts).

  Args:
    adders: B acme adders (each with its own writer).

  Attributes:
    items_written: summed over the adders.
  """

  def __init__(self, adders):
    self._adders = list(adders)
    self.num_envs = len(self._adders)

  @property
  def items_written(self) -> int:
    return int(sum(int(a.items_written) for a in self._adders))

  def add_first(self, rows, observations) -> None:
    """`rows`: int [K] env indices that start an episode; `observations`: [K, ...]."""
    for k, i in enumerate(rows):
      self._adders[int(i)].add_first(dm_env.restart(observations[k]))

  def add(self, rows, actions, rewards, discounts, next_observations, last,
          extras) -> None:
    """One step of each env in `rows` (int [K]): `actions` [K, ...], float `rewards` [K],
    `discounts` [K], `next_observations` [K, ...], bool `last` [K], `extras` a list of K
    nests (`()`: no extras). `rows` may be a bool mask [B] instead, with B rows of the
    arrays (the envs where it is True step; `extras` still one nest per such env)."""
    rows = np.asarray(rows)
    if rows.dtype == bool:
      rows, (actions, rewards, discounts, next_observations, last) = _masked_rows(
          rows, actions, rewards, discounts, next_observations, last)
    for k, i in enumerate(rows):
      step_type = dm_env.StepType.LAST if last[k] else dm_env.StepType.MID
      self._adders[int(i)].add(actions[k], dm_env.TimeStep(
          step_type, rewards[k], discounts[k], next_observations[k]),
                               extras=extras[k] if len(extras) else ())

  def flush(self) -> None:
    """Nothing pending: every adder writes as it goes."""

  def in_blocks(self, block_steps: int = BLOCK_STEPS) -> "PerEnvAdders":
    """Itself: each adder writes as it goes (the interface of
    `BatchedNStepTransitionAdder.in_blocks`)."""
    del block_steps
    return self

  def reset(self) -> None:
    for a in self._adders:
      a.reset()

  def close(self) -> None:
    for a in self._adders:
      getattr(a, "close", a.reset)()


# Transitions per Reverb chunk group of the batched adder (see `_write_reverb`).
_REVERB_GROUP = 64


class BatchedNStepTransitionAdder:
  """The n-step transitions of `NStepTransitionAdder` for B environments at once.

  Per env it keeps the pending window (at most n start states with their actions,
  extras, rewards and discounts), so every env's transitions are exactly those the
  one-env adder writes for it alone: from each s_t one transition covering
  m = min(n, steps to the episode end) steps, with (float, in the reward's dtype, the
  same operations in the same order as acme's)

      reward   = r_t + g d_t r_{t+1} + ... + g^{m-1} d_t ... d_{t+m-2} r_{t+m-1}
      discount = g^{m-1} d_t ... d_{t+m-1}

  and the next observation s_{t+m}. The windows are arrays over the batch (ring
  buffers `[B, n, ...]` indexed by each env's step count), so `add` is a fixed number of
  array operations whatever K: check the columns (one vectorised check per column:
  `replay.ColumnChecker`), copy the K rows into their slots, gather the completed
  transitions (one per env whose window is full, all of an env's window when its
  episode ends) and compute their returns in one pass over the n window positions.
  `flush()` writes what is complete in one call: `LocalReplayClient.insert_batch` in
  process, or one Reverb `TrajectoryWriter` (one `append` + `create_item` per transition,
  one `flush` per call) to a Reverb server. Items of one `add` are written env by env
  in the order of `rows`, each env's in time order; priority 1.0 (as
  `priority_fns={table: None}`).

  Args:
    client: a `LocalReplayClient` or a `reverb.Client` (or `TimeoutClient`).
    table: the transition table's name (signature
      `acme.adders.reverb.NStepTransitionAdder.signature(environment_spec, extras_spec)`).
    num_envs: B.
    n_step: N >= 1.
    discount: the agent's discount g.
    environment_spec, extras_spec: the columns' specs (checked on every row); the
      observation and action are single arrays, the extras any nest.

  Attributes:
    items_written: transitions written so far.
    steps_seen: rows accepted (add_first and add rows).

  Raises:
    ValueError: n_step < 1 or num_envs < 1; from add/add_first, a row that does not fit
      its column (TypeError for a dtype), NonFiniteValueError for a NaN/inf, each before
      anything is stored; RuntimeError from `add` for an env without `add_first`.
  """

  def __init__(self, client, table: str, num_envs: int, n_step: int, discount: float,
               environment_spec, extras_spec=()):
    if int(n_step) < 1:
      raise ValueError(f"n_step must be >= 1, got {n_step}")
    if int(num_envs) < 1:
      raise ValueError(f"num_envs must be >= 1, got {num_envs}")
    self._client, self._table = client, table
    self.num_envs, self.n_step = b, n = int(num_envs), int(n_step)
    reward_dtype = np.result_type(np.dtype(environment_spec.rewards.dtype),
                                  np.dtype(environment_spec.discounts.dtype), np.float32)
    self._dtype = reward_dtype
    self._discount = reward_dtype.type(np.float32(discount))
    self._checker = replay.ColumnChecker(environment_spec, extras_spec)
    self._environment_spec, self._extras_spec = environment_spec, extras_spec
    self._local = isinstance(client, local_replay.LocalReplayClient)
    self._writer = None

    def buffer(spec, lead):
      return np.zeros(lead + tuple(spec.shape), np.dtype(spec.dtype))

    obs_spec, act_spec = environment_spec.observations, environment_spec.actions
    self._current = buffer(obs_spec, (b,))         # each env's latest observation
    self._open = np.zeros(b, bool)                 # add_first seen, episode not ended
    self._obs = buffer(obs_spec, (b, n))           # window slot = step index % n
    self._act = buffer(act_spec, (b, n))
    self._rew = np.zeros((b, n), reward_dtype)
    self._disc = np.zeros((b, n), reward_dtype)
    self._extras_specs = tree.flatten(extras_spec)
    self._ext = [buffer(spec, (b, n)) for spec in self._extras_specs]
    self._count = np.zeros(b, np.int64)            # pending starts in the window
    self._pos = np.zeros(b, np.int64)              # steps added since the episode start
    # Flat views [B * n, ...] of the windows: env i's slot j is row i * n + j.
    self._obs_flat = self._obs.reshape((b * n,) + self._obs.shape[2:])
    self._act_flat = self._act.reshape((b * n,) + self._act.shape[2:])
    self._rew_flat, self._disc_flat = self._rew.reshape(-1), self._disc.reshape(-1)
    self._all = np.arange(b, dtype=np.int64)
    self._base = self._all * n
    self._positions = np.arange(n, dtype=np.int64)
    self._pending = []  # per add with items: the flattened item columns, [T, ...] each
    self._ones = np.ones(b * n)
    self.items_written = 0
    self.steps_seen = 0

  @property
  def discount(self) -> float:
    """The agent's discount g the n-step returns are computed with."""
    return float(self._discount)

  @discount.setter
  def discount(self, value: float) -> None:
    """A new g for the transitions completed from the next `flush` on (population-based
    training mutates a member's discount; items already written keep theirs)."""
    self._discount = self._dtype.type(np.float32(value))

  def add_first(self, rows, observations) -> None:
    """Episode starts: `rows` int [K] distinct env indices, `observations` [K, ...]. A
    window still open in such an env (an episode abandoned without LAST) is dropped."""
    rows = np.asarray(rows, np.int64)
    self._checker.check("observation", observations, self.steps_seen, rows=len(rows))
    self._current[rows] = observations
    self._open[rows] = True
    self._count[rows] = 0
    self._pos[rows] = 0
    self.steps_seen += len(rows)

  def add(self, rows, actions, rewards, discounts, next_observations, last,
          extras=()) -> None:
    """One step of each env in `rows` (int [K], distinct): `actions` [K, ...], `rewards`
    [K], `discounts` [K], `next_observations` [K, ...], bool `last` [K] and `extras`
    (a list of K nests, the extras of each row's action; `()` when there are none).
    `rows` may be a bool mask [B] instead, with B rows of the arrays: the envs where it is
    True step (the other rows' values are ignored; `extras` one nest per stepping env)."""
    rows = np.asarray(rows)
    if rows.dtype == bool:
      rows, (actions, rewards, discounts, next_observations, last) = _masked_rows(
          rows, actions, rewards, discounts, next_observations, last)
    rows = np.asarray(rows, np.int64)
    k_rows = len(rows)
    self._check_step(actions, rewards, discounts, next_observations, extras, k_rows)
    sel = self._selection(rows)
    n = self.n_step
    last = np.asarray(last, bool)
    pos = self._pos[sel]
    flat = self._base[sel] + pos % n  # the rows' slots in the flattened [B * n] windows
    self._obs_flat[flat] = self._current[sel]
    self._act_flat[flat] = actions
    self._rew_flat[flat] = rewards
    self._disc_flat[flat] = discounts
    if self._ext and k_rows:
      for leaf, column in zip(self._ext, zip(*[tree.flatten(e) for e in extras])):
        leaf.reshape((-1,) + leaf.shape[2:])[flat] = np.stack(column)
    self._current[sel] = next_observations
    pos = pos + 1
    self._pos[sel] = pos
    count = self._count[sel] + 1
    full = count == n
    self.steps_seen += k_rows
    if not last.any():  # no episode ends (most steps): one item per full window
      self._count[sel] = count - full
      if full.all():
        self._gather_full(rows, pos, next_observations)
      elif full.any():
        which = np.flatnonzero(full)
        self._gather_full(rows[which], pos[which], np.asarray(next_observations)[which])
      return
    # Items per row: its whole window at an episode end, else one when the window is full.
    emit = np.where(last, count, full)
    self._count[sel] = np.where(last, 0, count - full)
    self._open[sel] = ~last
    total_items = int(emit.sum())
    if total_items:
      self._gather(rows, emit, count, pos, next_observations, total_items)

  def _check_step(self, actions, rewards, discounts, next_observations, extras,
                  k_rows: int) -> None:
    """`ColumnChecker.check` of the K = `k_rows` rows of each column, in the order
    action, observation, reward, discount, extras (one nest per row)."""
    check = self._checker.check
    check("action", actions, self.steps_seen, rows=k_rows)
    check("observation", next_observations, self.steps_seen, rows=k_rows)
    check("reward", rewards, self.steps_seen, rows=k_rows)
    check("discount", discounts, self.steps_seen, rows=k_rows)
    for e in extras:
      check("extras", e, self.steps_seen)
    if self._ext and len(extras) != k_rows:
      raise ValueError(f"extras: {len(extras)} nests for {k_rows} rows (one per row needed)")

  def _selection(self, rows):
    """The index of `rows` (int [K]) into [B] arrays: `slice(None)` for all B rows in
    order (a vector loop's usual step: basic indexing, no index arrays), else `rows`.

    Raises:
      RuntimeError: a row whose env has no open episode (no `add_first`).
    """
    sel = (slice(None) if len(rows) == self.num_envs and (rows == self._all).all() else rows)
    if not self._open[sel].all():
      closed = np.flatnonzero(~self._open[rows])[0]
      raise RuntimeError(f"env {int(rows[closed])}: add before add_first")
    return sel

  def _gather(self, rows, emit, count, pos, next_observations, t: int) -> None:
    """The `t` transitions completed by this add (`emit` [K] per row; `count` [K] the
    rows' window lengths and `pos` [K] their step counts after it): their columns and
    n-step returns, queued for `flush`."""
    n = self.n_step
    which = np.repeat(np.arange(len(rows)), emit)           # the row of each item
    first = np.cumsum(emit) - emit
    c = np.arange(t) - first[which]                         # item's index in its window
    start = pos[which] - count[which] + c                   # its start's step index
    length = count[which] - c                               # steps it covers (m)
    base = rows[which] * n
    at = base + start % n                                   # its start's flat slot
    ret, total = self._returns(base, start, length)
    columns = [self._obs_flat[at], self._act_flat[at], ret, total,
               np.asarray(next_observations)[which]]
    columns += [leaf.reshape((-1,) + leaf.shape[2:])[at] for leaf in self._ext]
    self._pending.append(columns)

  def _gather_full(self, env, pos, next_observations) -> None:
    """`_gather` of one item per env in `env` (int [T]) from its full window: covering n
    steps from step `pos - n` (`pos` [T] the envs' step counts), next observations [T]."""
    n = self.n_step
    base = env * n
    start = pos - n
    at = base + start % n
    ret, total = self._returns(base, start, None)
    columns = [self._obs_flat[at], self._act_flat[at], ret, total, np.array(next_observations)]
    columns += [leaf.reshape((-1,) + leaf.shape[2:])[at] for leaf in self._ext]
    self._pending.append(columns)

  def _returns(self, base, start, length):
    """n-step returns and discounts [T] of the items starting at window slots
    `base + start % n`, covering `length` [T] steps (None: n each), in acme's order of
    float operations (the class docstring's sums, term by term)."""
    n = self.n_step
    if n == 1:
      at = base + start % n
      return self._rew_flat[at], self._disc_flat[at]
    slots = base[:, None] + (start[:, None] + self._positions) % n  # [T, n], in order
    rew, disc = self._rew_flat[slots], self._disc_flat[slots]
    total, ret, g = disc[:, 0], rew[:, 0], self._discount
    if length is None or (length == n).all():  # full windows: no masking
      for i in range(1, n):
        total = total * g
        ret = ret + rew[:, i] * total
        total = total * disc[:, i]
    else:
      for i in range(1, n):
        on = i < length
        total = np.where(on, total * g, total)
        ret = np.where(on, ret + rew[:, i] * total, ret)
        total = np.where(on, total * disc[:, i], total)
    return ret, total

  def flush(self) -> None:
    """Writes every transition completed since the last flush (see the class docstring).

    Raises:
      whatever the replay raises for the write (a Reverb timeout, a full queue).
    """
    if not self._pending:
      return
    pending, self._pending = self._pending, []
    leaves = (pending[0] if len(pending) == 1 else
              [np.concatenate(parts) for parts in zip(*pending)])
    count = len(leaves[0])
    if self._local:
      ones = self._ones if count <= len(self._ones) else np.ones(count)
      self._client.insert_batch(self._table, leaves, ones[:count])
    else:
      self._write_reverb(leaves, count)
    self.items_written += count

  def _write_reverb(self, leaves, count: int) -> None:
    """Appends the transitions as steps (their flattened columns), `_REVERB_GROUP` at a
    time, then creates their items: a chunk (compressed once per column) holds up to that
    many transitions, where acme's adder makes every item wait for its own. Items are
    given as the flat list of columns in the signature's flattened order (what Reverb
    validates and sends; no nest rebuilt per item). One `flush` per call."""
    if self._writer is None:
      self._writer = self._client.trajectory_writer(num_keep_alive_refs=_REVERB_GROUP)
      self._configured = False
    writer = self._writer
    for lo in range(0, count, _REVERB_GROUP):
      hi = min(lo + _REVERB_GROUP, count)
      for j in range(lo, hi):
        writer.append([leaf[j] for leaf in leaves])
        if not self._configured:  # a fixed chunk length, once the columns exist
          for column in range(len(leaves)):
            writer.configure((column,), num_keep_alive_refs=_REVERB_GROUP,
                             max_chunk_length=_REVERB_GROUP)
          self._configured = True
      history = writer.history
      for j in range(lo - hi, 0):
        writer.create_item(self._table, 1.0, [column[j] for column in history])
    writer.flush()

  def reset(self) -> None:
    """Drops every env's open window and the unwritten transitions."""
    self._count[:] = 0
    self._pos[:] = 0
    self._open[:] = False
    self._pending = []

  def close(self) -> None:
    """Writes what is complete, then closes the Reverb writer (if any; also when the
    write fails or is abandoned on a stop: an open writer holds up the server's stop)."""
    try:
      self.flush()
    finally:
      if self._writer is not None:
        self._writer.close()
        self._writer = None

  def in_blocks(self, block_steps: int = BLOCK_STEPS) -> "BlockNStepTransitionAdder":
    """A `BlockNStepTransitionAdder` with this adder's client, table, B, n, discount and
    specs (a new, empty one), writing every `block_steps` steps: the vectorized actor
    loop's adder (`components.envs.single_agent.make_training_actor`)."""
    return BlockNStepTransitionAdder(self._client, self._table, self.num_envs, self.n_step,
                                     float(self._discount), self._environment_spec,
                                     self._extras_spec, block_steps=block_steps)


class BlockNStepTransitionAdder(BatchedNStepTransitionAdder):
  """`BatchedNStepTransitionAdder`'s transitions, computed and written once per block of
  `block_steps` steps instead of at every step (issue 40: the vectorized actors' adder).

  `add` only copies the step's rows into preallocated `[n - 1 + K + n - 1, B, ...]` grids
  (row = the step's index in the block after the n - 1 steps carried over from the last
  block; a few slice copies, column checks included). When K steps are staged (or on
  `drain`), one pass over the grid finds every completed transition (its window reached n
  steps, or its episode ended) and computes the n-step returns of all of them at once,
  over the n window positions, with the same float operations in the same order as
  `BatchedNStepTransitionAdder` (the class docstring's sums); windows still open move to
  the grid's first n - 1 rows. Every env's items are therefore exactly those of acme's
  n-step adder for that env alone, in its time order; only their insertion moves, by
  fewer than K steps. Items of one block are written start step by start step, env by
  env within a step (B > 1 runs stay a function of their seed).

  `flush()` writes the blocks computed so far (cheap when there are none, so a caller
  may flush every step); `drain()` also computes the partly filled block and writes it;
  `close()` drains. `add_first` on an env whose episode is still open (an abandoned
  episode) drops that env's open windows, as `BatchedNStepTransitionAdder` does (the
  transitions its staged steps completed are kept).

  Args:
    as `BatchedNStepTransitionAdder`, and
    block_steps: K >= 1.

  Raises:
    as `BatchedNStepTransitionAdder` (the column checks run in `add`, on every step);
    ValueError: block_steps < 1.
  """

  def __init__(self, client, table: str, num_envs: int, n_step: int, discount: float,
               environment_spec, extras_spec=(), *, block_steps: int = BLOCK_STEPS):
    if isinstance(block_steps, bool) or int(block_steps) < 1:
      raise ValueError(f"block_steps must be an integer >= 1, got {block_steps!r}")
    super().__init__(client, table, num_envs, n_step, discount, environment_spec,
                     extras_spec)
    b, n, k = self.num_envs, self.n_step, int(block_steps)
    self.block_steps = k
    self._carry = c = n - 1
    rows = c + k + c  # carried steps, the block, and n - 1 never-valid rows after it

    def grid(spec):
      return np.zeros((rows, b) + tuple(spec.shape), np.dtype(spec.dtype))

    obs_spec = environment_spec.observations
    self._g_obs = grid(obs_spec)   # each step's start observation
    self._g_next = grid(obs_spec)  # and its next observation
    self._g_act = grid(environment_spec.actions)
    self._g_rew = np.zeros((rows, b), self._dtype)
    self._g_disc = np.zeros((rows, b), self._dtype)
    self._g_last = np.zeros((rows, b), bool)
    self._g_valid = np.zeros((rows, b), bool)  # a step was added there
    self._g_pend = np.zeros((rows, b), bool)   # carried steps whose item is not written
    self._g_ext = [grid(spec) for spec in self._extras_specs]
    self._mask_shape = (b,) + (1,) * len(obs_spec.shape)  # a row mask against observations
    self._staged = 0

  def add_first(self, rows, observations) -> None:
    """As `BatchedNStepTransitionAdder.add_first`: an env whose episode is still open
    loses its open windows (the staged block is computed first)."""
    rows = np.asarray(rows, np.int64)
    self._checker.check("observation", observations, self.steps_seen, rows=len(rows))
    reopened = self._open[rows]
    if reopened.any():  # abandoned episodes: their open windows are never written
      self._compute()  # what the staged steps completed is kept (rare: a new run)
      drop = rows[reopened]
      self._g_valid[:, drop] = False
      self._g_pend[:, drop] = False
    self._current[rows] = observations
    self._open[rows] = True
    self.steps_seen += len(rows)

  def add(self, rows, actions, rewards, discounts, next_observations, last,
          extras=()) -> None:
    """As `BatchedNStepTransitionAdder.add` (same arguments, same checks); the rows are
    staged, and every K-th call computes and queues the block's transitions. The mask
    form (`rows` bool [B], the arrays [B, ...]) stages the whole batch by slices when the
    arrays pass `ColumnChecker.all_fine` (else it checks and stages the stepping rows)."""
    rows = np.asarray(rows)
    if rows.dtype == bool:
      if (not self._ext and len(rows) == self.num_envs and self._checker.all_fine(
          _COLUMNS, (actions, next_observations, rewards, discounts), self.num_envs)):
        self._stage_mask(rows, actions, rewards, discounts, next_observations, last)
        return
      rows, (actions, rewards, discounts, next_observations, last) = _masked_rows(
          rows, actions, rewards, discounts, next_observations, last)
    rows = np.asarray(rows, np.int64)
    k_rows = len(rows)
    if self._ext or not self._checker.all_fine(
        _COLUMNS, (actions, next_observations, rewards, discounts), k_rows):
      self._check_step(actions, rewards, discounts, next_observations, extras, k_rows)
    sel = self._selection(rows)
    every = isinstance(sel, slice)
    r = self._carry + self._staged
    self._g_obs[r, sel] = self._current[sel]
    self._g_next[r, sel] = next_observations
    self._g_act[r, sel] = actions
    self._g_rew[r, sel] = rewards
    self._g_disc[r, sel] = discounts
    self._g_last[r, sel] = last
    if not every:
      self._g_valid[r] = False
    self._g_valid[r, sel] = True
    if self._ext and k_rows:
      for leaf, column in zip(self._g_ext, zip(*[tree.flatten(e) for e in extras])):
        leaf[r, sel] = np.stack(column)
    self._current[sel] = next_observations
    last = np.asarray(last, bool)
    if last.any():
      self._open[rows[last]] = False
    self.steps_seen += k_rows
    self._staged += 1
    if self._staged == self.block_steps:
      self._compute()

  def _stage_mask(self, mask, actions, rewards, discounts, next_observations, last) -> None:
    """`add` of the rows where `mask` is True from checked [B, ...] arrays: whole-row
    copies into the grids (the other rows' cells are marked not valid)."""
    if not np.all(self._open, where=mask):
      closed = np.flatnonzero(mask & ~self._open)[0]
      raise RuntimeError(f"env {int(closed)}: add before add_first")
    r = self._carry + self._staged
    self._g_obs[r] = self._current
    self._g_next[r] = next_observations
    self._g_act[r] = actions
    self._g_rew[r] = rewards
    self._g_disc[r] = discounts
    self._g_last[r] = last
    self._g_valid[r] = mask
    np.copyto(self._current, next_observations, where=mask.reshape(self._mask_shape))
    last = np.asarray(last, bool)
    if last.any():
      self._open[last & mask] = False
    self.steps_seen += int(np.count_nonzero(mask))
    self._staged += 1
    if self._staged == self.block_steps:
      self._compute()

  def _compute(self) -> None:
    """Queues every transition the staged steps complete and carries the open windows."""
    if not self._staged:
      return
    c, n, g = self._carry, self.n_step, self._discount
    size = c + self._staged  # grid rows in use; rows >= size are not valid
    valid, last, rew, disc = self._g_valid, self._g_last, self._g_rew, self._g_disc
    pend = self._g_pend[:size]
    pend[c:] = valid[c:size]
    ret, total = rew[:size], disc[:size]
    ended = last[:size]
    covered = np.ones(pend.shape, np.int64)  # m: steps each window covers so far
    if n > 1:
      alive = ~ended  # the window goes on past its step 0
      for i in range(1, n):
        on = alive & valid[i:i + size]  # step i of the window exists (same episode)
        total = np.where(on, total * g, total)
        ret = np.where(on, ret + rew[i:i + size] * total, ret)
        total = np.where(on, total * disc[i:i + size], total)
        covered += on
        now_last = on & last[i:i + size]
        ended = ended | now_last
        alive = on & ~now_last
      done = pend & (ended | (covered == n))
    else:
      done = pend.copy()
    t, env = np.nonzero(done)
    if len(t):
      nxt = t + covered[t, env] - 1
      columns = [self._g_obs[t, env], self._g_act[t, env], ret[t, env], total[t, env],
                 self._g_next[nxt, env]]
      columns += [leaf[t, env] for leaf in self._g_ext]
      self._pending.append(columns)
    pend &= ~done
    if c:  # open windows start in the last n - 1 rows: move them to the front
      for a in (self._g_obs, self._g_next, self._g_act, rew, disc, last, valid,
                self._g_pend, *self._g_ext):
        a[:c] = a[size - c:size]
    valid[c:] = False
    self._staged = 0

  def drain(self) -> None:
    """Computes the staged steps' completed transitions now and writes them (`flush`)."""
    self._compute()
    self.flush()

  def reset(self) -> None:
    """Drops every env's open window, the staged steps and the unwritten transitions."""
    super().reset()
    self._g_valid[:] = False
    self._g_pend[:] = False
    self._staged = 0

  def close(self) -> None:
    """Writes what is complete (`drain`), then closes the Reverb writer (if any)."""
    self._compute()
    super().close()


class SingleEnvAdder(adders_base.Adder):
  """acme's `Adder` interface (`add_first`, `add`, `reset`) for ONE environment over a
  B = 1 `BatchedNStepTransitionAdder`, flushed after every step: the same transitions
  as `NStepTransitionAdder` (same items, same order, written at the same step; tested
  bit for bit), at a fraction of its per-step cost in process (acme's adder rebuilds the
  item's nest with `tree.map_structure` several times per step and goes through a
  trajectory writer; this one copies the step into its window and inserts one row).

  The single-process path's adder (`TransitionReplayBuilder.make_adder` with a
  `LocalReplayClient`); distributed actors keep acme's adder to Reverb.

  Raises (from `add_first`/`add`, nothing written): TypeError for a value of another
  dtype than its column's spec, ValueError for another shape, NonFiniteValueError for a
  NaN or +-inf value, each naming the column (`replay.ColumnChecker`).
  """

  def __init__(self, batched: BatchedNStepTransitionAdder):
    if batched.num_envs != 1:
      raise ValueError(f"SingleEnvAdder needs a batched adder of 1 env, got {batched.num_envs}")
    self._batched = batched
    self._row = np.zeros(1, np.int64)

  @property
  def items_written(self) -> int:
    return self._batched.items_written

  @property
  def steps_seen(self) -> int:
    return self._batched.steps_seen

  def add_first(self, timestep: dm_env.TimeStep) -> None:
    self._batched.add_first(self._row, np.asarray(timestep.observation)[None])

  def add(self, action, next_timestep: dm_env.TimeStep, extras=()) -> None:
    self._batched.add(self._row, np.asarray(action)[None],
                      np.asarray(next_timestep.reward)[None],
                      np.asarray(next_timestep.discount)[None],
                      np.asarray(next_timestep.observation)[None],
                      np.array([next_timestep.last()]), [extras])
    self._batched.flush()

  def reset(self) -> None:
    self._batched.reset()

  def close(self) -> None:
    self._batched.close()


# ---------------------------------------------------------------------------------------
# Sequences (recurrent agents).


class _CountingWriter:
  """A trajectory writer that counts the items it creates (everything else forwarded)."""

  def __init__(self, writer, counter: "_CountingClient"):
    self._writer, self._counter = writer, counter

  def create_item(self, table, priority, trajectory):
    self._writer.create_item(table, priority, trajectory)
    self._counter.items += 1

  def __getattr__(self, name):
    return getattr(self._writer, name)


class _CountingClient:
  """A replay client whose trajectory writers count the items they create."""

  def __init__(self, client):
    self._client = client
    self.items = 0

  def trajectory_writer(self, *args, **kwargs):
    return _CountingWriter(self._client.trajectory_writer(*args, **kwargs), self)

  def __getattr__(self, name):
    return getattr(self._client, name)


class CountingSequenceAdder(adders_reverb.SequenceAdder):
  """acme's `SequenceAdder`, unchanged, plus `items_written` (sequences created, one per
  table counted once per table it goes to), which the single-process loop reads
  (`core.ReplayProgress`). Works with a `reverb.Client` and a `LocalReplayClient`.
  Arguments are `SequenceAdder`'s."""

  def __init__(self, client, *args, **kwargs):
    self._counting = _CountingClient(client)
    super().__init__(self._counting, *args, **kwargs)

  @property
  def items_written(self) -> int:
    return int(self._counting.items)
