"""The reward-parity evaluation of a compressed policy (episodes run in
`actorq.components.acting.loop`)."""
from __future__ import annotations

import dataclasses
from typing import Callable, List, Optional, Sequence

import dm_env
import numpy as np

from actorq.components.acting import actors
from actorq.components.acting import loop as loop_lib
from actorq.components.acting import variable_client as vc
from actorq.quantization import bias_correction
from actorq.quantization import mixed
from actorq.quantization import network_spec as ns
from actorq.studies import compression

# The environment seed of the fp32 episode that calibrates an integer policy's bias
# correction outside a training run (`calibration_for`): apart from evaluation seeds.
CALIBRATION_SEED = 54321


def calibration_for(params, spec, selector: actors.Selector,
                    env_fn: Callable[[int], dm_env.Environment], precision: str,
                    seeds: Sequence[int] = (CALIBRATION_SEED,)) -> Optional[np.ndarray]:
  """The calibration observations of an integer `precision`'s bias correction: the fp32
  policy's greedy episodes on `seeds` (`compression.calibration_observations`), as a
  training run's actors are calibrated on the newest replay sample. None for float
  precisions and recurrent specs (nothing to correct)."""
  if isinstance(spec, ns.RecurrentSpec) or precision in mixed.FLOAT_KINDS:
    return None
  return compression.calibration_observations(params, spec, env_fn, selector, seeds)


def fixed_policy_actor(params, spec, precision: str, selector: actors.Selector,
                       per_channel: bool = True, seed: int = 0,
                       calibration: Optional[np.ndarray] = None) -> actors.FeedForwardActor:
  """An actor executing `params` at `precision`, with no variable client and no adder.

  With `calibration` (observations `[N, *input_shape]`, e.g. `calibration_for`), an integer
  payload's biases are corrected on them (`bias_correction`), as a training run's int8
  actors execute it.

  For a `network_spec.RecurrentSpec` (R2D2's LSTM Q-network) it is a `RecurrentActor`,
  whose (h, c) state starts from zeros and is reset at every episode's start (the loop's
  `reset_state`), as in a training run's evaluation.
  """
  runtime = vc.make_runtime(precision, spec)
  payload = vc.make_payload(params, spec, precision, 0, per_channel=per_channel)
  if calibration is not None and not isinstance(spec, ns.RecurrentSpec):
    payload = bias_correction.correct_payload(payload, params, spec, calibration)
  runtime.load(payload)
  if isinstance(spec, ns.RecurrentSpec):
    return actors.RecurrentActor(runtime, selector, seed=seed)
  return actors.FeedForwardActor(runtime, selector, seed=seed)


@dataclasses.dataclass
class ParityRow:
  """One precision's result. `action_agreement`: fraction of the reference run's
  observations on which this policy's greedy action equals the reference's (discrete),
  or 1 - mean |a - a_ref| / action range (continuous)."""
  precision: str
  episode_return: float
  episode_return_std: float
  action_agreement: float
  model_bytes: int


def reward_parity(env_fn: Callable[[], dm_env.Environment], params, spec,
                  selector: actors.Selector, precisions: Sequence[str], episodes: int,
                  per_channel: bool = True, action_range: float = 1.0) -> List[ParityRow]:
  """Evaluates the same parameters at several precisions on identically seeded envs.

  The first precision is the reference: its visited observations are replayed through
  every other precision to measure greedy-action agreement, and 64 of them calibrate the
  integer precisions' bias correction (as the newest replay sample does in training).

  Args:
    env_fn: builds a fresh, identically seeded environment.
    params: fp32 policy params of `spec`.
    selector: a *greedy* (deterministic) selector.
    precisions: e.g. ("fp32", "int8").
    episodes: episodes per precision (>= 1).
    action_range: for continuous actions, the width used to normalise differences.

  Raises:
    ValueError: `spec` is a `RecurrentSpec` (the agreement replays single observations,
      which a recurrent policy cannot act on without their history).
  """
  if isinstance(spec, ns.RecurrentSpec):
    raise ValueError("reward_parity replays single observations and needs a feed-forward "
                     "NetworkSpec; a recurrent policy (RecurrentSpec) is evaluated per "
                     "precision with fixed_policy_actor")
  rows: List[ParityRow] = []
  calibration = None
  for i, precision in enumerate(precisions):
    actor = fixed_policy_actor(params, spec, precision, selector, per_channel,
                               calibration=calibration)
    if i == 0:
      reference = Recorder(actor)
      stats = loop_lib.evaluate(env_fn(), reference, episodes)
      agreement = 1.0
      if reference.observations:  # the reference's states calibrate the others' bias correction
        calibration = compression.subsample(reference.observations,
                                            bias_correction.DEFAULT_CALIBRATION_SIZE)
    else:
      stats = loop_lib.evaluate(env_fn(), actor, episodes)
      agreement = action_agreement(actor, reference.observations, reference.actions,
                                   action_range)
    nbytes = vc.make_payload(params, spec, precision, 0, per_channel=per_channel).nbytes
    rows.append(ParityRow(precision, stats["episode_return"], stats["episode_return_std"],
                          agreement, int(nbytes)))
  return rows


class Recorder:
  """Acts with `actor` and records each observation and the action taken (the reference
  episodes whose observations `action_agreement` replays)."""

  def __init__(self, actor):
    self._actor, self.observations, self.actions = actor, [], []

  def select_action(self, observation):
    action = self._actor.select_action(observation)
    self.observations.append(np.asarray(observation))
    self.actions.append(np.asarray(action))
    return action


def action_agreement(actor, observations, reference_actions, action_range: float) -> float:
  """`actor`'s greedy actions on `observations` (one at a time) against
  `reference_actions` (the reference policy's on them, e.g. a `Recorder`'s): the fraction
  that are equal (discrete actions), or 1 - mean |a - a_ref| / `action_range`
  (continuous); NaN for no observations."""
  if not len(observations):
    return float("nan")
  got = np.stack([np.asarray(actor.select_action(o)) for o in observations])
  ref = np.stack(reference_actions)
  if np.issubdtype(ref.dtype, np.integer):
    return float(np.mean(got == ref))
  return float(1.0 - np.mean(np.abs(got - ref)) / action_range)
