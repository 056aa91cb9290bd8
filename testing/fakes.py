"""Fakes for tests of components and launchers (the shape of `acme.testing.fakes`): small
objects with the contracts of `actorq.core`, whose every value is known in advance, so a
test can assert exact values without training anything.

* `CountingLearner`: a `core.Learner` whose every policy parameter equals its step count
  (case Q5: an actor's copy can be checked against the version it claims).
* `ScriptedEnvironment`: a `dm_env.Environment` with scripted rewards, episode lengths
  and ends (termination or truncation), or episodes that never end.
* `RecordingActor`: a `core.Actor` that records the calls it gets, in order.
* `ScriptedVectorEnvironment`: B `dm_env` environments (e.g. `ScriptedEnvironment`s) as a
  `vector_env.VectorEnvironment` with its auto-reset (the step after a LAST resets).
* `FixedRuntime`: a policy runtime returning fixed outputs for any batch.
* `ScriptedParallelEnv`: a two-agent PettingZoo parallel environment with scripted
  rewards and per-agent ends (`components.envs.multi_agent` wraps it);
  `install_scripted_pz(monkeypatch)` makes it the id ``pz:scripted_pkg/scripted_v0``.
* `FixedPolicySource`: a learner serving fixed policy parameters (for a `PolicyServer`).
"""
from __future__ import annotations

from typing import Any, List, Optional, Sequence

import dm_env
import numpy as np
from acme import specs
from dm_env import specs as dm_specs

from actorq.components.envs import vector_env
from actorq.quantization import network_spec as ns
from actorq.quantization import payload


class CountingLearner:
  """Every parameter of `spec`'s policy equals the learner's step count (float32).

  `get_variables(["policy", "version"])` -> `[params, steps]`; `step()` adds one;
  `save()`/`restore()` carry the step count.
  """

  def __init__(self, spec: ns.NetworkSpec):
    self._shapes = payload.expected_shapes(spec)
    self.steps = 0

  @property
  def step_count(self) -> int:
    return self.steps

  def step(self) -> None:
    self.steps += 1

  def get_variables(self, names: Sequence[str]) -> List[Any]:
    value = float(self.steps)
    params = {layer: {k: np.full(shape, value, np.float32) for k, shape in arrays.items()}
              for layer, arrays in self._shapes.items()}
    out = {"policy": params, "version": self.steps}
    return [out[n] for n in names]

  def save(self) -> int:
    return self.steps

  def restore(self, state: int) -> None:
    self.steps = int(state)


class ScriptedEnvironment(dm_env.Environment):
  """Observations `[offset + t]` (float32, t the step index within the episode), `num_actions`
  discrete actions, float32 rewards `rewards[t]` (or `reward` on every step) and
  discounts, and episodes of
  `len(rewards)` steps (or `episode_length`; None: never ending) that end as a
  termination (discount 0) unless `truncate` (discount 1).

  Attributes:
    actions: every action received, in order; `resets`: resets so far.
  """

  def __init__(self, rewards: Optional[Sequence[float]] = None, *, reward: float = 1.0,
               episode_length: Optional[int] = None, truncate: bool = False,
               num_actions: int = 2, observation_offset: float = 0.0):
    if rewards is not None:
      episode_length = len(rewards)
    self._rewards = None if rewards is None else [float(r) for r in rewards]
    self._reward = float(reward)
    self._length = episode_length
    self._truncate = truncate
    self._num_actions = int(num_actions)
    self._offset = float(observation_offset)
    self._t = 0
    self.actions: List[Any] = []
    self.resets = 0

  def reset(self) -> dm_env.TimeStep:
    self._t = 0
    self.resets += 1
    return dm_env.restart(np.full(1, self._offset, np.float32))

  def step(self, action) -> dm_env.TimeStep:
    self.actions.append(action)
    reward = np.float32(self._reward if self._rewards is None else self._rewards[self._t])
    self._t += 1
    obs = np.full(1, self._offset + self._t, np.float32)
    if self._length is not None and self._t >= self._length:
      if self._truncate:
        return dm_env.truncation(reward, obs, np.float32(1.0))
      return dm_env.TimeStep(dm_env.StepType.LAST, reward, np.float32(0.0), obs)
    return dm_env.transition(reward, obs, np.float32(1.0))

  def observation_spec(self):
    return dm_specs.Array((1,), np.float32, "observation")

  def action_spec(self):
    return dm_specs.DiscreteArray(self._num_actions, dtype=np.int32, name="action")

  def reward_spec(self):
    return dm_specs.Array((), np.float32, "reward")

  def discount_spec(self):
    return dm_specs.BoundedArray((), np.float32, 0.0, 1.0, "discount")


class RecordingActor:
  """Acts with `action` and records every call (`calls`: "select", "first", "observe",
  "update") and every observed timestep (`observed`)."""

  def __init__(self, action: Any = 1, policy_version: int = 0):
    self._action = action
    self.calls: List[str] = []
    self.observed: List[dm_env.TimeStep] = []
    self.policy_version = policy_version
    self.num_steps = 0
    self.rng_state = None

  def select_action(self, observation) -> Any:
    self.calls.append("select")
    self.num_steps += 1
    return self._action

  def observe_first(self, timestep: dm_env.TimeStep) -> None:
    self.calls.append("first")

  def observe(self, action, next_timestep: dm_env.TimeStep) -> None:
    self.calls.append("observe")
    self.observed.append(next_timestep)

  def update(self, wait: bool = False) -> None:
    self.calls.append("update")


