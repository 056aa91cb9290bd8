"""`components.learners.JaxLearner`: step bookkeeping and save/restore shared by the
DQN, DPG and on-policy learners."""
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from acme.utils import counting

from actorq.components import learners


class State(NamedTuple):
  w: jnp.ndarray
  steps: jnp.ndarray


class Recording:
  def __init__(self):
    self.rows = []

  def write(self, row):
    self.rows.append(row)


class Toy(learners.JaxLearner):
  def __init__(self, counter, logger):
    self._init_bookkeeping(counter, logger)
    self._state = State(jnp.zeros(2), jnp.zeros((), jnp.int32))

  def step(self):
    self._state = State(self._state.w + 1.0, self._state.steps + 1)
    self._record_step({"loss": jnp.float32(0.5) * self.step_count})

  def get_variables(self, names):
    return [self._state.w for _ in names]


def test_steps_are_counted_and_logged_with_float_metrics():
  counter, logger = counting.Counter(), Recording()
  learner = Toy(counter, logger)
  for _ in range(3):
    learner.step()
  assert learner.step_count == 3
  assert counter.get_counts()["steps"] == 3
  assert logger.rows == [{"learner_steps": 1, "loss": 0.5}, {"learner_steps": 2, "loss": 1.0},
                         {"learner_steps": 3, "loss": 1.5}]
  assert all(isinstance(r["loss"], float) for r in logger.rows)


def test_save_and_restore_round_trip_also_from_a_plain_tuple():
  learner = Toy(None, None)
  learner.step()
  saved = learner.save()
  assert isinstance(saved.w, np.ndarray)
  other = Toy(None, None)
  other.restore(tuple(saved))  # a checkpoint may keep the NamedTuple as a plain tuple
  assert isinstance(other._state, State) and other.step_count == 1
  np.testing.assert_array_equal(other._state.w, [1.0, 1.0])


class Diverging(Toy):
  """Its third step computes a NaN loss and an infinite gradient norm."""

  def step(self):
    state = State(self._state.w * 2.0, self._state.steps + 1)
    bad = self.step_count == 2
    self._commit(state, {"gradient_norm": jnp.float32(np.inf if bad else 1.0),
                         "loss": jnp.float32(np.nan if bad else 0.5)})


def test_a_non_finite_step_is_not_taken_and_names_step_and_metrics():
  from actorq import core
  counter, logger = counting.Counter(), Recording()
  learner = Diverging(counter, logger)
  learner.step()
  learner.step()
  before = learner.save()
  try:
    learner.step()
    raise AssertionError("expected NonFiniteLossError")
  except core.NonFiniteLossError as e:
    assert str(e) == ("learner step 3 is not finite (loss=nan, gradient_norm=inf); the learner "
                      "keeps its state from before that step")
    assert isinstance(e, core.RunFailure) and isinstance(e, ValueError)
  assert learner.step_count == 2 and counter.get_counts()["steps"] == 2 and len(logger.rows) == 2
  np.testing.assert_array_equal(learner.save().w, before.w)


def test_packed_metrics_are_the_plain_jit_values_read_in_one_vector():
  def step(x):
    return x * 2.0, {"loss": jnp.sum(x) / 3.0, "count": jnp.int32(7), "min": jnp.min(x)}

  x = jnp.asarray(np.random.default_rng(0).normal(size=5), jnp.float32)
  plain_out, plain = jax.jit(step)(x)
  out, packed = learners.jit_with_packed_metrics(step)(x)
  np.testing.assert_array_equal(out, plain_out)
  assert isinstance(packed, learners.PackedMetrics)
  assert list(packed) == ["loss", "count", "min"] and len(packed) == 3
  assert packed.host() == {"loss": float(plain["loss"]), "count": 7.0,
                           "min": float(plain["min"])}
  assert float(packed["loss"]) == float(plain["loss"])
