"""What the tests of every agent's population learner (`components.population.
PopulationLearner`; tests/agents/test_{dqn,td3,sac}_population.py, issue 43) share: a
small task spec, random transition batches, tree comparisons, and the drivers that step a
population and its members (or the agent's own learner) side by side. The assertions stay
in the tests; these only build inputs and run steps.

    spec = box_spec(observations=3, actions=2, low=-2.0, high=2.0)
    data = transitions(rng, spec, batch=8, lead=(3,))      # leaves [3, 8, ...]
    state, separate, rounds = step_population_and_members(population, state, hyper, inputs)
    learner, member = learner_and_member(population, builder, spec, batches, key)
"""
from __future__ import annotations

import types
from typing import Any, Iterable, Iterator, List, NamedTuple, Sequence, Tuple

import jax
import numpy as np
from acme import specs
from acme import types as acme_types

from actorq.components import population as population_lib

_REWARDS = specs.Array((), np.float32)
_DISCOUNTS = specs.BoundedArray((), np.float32, 0.0, 1.0)


def discrete_spec(observations: int, actions: int) -> specs.EnvironmentSpec:
  """float32 observations [observations], `actions` discrete actions, float32 rewards,
  discounts in [0, 1]."""
  return specs.EnvironmentSpec(specs.Array((observations,), np.float32),
                               specs.DiscreteArray(actions), _REWARDS, _DISCOUNTS)


def box_spec(observations: int, actions: int, low: float, high: float) -> specs.EnvironmentSpec:
  """float32 observations [observations], float32 actions [actions] in [low, high],
  float32 rewards, discounts in [0, 1]."""
  return specs.EnvironmentSpec(specs.Array((observations,), np.float32),
                               specs.BoundedArray((actions,), np.float32, low, high),
                               _REWARDS, _DISCOUNTS)


def transitions(rng: np.random.Generator, spec: specs.EnvironmentSpec, batch: int,
                lead: Tuple[int, ...] = ()) -> acme_types.Transition:
  """A `Transition` with leaves [*lead, batch, ...]: standard normal float32 observations
  and next observations, int32 actions uniform over a discrete spec's values or float32
  actions uniform in a box spec's bounds, standard normal float32 rewards, discounts 0 or
  0.98 (episode ends) equally likely. Draws from `rng` in field order: observation,
  action, reward, discount, next observation."""
  shape = tuple(lead) + (batch,)
  observation_shape = shape + spec.observations.shape
  actions = spec.actions
  if isinstance(actions, specs.DiscreteArray):
    draw_actions = lambda: rng.integers(actions.num_values, size=shape).astype(np.int32)
  else:
    draw_actions = lambda: rng.uniform(actions.minimum, actions.maximum,
                                       size=shape + actions.shape).astype(np.float32)
  return acme_types.Transition(
      observation=rng.normal(size=observation_shape).astype(np.float32),
      action=draw_actions(),
      reward=rng.normal(size=shape).astype(np.float32),
      discount=rng.choice([0.0, 0.98], size=shape).astype(np.float32),
      next_observation=rng.normal(size=observation_shape).astype(np.float32), extras=())


def assert_trees_close(a: Any, b: Any, rtol: float = 1e-5, atol: float = 1e-6) -> None:
  """Every leaf of `a` within `assert_allclose(rtol, atol)` of `b`'s (same number of
  leaves, in tree order; rtol = atol = 0 asks for equality)."""
  for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b), strict=True):
    np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=rtol, atol=atol)


def assert_trees_equal(a: Any, b: Any) -> None:
  """Every leaf of `a` bit for bit `b`'s (in tree order)."""
  for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b), strict=True):
    np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


class StepInputs(NamedTuple):
  """One round's population step inputs: transitions [N, B, ...], probabilities and
  table sizes float32 [N, B], active bool [N]."""
  transitions: Any
  probabilities: np.ndarray
  table_size: np.ndarray
  active: np.ndarray


class Round(NamedTuple):
  """One round's outputs: the population step's td [N, B] and metrics ([N] each), and
  each member's own `(td [B], metrics)` from `jit(member_step)`."""
  td: Any
  metrics: Any
  members: List[Tuple[Any, Any]]


def step_population_and_members(population: population_lib.PopulationLearner, state: Any,
                                hyper: Any, inputs: Iterable[StepInputs]
                                ) -> Tuple[Any, List[Any], List[Round]]:
  """Steps `state` (leaves [N, ...]) with `population.step` and, beside it, each member
  m's own copy with `jax.jit(population.member_step)` on member m's slice of the same
  inputs (`components.population.member`), round by round.

  Returns:
    `(state, separate, rounds)`: the population's state after the rounds, the N members'
    states stepped one by one, and a `Round` per round.
  """
  n = len(jax.tree_util.tree_leaves(state)[0])
  separate = [population_lib.member(state, m) for m in range(n)]
  one = jax.jit(population.member_step)
  rounds = []
  for x in inputs:
    state, td, metrics = population.step(state, x.transitions, x.probabilities, x.table_size,
                                         hyper, x.active)
    members = []
    for m in range(n):
      separate[m], td_m, metrics_m = one(
          separate[m], population_lib.member(x.transitions, m), x.probabilities[m],
          x.table_size[m], population_lib.member(hyper, m), x.active[m])
      members.append((td_m, metrics_m))
    rounds.append(Round(td, metrics, members))
  return state, separate, rounds


