"""Greedy evaluation of a multi-agent run's checkpoint (what `actorq eval --checkpoint RUN`
does for a ``pz:`` run; issue 44).

Each parameter group's fp32 policy in the checkpoint (``policy_params[<group>]``, written by
`launch.local`) runs at the chosen precision through `reward_parity.fixed_policy_actor`,
batched over the group's agents, in `MultiAgentLoop` on one environment seeded `seed`.
An integer precision's payload is bias-corrected, as a training run's int8 actors are, on
the observations the group's fp32 policy sees in greedy episodes on
`reward_parity.CALIBRATION_SEED` (the multi-agent twin of `reward_parity.calibration_for`).
"""
from __future__ import annotations

from typing import Dict, List, Optional

import numpy as np

from actorq import core
from actorq.components.acting import actors
from actorq.components.acting import multi_agent as ma_loop
from actorq.components.envs import multi_agent as ma_env
from actorq.quantization import mixed
from actorq.studies import reward_parity


class Recording:
  """A batched actor that keeps the live rows of every batch of observations it acts on
  (`rows`) and the actions it chose for them (`actions`)."""

  def __init__(self, actor):
    self._actor, self.rows, self.actions = actor, [], []

  def select_actions(self, observations, live):
    live = np.asarray(live, bool)
    self.rows.append(np.asarray(observations)[live])
    actions = self._actor.select_actions(observations, live)
    self.actions.append(np.asarray(actions)[live])
    return actions

  def __getattr__(self, name):
    return getattr(self._actor, name)


def group_parts(builder, env):
  """`(groups, parts)`: `builder`'s parameter groups of `env` and per group `(group,
  networks, evaluation policy)` of its single-agent builder."""
  groups = builder.make_groups(env)
  out = []
  for group in groups:
    gb = builder.group_builder(group)
    networks = gb.make_networks(group.environment_spec)
    out.append((group, networks, gb.make_policy(networks, group.environment_spec,
                                                evaluation=True)))
  return groups, out


def group_actors(parts, params: Dict[str, object], precision: str, seed: int,
            calibrations: Optional[List[Optional[np.ndarray]]] = None):
  """One batched actor per group of `parts` executing `params[group]` at `precision`
  (integer payloads bias-corrected on `calibrations[g]`), selector generators seeded
  `seed + g`."""
  out = []
  for g, (group, networks, policy) in enumerate(parts):
    actor = reward_parity.fixed_policy_actor(
        params[group.name], networks.spec, precision, policy.selector, seed=seed + g,
        calibration=None if calibrations is None else calibrations[g])
    out.append(actors.batched(actor, None, group.environment_spec.actions.generate_value()))
  return out


def play(env_id: str, groups, batched_actors, episodes: int, seed: int,
          max_episode_steps: int) -> List[ma_loop.MultiAgentEpisodeStats]:
  """`episodes` episodes of `batched_actors` (one per group) on `env_id` seeded `seed`."""
  env = ma_env.make_multi_agent_environment(env_id, seed=seed)
  try:
    return ma_loop.MultiAgentLoop([env], groups, batched_actors, learn=False,
                                  max_episode_steps=max_episode_steps).run(num_episodes=episodes)
  finally:
    env.close()


def evaluate_checkpoint(builder, env_id: str, state: dict, precision: Optional[str],
                        episodes: int, seed: int,
                        max_episode_steps: int) -> tuple:
  """`(precision, episodes)`: `episodes` greedy episodes of the checkpoint `state`'s
  policies at `precision` (None: the builder's evaluation precision) on `env_id` seeded
  `seed`; each episode a `MultiAgentEpisodeStats` (team return, per-agent returns).

  Raises:
    core.UsageError: the checkpoint is not a multi-agent one, or its groups differ from
      the builder's for this environment.
    core.EnvironmentFailure: the environment raised.
  """
  params = state.get("policy_params")
  if not state.get("multi_agent") or not isinstance(params, dict):
    raise core.UsageError(f"the checkpoint of this {env_id} run holds no multi-agent "
                          "policies (written before multi-agent checkpoints existed?)")
  env = ma_env.make_multi_agent_environment(env_id, seed=seed)
  try:
    groups, parts = group_parts(builder, env)
  finally:
    env.close()
  if sorted(params) != sorted(g.name for g in groups):
    raise core.UsageError(f"the checkpoint holds the parameter groups {', '.join(sorted(params))}"
                          f", the run's config makes {', '.join(g.name for g in groups)}")
  precision = precision or parts[0][2].precision
  calibrations = calibrations_for(env_id, groups, parts, params, precision, seed,
                                  max_episode_steps)
  played = play(env_id, groups, group_actors(parts, params, precision, seed, calibrations),
                episodes, seed, max_episode_steps)
  return precision, played


def calibrations_for(env_id: str, groups, parts, params: Dict[str, object], precision: str,
                     seed: int, max_episode_steps: int) -> Optional[List[np.ndarray]]:
  """Per group, the observations `[N, *input_shape]` its fp32 policy sees in a greedy
  episode of every group's fp32 policy on `reward_parity.CALIBRATION_SEED`: what an
  integer `precision`'s payload is bias-corrected on (None for float precisions)."""
  if precision in mixed.FLOAT_KINDS:
    return None
  recorders = [Recording(a) for a in group_actors(parts, params, "fp32", seed)]
  play(env_id, groups, recorders, 1, reward_parity.CALIBRATION_SEED, max_episode_steps)
  return [np.concatenate(r.rows) for r in recorders]
