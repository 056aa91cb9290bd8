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

from acme.adders import reverb as adders_reverb


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