class ScriptedVectorEnvironment(vector_env.VectorEnvironment):
  """`envs` (B `dm_env.Environment`s of one spec) stepped as one vector environment:
  row i steps `envs[i]`, or resets it when its previous step was LAST (its action is then
  ignored and never reaches it), as EnvPool and Gymnasium's vector envs do."""
  backend = "scripted"

  def __init__(self, envs: Sequence[dm_env.Environment]):
    self.envs = list(envs)
    super().__init__("scripted", len(self.envs), specs.make_environment_spec(self.envs[0]))

  def _reset(self):
    return np.stack([env.reset().observation for env in self.envs])

  def _step(self, actions):
    steps = [env.reset() if self._last[i] else env.step(actions[i])
             for i, env in enumerate(self.envs)]
    reward = np.array([0.0 if ts.reward is None else ts.reward for ts in steps], np.float32)
    discount = np.array([1.0 if ts.discount is None else ts.discount for ts in steps],
                        np.float32)
    last = np.array([ts.last() for ts in steps])
    return np.stack([ts.observation for ts in steps]), reward, discount, last


class FixedRuntime:
  """A policy runtime (the interface actors use) whose outputs are `outputs` for every
  row of any batch; version 0, precision "fp32"."""
  precision = "fp32"
  payload_precision = "fp32"

  def __init__(self, outputs: Sequence[float]):
    self._outputs = np.asarray(outputs, np.float32)
    self.version = 0
    self.calls: List[int] = []  # batch size of each call

  def __call__(self, observation) -> np.ndarray:
    batch = np.asarray(observation).shape[0]
    self.calls.append(batch)
    return np.tile(self._outputs, (batch, 1))

  def diagnose(self, observation) -> str:
    return "fixed outputs"


class ScriptedParallelEnv:
  """A PettingZoo parallel environment of two agents "a" and "b" with scripted rewards and
  ends. Step t (1, 2, ...): reward a = 1 + action_a, reward b = 10 t + action_b; "a"
  terminates at t = 2, "b" is truncated at t = 3 (agents finishing at different times,
  termination vs truncation). Observation of agent i: float32 [t, i, seed] (the seed of
  the last seeded reset). Actions: Discrete(2) for "a", Discrete(`b_actions`) for "b".
  Global state (`state()`): float32 [t, agents alive]."""
  metadata = {"name": "scripted_v0", "is_parallelizable": True}
  render_mode = None

  def __init__(self, b_actions: int = 2):
    from gymnasium import spaces
    self.possible_agents = ["a", "b"]
    self.agents = []
    self._spaces = {"a": spaces.Discrete(2), "b": spaces.Discrete(b_actions)}
    self._obs = spaces.Box(-100.0, 100.0, (3,), np.float32)
    self.state_space = spaces.Box(-100.0, 100.0, (2,), np.float32)
    self.t, self.seed = 0, 0

  def observation_space(self, agent):
    return self._obs

  def action_space(self, agent):
    return self._spaces[agent]

  def _observe(self):
    return {a: np.asarray([self.t, i, self.seed], np.float32)
            for i, a in enumerate(self.possible_agents) if a in self.agents}

  def reset(self, seed=None, options=None):
    if seed is not None:
      self.seed = seed
    self.t, self.agents = 0, list(self.possible_agents)
    return self._observe(), {a: {} for a in self.agents}

  def step(self, actions):
    self.t += 1
    rewards = {}
    if "a" in actions:
      rewards["a"] = 1.0 + actions["a"]
    if "b" in actions:
      rewards["b"] = 10.0 * self.t + actions["b"]
    term = {a: a == "a" and self.t == 2 for a in actions}
    trunc = {a: a == "b" and self.t == 3 for a in actions}
    obs = self._observe()
    self.agents = [a for a in self.agents if not (term.get(a) or trunc.get(a))]
    return obs, rewards, term, trunc, {a: {} for a in actions}

  def state(self):
    return np.asarray([self.t, len(self.agents)], np.float32)

  def close(self):
    pass


SCRIPTED_PZ_ID = "pz:scripted_pkg/scripted_v0"


def install_scripted_pz(monkeypatch) -> str:
  """Makes `ScriptedParallelEnv` an installed PettingZoo module (``scripted_pkg.scripted_v0``
  with ``parallel_env``) for the test (`monkeypatch`: pytest's fixture, which removes it
  afterwards); returns its id, `SCRIPTED_PZ_ID`."""
  import sys
  import types
  package = types.ModuleType("scripted_pkg")
  package.__path__ = []
  module = types.ModuleType("scripted_pkg.scripted_v0")
  module.parallel_env = ScriptedParallelEnv
  monkeypatch.setitem(sys.modules, "scripted_pkg", package)
  monkeypatch.setitem(sys.modules, "scripted_pkg.scripted_v0", module)
  return SCRIPTED_PZ_ID


class FixedPolicySource:
  """A learner serving fixed policy parameters at version 0
  (`get_variables(["policy", "version"])`), e.g. behind a `variable_client.PolicyServer`."""

  def __init__(self, params):
    self.params = params

  def get_variables(self, names):
    return [{"policy": self.params, "version": 0}[n] for n in names]
