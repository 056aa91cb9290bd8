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
    nests (`()`: no extras)."""
    for k, i in enumerate(rows):
      step_type = dm_env.StepType.LAST if last[k] else dm_env.StepType.MID
      self._adders[int(i)].add(actions[k], dm_env.TimeStep(
          step_type, rewards[k], discounts[k], next_observations[k]),
                               extras=extras[k] if len(extras) else ())

  def flush(self) -> None:
    """Nothing pending: every adder writes as it goes."""

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
    (a list of K nests, the extras of each row's action; `()` when there are none)."""
    rows = np.asarray(rows, np.int64)
    k_rows = len(rows)
    check = self._checker.check
    check("action", actions, self.steps_seen, rows=k_rows)
    check("observation", next_observations, self.steps_seen, rows=k_rows)
    check("reward", rewards, self.steps_seen, rows=k_rows)
    check("discount", discounts, self.steps_seen, rows=k_rows)
    for e in extras:
      check("extras", e, self.steps_seen)
    if self._ext and len(extras) != k_rows:
      raise ValueError(f"extras: {len(extras)} nests for {k_rows} rows (one per row needed)")
    # All B rows in order (a vector loop's usual step): basic indexing, no index arrays.
    sel = (slice(None) if k_rows == self.num_envs and (rows == self._all).all() else rows)
    if not self._open[sel].all():
      closed = np.flatnonzero(~self._open[rows])[0]
      raise RuntimeError(f"env {int(rows[closed])}: add before add_first")
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
    """Writes what is complete, then closes the Reverb writer (if any)."""
    self.flush()
    if self._writer is not None:
      self._writer.close()
      self._writer = None


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