def learner_and_member(population: population_lib.PopulationLearner, builder: Any,
                       spec: specs.EnvironmentSpec, batches: Sequence[Any],
                       key: jax.Array) -> Tuple[Any, Any]:
  """The agent's own learner (`builder.make_learner(key, population.networks, ...)`,
  reading `batches` as its samples, no logger) and a one-member population state from
  the same key (`population.init(key[None])`), neither stepped yet."""
  samples = iter([types.SimpleNamespace(data=b) for b in batches])
  learner = builder.make_learner(key, population.networks, samples, lambda label: None, spec)
  return learner, population.init(key[None])


def step_learner_and_member(population: population_lib.PopulationLearner, learner: Any,
                            state: Any, batches: Sequence[Any]) -> Any:
  """One `learner.step()` and one population step of the one-member `state` (the
  config's hyperparameters, probabilities and table sizes 1, active) per batch of
  `batches` (the learner's samples, in order); returns the member's state."""
  hyper = population.hyperparameters(1)
  ones = np.ones((1, len(batches[0].reward)), np.float32)
  for b in batches:
    learner.step()
    state, _, _ = population.step(state, jax.tree_util.tree_map(lambda x: x[None], b), ones,
                                  ones, hyper, np.array([True]))
  return state


def step_with_member_0_inactive(population: population_lib.PopulationLearner,
                                spec: specs.EnvironmentSpec, batch: int,
                                probability: float = 1.0, table_size: float = 1.0
                                ) -> Tuple[Any, Any, Any]:
  """One population step of two members (`init` from `split(PRNGKey(1), 2)`, the config's
  hyperparameters, `transitions(default_rng(1), spec, batch, (2,))`, every probability
  and table size the values given) with member 0 inactive and member 1 active.

  Returns:
    `(state, new, td)`: the state before and after the step, and the step's td [2, B].
  """
  state = population.init(jax.random.split(jax.random.PRNGKey(1), 2))
  data = transitions(np.random.default_rng(1), spec, batch, (2,))
  probabilities = np.full((2, batch), probability, np.float32)
  sizes = np.full((2, batch), table_size, np.float32)
  new, td, _ = population.step(state, data, probabilities, sizes,
                               population.hyperparameters(2), np.array([False, True]))
  return state, new, td


def make_population(population_cls: type, builder_cls: type, spec: specs.EnvironmentSpec,
                    **config_fields: Any) -> Tuple[population_lib.PopulationLearner, Any]:
  """`(population, builder)`: `population_cls` on `population_cls.CONFIG(**config_fields)`
  with the networks `builder_cls(config).make_networks(spec)`, and that builder."""
  config = population_cls.CONFIG(**config_fields)
  builder = builder_cls(config)
  return population_cls(config, builder.make_networks(spec), spec), builder


def alternating_inputs(rng: np.random.Generator, spec: specs.EnvironmentSpec, batch: int,
                       population: int, rounds: int, probabilities: Any = None,
                       table_size: float = 1.0) -> Iterator[StepInputs]:
  """`rounds` rounds of `StepInputs`, drawn lazily from `rng` round by round:
  `transitions(rng, spec, batch, (population,))`, then `probabilities(rng, [population,
  batch])` when given (else ones), every table size `table_size`; member 1 active on even
  rounds only, every other member on every round."""
  shape = (population, batch)
  for r in range(rounds):
    data = transitions(rng, spec, batch, shape[:1])
    p = (np.ones(shape, np.float32) if probabilities is None
         else np.asarray(probabilities(rng, shape), np.float32))
    active = np.array([m != 1 or r % 2 == 0 for m in range(population)])
    yield StepInputs(data, p, np.full(shape, table_size, np.float32), active)


def assert_rounds_match_members(rounds: Sequence[Round], metrics: Sequence[str] = (),
                                td: bool = False, rtol: float = 1e-5,
                                atol: float = 0.0) -> None:
  """For every round and member m: the population step's `metrics[name][m]` (each name
  in `metrics`) and, with `td`, its `td[m]` within `assert_allclose(rtol, atol)` of member
  m's own step's."""
  for r in rounds:
    for m, (td_m, metrics_m) in enumerate(r.members):
      for name in metrics:
        np.testing.assert_allclose(np.asarray(r.metrics[name][m]), np.asarray(metrics_m[name]),
                                   rtol=rtol, atol=atol)
      if td:
        np.testing.assert_allclose(np.asarray(r.td[m]), np.asarray(td_m), rtol=rtol, atol=atol)
