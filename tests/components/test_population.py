"""PBT's agent-independent pieces (issue 43): ranking, truncation selection, exact member
copies and explore, and the population-learner base every agent's population learner
subclasses, with hand-computed values."""
import dataclasses
import types
from typing import Any, NamedTuple

import jax.numpy as jnp
import numpy as np
import pytest
from acme import specs

from actorq.components import population as pop


def test_ranking_puts_nan_last_and_breaks_ties_by_index():
  assert pop.ranking([1.0, 3.0, float("nan"), 3.0, -2.0]) == [1, 3, 0, 4, 2]


def test_truncation_selection_bottom_copies_top():
  rng = np.random.default_rng(0)
  fitness = [10.0, 50.0, 20.0, 40.0, 30.0, 0.0, 60.0, 5.0]
  # N = 8, quantile 0.25 -> 2 each: top = [6, 1], bottom worst first = [5, 7].
  losers, winners = pop.truncation_selection(fitness, 0.25, rng)
  assert losers == [5, 7]
  assert set(winners) <= {6, 1}
  # N = 2: one each, whatever the quantile up to 0.5.
  assert pop.truncation_selection([1.0, 2.0], 0.5, rng) == ([0], [1])
  assert pop.quantile_size(4, 0.25) == 1 and pop.quantile_size(16, 0.25) == 4
  with pytest.raises(ValueError, match="at least 2 members"):
    pop.quantile_size(1, 0.25)
  with pytest.raises(ValueError, match=r"\(0, 0.5\]"):
    pop.quantile_size(4, 0.75)


def test_copy_member_is_exact_and_leaves_the_others():
  state = {"w": jnp.arange(12.0).reshape(3, 4), "count": jnp.array([1, 2, 3], jnp.int32)}
  out = pop.copy_member(state, source=2, target=0)
  np.testing.assert_array_equal(out["w"], [[8, 9, 10, 11], [4, 5, 6, 7], [8, 9, 10, 11]])
  np.testing.assert_array_equal(out["count"], [3, 2, 3])
  stacked = pop.stack([pop.member(state, i) for i in range(3)])
  np.testing.assert_array_equal(stacked["w"], state["w"])


def test_explore_perturbs_by_the_paper_factors_or_resamples_in_range():
  space = pop.Hyperparameter(1e-4, 1e-2, log=True)
  rng = np.random.default_rng(1)
  values = [pop.explore(space, 1e-3, rng, resample_probability=0.0) for _ in range(50)]
  assert set(np.round(values, 12)) == {0.0008, 0.0012}
  assert pop.explore(space, 9e-3, np.random.default_rng(0), 0.0) in (9e-3 * 0.8, 1e-2)
  resampled = [pop.explore(space, 1e-3, rng, resample_probability=1.0) for _ in range(50)]
  assert all(1e-4 <= v <= 1e-2 for v in resampled) and len(set(resampled)) == 50
  with pytest.raises(ValueError, match="low < high"):
    pop.Hyperparameter(1.0, 1.0)


@dataclasses.dataclass(frozen=True)
class _ToyConfig:
  learning_rate: float = 1e-3
  discount: float = 0.99
  actor_precision: str = "fp32"
  width: int = 2

  def __post_init__(self):
    if not 0.0 <= self.discount <= 1.0:
      raise ValueError(f"discount must be in [0, 1], got {self.discount}")


class _Batch(NamedTuple):
  reward: Any


class _ToyHyper(NamedTuple):
  learning_rate: Any
  discount: Any


class _ToyPopulation(pop.PopulationLearner):
  """A member's state is one float32; a step subtracts learning_rate * discount."""
  CONFIG = _ToyConfig
  MEMBER_HYPERPARAMETERS = _ToyHyper
  HYPERPARAMETERS = {"learning_rate": pop.learning_rate("lr"), "discount": pop.DISCOUNT,
                     "actor_precision": pop.ACTOR_PRECISION}
  LOSS_METRICS = ("loss",)

  def init(self, keys):
    return jnp.zeros(len(keys), jnp.float32)

  def member_step(self, state, transitions, probabilities, table_size, hyper, active):
    new = state - hyper.learning_rate * hyper.discount
    return pop.where_active(active, new, state), pop.no_priorities(transitions), {
        "loss": new}

  @staticmethod
  def policy_params(state):
    return state

  def select_actions(self, values, actor_steps, hyper, rng, explore=True):
    return values.argmax(-1)


_TOY_NETWORKS = types.SimpleNamespace(
    policy=types.SimpleNamespace(apply=lambda params, observations: observations @ params))


