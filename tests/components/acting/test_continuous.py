"""Bounded continuous action selection (handed case E4)."""
import numpy as np
import pytest
from dm_env import specs

from actorq.components.acting import continuous
from actorq.components.acting import variable_client as vc
from actorq.quantization import network_spec as ns
from actorq.quantization import payload

SPECS = [specs.BoundedArray((1,), np.float32, -2.0, 2.0),
         specs.BoundedArray((1,), np.float32, 0.0, 10.0)]


def _saturated_policy(bias: float, precision: str):
  """A tanh policy whose pre-squash output is `bias` (zero weights), via a runtime."""
  spec = ns.mlp(3, (), 1, output_activation="tanh")
  params = {"dense_0": {"w": np.zeros((3, 1), np.float32), "b": np.full((1,), bias, np.float32)}}
  runtime = vc.make_runtime(precision, spec)
  runtime.load(payload.make_payload(params, spec, precision, version=1))
  return runtime(np.ones((1, 3), np.float32))[0]


@pytest.mark.parametrize("precision", ["fp32", "int8"])
@pytest.mark.parametrize("spec", SPECS, ids=["[-2,2]", "[0,10]"])
def test_e4_saturated_output_gives_exactly_the_bounds(spec, precision):
  rng = np.random.default_rng(0)
  for selector in (continuous.deterministic_bounded(spec),
                   continuous.gaussian_bounded(spec, sigma=0.0)):
    low, _ = selector(_saturated_policy(-50.0, precision), rng, 0)
    high, _ = selector(_saturated_policy(50.0, precision), rng, 0)
    assert low.dtype == np.float32 and low.shape == (1,)
    assert low[0] == spec.minimum and high[0] == spec.maximum  # not -1/+1
  # Interior: u = 0 is the middle of the box.
  mid, _ = continuous.deterministic_bounded(spec)(np.zeros(1, np.float32), rng, 0)
  assert mid[0] == pytest.approx((spec.minimum + spec.maximum) / 2)


@pytest.mark.parametrize("spec", SPECS, ids=["[-2,2]", "[0,10]"])
def test_e4_huge_noise_stays_inside_the_bounds(spec):
  select = continuous.gaussian_bounded(spec, sigma=100.0)
  rng = np.random.default_rng(1)
  u = np.random.default_rng(2).uniform(-1, 1, size=10_000).astype(np.float32)
  actions = np.array([select(u[i:i + 1], rng, i)[0][0] for i in range(10_000)])
  assert actions.dtype == np.float32
  assert np.all(actions >= spec.minimum) and np.all(actions <= spec.maximum)
  # The noise is real: both bounds are hit about half the time each, and a few
  # actions land strictly inside.
  assert 0.4 < np.mean(actions == spec.minimum) < 0.6
  assert 0.4 < np.mean(actions == spec.maximum) < 0.6
  assert np.sum((actions > spec.minimum) & (actions < spec.maximum)) > 0


def test_noise_std_is_in_units_of_half_the_range():
  spec = specs.BoundedArray((1,), np.float32, 0.0, 10.0)
  select = continuous.gaussian_bounded(spec, sigma=0.1)  # absolute std 0.5 around 5
  rng = np.random.default_rng(3)
  a = np.array([select(np.zeros(1, np.float32), rng, i)[0][0] for i in range(20_000)])
  assert np.mean(a) == pytest.approx(5.0, abs=0.02)
  assert np.std(a) == pytest.approx(0.5, rel=0.03)


def test_rescale_roundtrip_and_bad_input():
  lo, hi = np.float32([-2.0, 0.0]), np.float32([2.0, 10.0])
  u = np.float32([[-1.0, 1.0], [0.5, -0.5]])
  a = continuous.from_unit(u, lo, hi)
  np.testing.assert_allclose(a, [[-2.0, 10.0], [1.0, 2.5]])
  np.testing.assert_allclose(continuous.to_unit(a, lo, hi), u, atol=1e-6)
  with pytest.raises(ValueError, match="sigma"):
    continuous.gaussian_bounded(SPECS[0], sigma=-1.0)
  with pytest.raises(continuous.UnboundedActionSpecError, match="BoundedArray"):
    continuous.bounds(specs.DiscreteArray(3))
  with pytest.raises(continuous.UnboundedActionSpecError, match="finite"):
    continuous.bounds(specs.BoundedArray((1,), np.float32, -np.inf, 1.0))
  with pytest.raises(ValueError, match="action shape"):
    continuous.deterministic_bounded(SPECS[0])(np.zeros(2, np.float32), None, 0)


def test_uniform_warmup_draws_uniform_actions_then_hands_over_at_the_exact_step():
  spec = specs.BoundedArray((2,), np.float32, [-2.0, 0.0], [2.0, 10.0])
  calls = []

  def inner(outputs, rng, step):
    calls.append(step)
    return np.full(2, 7.0, np.float32), ("inner",)

  select = continuous.uniform_warmup(inner, spec, steps=3)
  rng, ref = np.random.default_rng(5), np.random.default_rng(5)
  outputs = np.full(2, 0.5, np.float32)
  for step in range(3):  # the outputs are ignored; the draws are the generator's uniforms
    action, extras = select(outputs, rng, step)
    want = ref.uniform([-2.0, 0.0], [2.0, 10.0]).astype(np.float32)
    assert action.dtype == np.float32 and extras == ()
    np.testing.assert_array_equal(action, want)
  assert calls == []
  assert select(outputs, rng, 3) == (pytest.approx(np.full(2, 7.0)), ("inner",))
  assert calls == [3]
  # Over many draws the warm-up covers each dimension's box uniformly.
  long = continuous.uniform_warmup(inner, spec, steps=20_000)
  a = np.stack([long(outputs, rng, i)[0] for i in range(20_000)])
  assert np.all(a >= spec.minimum) and np.all(a <= spec.maximum)
  np.testing.assert_allclose(a.mean(axis=0), [0.0, 5.0], atol=0.05)
  np.testing.assert_allclose(a.std(axis=0), [4 / np.sqrt(12), 10 / np.sqrt(12)], rtol=0.02)


def test_uniform_warmup_of_zero_steps_is_the_selector_and_bad_steps_are_refused():
  spec = SPECS[0]
  inner = continuous.deterministic_bounded(spec)
  assert continuous.uniform_warmup(inner, spec, 0) is inner
  for bad in (-1, 1.5, True, "10"):
    with pytest.raises(ValueError, match="uniform warm-up steps must be an int >= 0, got"):
      continuous.uniform_warmup(inner, spec, bad)
  with pytest.raises(continuous.UnboundedActionSpecError):
    continuous.uniform_warmup(inner, specs.Array((1,), np.float32), 5)
