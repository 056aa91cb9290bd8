"""Greedy evaluation of a multi-agent run's checkpoint (what `actorq eval --checkpoint RUN`
does for a ``pz:`` run; issue 44).

Each parameter group's fp32 policy in the checkpoint (``policy_params[<group>]``, written by
`launch.multi_agent`) runs at the chosen precision through `reward_parity.fixed_policy_actor`,
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


class _Recording:
  """A batched actor that keeps the live rows of every batch of observations it acts on."""

  def __init__(self, actor):
    self._actor, self.rows = actor, []

  def select_actions(self, observations, live):
    self.rows.append(np.asarray(observations)[np.asarray(live, bool)])
    return self._actor.select_actions(observations, live)

  def __getattr__(self, name):
    return getattr(self._actor, name)


def _group_parts(builder, env):
  groups = builder.make_groups(env)
  out = []
  for group in groups:
    gb = builder.group_builder(group)
    networks = gb.make_networks(group.environment_spec)
    out.append((group, networks, gb.make_policy(networks, group.environment_spec,
                                                evaluation=True)))
  return groups, out


def _actors(parts, params: Dict[str, object], precision: str, seed: int,
            calibrations: Optional[List[Optional[np.ndarray]]] = None):
  out = []
  for g, (group, networks, policy) in enumerate(parts):
    actor = reward_parity.fixed_policy_actor(
        params[group.name], networks.spec, precision, policy.selector, seed=seed + g,
        calibration=None if calibrations is None else calibrations[g])
    out.append(actors.batched(actor, None, group.environment_spec.actions.generate_value()))
  return out


def _play(env_id: str, groups, group_actors, episodes: int, seed: int,
          max_episode_steps: int) -> List[ma_loop.MultiAgentEpisodeStats]:
  env = ma_env.make_multi_agent_environment(env_id, seed=seed)
  try:
    return ma_loop.MultiAgentLoop([env], groups, group_actors, learn=False,
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
    groups, parts = _group_parts(builder, env)
  finally:
    env.close()
  if sorted(params) != sorted(g.name for g in groups):
    raise core.UsageError(f"the checkpoint holds the parameter groups {', '.join(sorted(params))}"
                          f", the run's config makes {', '.join(g.name for g in groups)}")
  precision = precision or parts[0][2].precision
  calibrations = None
  if precision not in mixed.FLOAT_KINDS:  # integer payloads: bias-corrected as in training
    recorders = [_Recording(a) for a in _actors(parts, params, "fp32", seed)]
    _play(env_id, groups, recorders, 1, reward_parity.CALIBRATION_SEED, max_episode_steps)
    calibrations = [np.concatenate(r.rows) for r in recorders]
  played = _play(env_id, groups, _actors(parts, params, precision, seed, calibrations),
                 episodes, seed, max_episode_steps)
  return precision, played