def test_population_learner_members_configs_step_and_refusal():
  population = _ToyPopulation(_ToyConfig(), _TOY_NETWORKS)
  assert _ToyPopulation.LEARNER_FIELDS == ("learning_rate", "discount")
  hyper = population.hyperparameters(3)
  assert hyper.learning_rate.dtype == jnp.float32
  assert hyper.learning_rate.tolist() == [np.float32(1e-3)] * 3
  assert hyper.discount.tolist() == [np.float32(0.99)] * 3
  # member_config: learner fields as Python floats, the rest as given, checked by the config.
  config = population.member_config({"learning_rate": np.float32(0.5), "actor_precision": "int8"})
  assert (config.learning_rate, type(config.learning_rate), config.actor_precision,
          config.discount, config.width) == (0.5, float, "int8", 0.99, 2)
  with pytest.raises(ValueError, match="discount must be in"):
    population.member_config({"discount": 1.5})
  values = {"learning_rate": 0.1, "discount": 0.9}
  assert population.constrain(values) == values and population.constrain(values) is not values
  # step = jit(vmap(member_step)): member 1 inactive keeps its state; td zeros [N, B].
  hyper = hyper._replace(learning_rate=jnp.array([0.5, 0.5, 0.25], jnp.float32),
                         discount=jnp.array([1.0, 1.0, 0.5], jnp.float32))
  batch = _Batch(reward=np.ones((3, 4), np.float32))
  state, td, metrics = population.step(population.init(np.zeros((3, 2))), batch, None, None,
                                       hyper, np.array([True, False, True]))
  assert state.tolist() == [-0.5, 0.0, -0.125]
  assert metrics["loss"].tolist() == [-0.5, -0.5, -0.125]
  np.testing.assert_array_equal(td, np.zeros((3, 4), np.float32))
  # policy_values: the POLICY_NETWORK's apply per member, [N, B, A] from [N, B, D] x [N, D, A].
  params = np.stack([np.eye(2), 2 * np.eye(2)]).astype(np.float32)
  observations = np.array([[[1.0, 2.0]], [[3.0, -1.0]]], np.float32)
  np.testing.assert_array_equal(population.policy_values(params, observations),
                                [[[1.0, 2.0]], [[6.0, -2.0]]])
  assert population.as_dicts(population.with_member(hyper, 1, {"discount": 0.75}))[1] == {
      "learning_rate": 0.5, "discount": 0.75}
  with pytest.raises(ValueError, match="^_ToyPopulation needs a _ToyConfig, got object$"):
    _ToyPopulation(object(), _TOY_NETWORKS)


class _ToyBox(pop.BoxPopulationLearner):
  """`_ToyPopulation`'s learning; acting: greedy, the values clipped to the box;
  exploring, values + eps, clipped."""
  CONFIG = types.SimpleNamespace
  MEMBER_HYPERPARAMETERS = _ToyHyper
  init = _ToyPopulation.init
  member_step = _ToyPopulation.member_step
  policy_params = staticmethod(_ToyPopulation.policy_params)

  def greedy_actions(self, values):
    return np.clip(values, self._lo, self._hi).astype(np.float32)

  def explore_actions(self, values, hyper, eps):
    return np.clip(values + eps, self._lo, self._hi).astype(np.float32)


def test_box_population_learner_warm_up_then_noise_in_a_fixed_draw_order():
  spec = specs.EnvironmentSpec(specs.Array((3,), np.float32),
                               specs.BoundedArray((2,), np.float32, -1.0, 1.0),
                               specs.Array((), np.float32), specs.Array((), np.float32))
  population = _ToyBox(types.SimpleNamespace(random_warmup_steps=10), _TOY_NETWORKS, spec)
  values = np.array([[[0.5, -3.0]], [[0.25, 0.0]]], np.float32)  # [N=2, B=1, A=2]
  got = population.select_actions(values, np.array([9, 10]), None, np.random.default_rng(2))
  draws = np.random.default_rng(2)
  eps = draws.standard_normal((2, 1, 2)).astype(np.float32)
  uniform = draws.uniform(-1.0, 1.0, (2, 1, 2)).astype(np.float32)
  np.testing.assert_array_equal(got[0], uniform[0])  # step 9 < 10: warm-up
  np.testing.assert_array_equal(got[1], np.clip(values[1] + eps[1], -1.0, 1.0))
  np.testing.assert_array_equal(population.select_actions(values, None, None, None, False),
                                [[[0.5, -1.0]], [[0.25, 0.0]]])
  assert got.dtype == np.float32 and population._dummy.shape == (3,)
  # The agent's own methods are abstract: the bases alone cannot be built.
  for base in (pop.PopulationLearner, pop.BoxPopulationLearner):
    with pytest.raises(TypeError, match="abstract"):
      base(_ToyConfig(), _TOY_NETWORKS)
