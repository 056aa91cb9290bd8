"""Nothing silent on the actor path: a non-finite or overflowing value between the
learner's parameters and an action is an error naming where it is (issue 20.5)."""
import numpy as np
import pytest

from actorq.components.acting import actors
from actorq.components.acting import variable_client as vc
from actorq.quantization import network_spec as ns
from actorq.quantization import payload as payload_lib

SPEC = ns.mlp(2, [4], 2)


def _params(w0=1.0, w1=1.0):
  return {"dense_0": {"w": np.full((2, 4), w0, np.float32), "b": np.zeros(4, np.float32)},
          "dense_1": {"w": np.full((4, 2), w1, np.float32), "b": np.zeros(2, np.float32)}}


def test_weights_that_overflow_fp16_are_refused_naming_the_layer():
  with pytest.raises(ValueError, match=r"layer 'dense_1' 'w': 8 of 8 values overflow fp16 "
                                       r"\(largest \|value\| 7e\+04"):
    payload_lib.make_payload(_params(w1=7e4), SPEC, "fp16", 0)
  payload_lib.make_payload(_params(w1=7e4), SPEC, "bf16", 0)  # bf16 has fp32's range


@pytest.mark.parametrize("precision", ["fp32", "fp16", "int8"])
def test_non_finite_outputs_never_become_an_action(precision):
  """Weights fine for the precision, activations that overflow it: fp16 overflows in
  layer dense_1 at 1e3 * 1e3 * 4 * 2; fp32 and int8 only at 1e20 * 1e20."""
  big = 1e3 if precision == "fp16" else 1e20
  runtime = vc.make_runtime(precision, SPEC)
  runtime.load(payload_lib.make_payload(_params(big, big), SPEC, runtime.payload_precision, 7))
  actor = actors.FeedForwardActor(runtime, actors.greedy)
  with pytest.raises(actors.NonFiniteOutputError) as e:
    actor.select_action(np.ones(2, np.float32))
  message = str(e.value)
  assert f"not finite at {precision} (parameter version 7)" in message
  assert "layer 'dense_1' is the first whose output is not finite" in message
  assert actor.num_steps == 0  # no action was selected


def test_a_non_finite_observation_is_named():
  runtime = vc.make_runtime("fp32", SPEC)
  runtime.load(payload_lib.make_payload(_params(), SPEC, "fp32", 0))
  with pytest.raises(actors.NonFiniteOutputError, match="the observation itself is not finite"):
    actors.FeedForwardActor(runtime, actors.greedy).select_action(np.array([np.nan, 1.0]))
