"""The compiled actors' int8 emulation (`quantization.emulation`) against the real int8
runtime (LiteRT/XNNPACK): the same payload on 10,000 states gives identical greedy
actions and, for ReLU networks, bit-identical outputs (tanh: within one output
quantization step on >= 99.9% of states); the in-graph payload is the numpy payload bit
for bit; the in-graph bias correction is `bias_correction`'s."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from actorq.components import networks as networks_lib
from actorq.quantization import bias_correction
from actorq.quantization import emulation
from actorq.quantization import network_spec as ns
from actorq.quantization import payload as pl
from actorq.quantization import runtimes

STATES = 10_000
# DQN's CartPole Q-network (dueling: A + 1 outputs), PPO's policy, MinAtar's CNN.
DQN = ns.mlp(4, (256, 256), 3)
PPO = ns.mlp(4, (64, 64), 2, activation="tanh")
MINATAR = ns.minatar_cnn((10, 10, 4), 4)


def _params(spec, seed):
  params = networks_lib.haiku_network(spec).init(jax.random.PRNGKey(seed),
                                                 jnp.zeros((1,) + spec.input_shape))
  # Non-zero biases, as trained networks have.
  return jax.tree_util.tree_map(np.asarray, {
      n: {"w": l["w"], "b": l["b"] + 0.1 * jax.random.normal(jax.random.PRNGKey(seed + 1),
                                                               l["b"].shape)}
      for n, l in params.items()})


def _states(spec, n, seed):
  rng = np.random.default_rng(seed)
  if len(spec.input_shape) == 3:  # MinAtar: 0/1 planes
    return (rng.random((n,) + spec.input_shape) < 0.1).astype(np.float32)
  return (rng.standard_normal((n,) + spec.input_shape) * [1.0, 1.0, 0.1, 1.0]).astype(np.float32)


@pytest.mark.parametrize("spec", [DQN, PPO, MINATAR], ids=["dqn_mlp", "ppo_tanh", "minatar_cnn"])
def test_emulation_matches_litert_on_10000_states(spec):
  params = _params(spec, 0)
  obs = _states(spec, STATES, 1)
  payload = pl.make_payload(params, spec, "int8", 0)
  # The bias-corrected payload the actors run (calibrated on 64 states).
  payload = bias_correction.correct_payload(payload, params, spec, obs[:64])
  rt = runtimes.make_runtime("int8", spec, num_threads=1)
  rt.load(payload)
  want = np.concatenate([rt(obs[i:i + 1000]) for i in range(0, STATES, 1000)])
  layers = {n: {k: jnp.asarray(v) for k, v in l.items()} for n, l in payload.layers.items()}
  got = np.asarray(jax.jit(lambda o: emulation.forward(layers, spec, o))(obs))
  step = np.asarray(emulation.output_step(layers, spec, obs))
  assert got.shape == want.shape == (STATES, spec.output_size)
  np.testing.assert_array_equal(got.argmax(-1), want.argmax(-1))
  within = np.all(np.abs(got - want) <= step, axis=-1)
  if all(l.activation in ("relu", "none") for l in spec.parameter_layers):
    # ReLU networks: XNNPACK's quantization and order of float operations, bit for bit.
    np.testing.assert_array_equal(got, want)
  else:
    # tanh: XLA's and XNNPACK's tanh differ in the last bit now and then, which can move
    # one hidden activation across a rounding boundary (6 of 10,000 rows here).
    assert within.mean() >= 0.999, within.mean()
    assert np.max(np.abs(got - want)) <= 0.01 * np.ptp(want)
  # Not trivially equal to the float network: the int8 arithmetic is really emulated.
  fp32 = np.asarray(jax.jit(lambda o: __import__(
      "actorq.quantization.forward", fromlist=["forward"]).forward(params, spec, o))(obs))
  assert np.mean(np.abs(fp32 - want)) > 10 * np.mean(np.abs(got - want))


@pytest.mark.parametrize("spec", [DQN, MINATAR], ids=["dqn_mlp", "minatar_cnn"])
def test_in_graph_payload_and_bias_correction_are_the_numpy_ones(spec):
  params = _params(spec, 3)
  obs = _states(spec, 64, 4)
  payload = pl.make_payload(params, spec, "int8", 0)
  layers = jax.jit(lambda p: emulation.quantize_params(p, spec))(params)
  for name, l in payload.layers.items():
    np.testing.assert_array_equal(np.asarray(layers[name]["w"]), l["w"])
    np.testing.assert_array_equal(np.asarray(layers[name]["scale"]), l["scale"])
    np.testing.assert_array_equal(np.asarray(layers[name]["b"]), l["b"])
  want = bias_correction.correct_payload(payload, params, spec, obs)
  got = jax.jit(lambda p, o: emulation.correct_biases(p, emulation.quantize_params(p, spec),
                                                      spec, o))(params, obs)
  for name, l in want.layers.items():
    np.testing.assert_allclose(np.asarray(got[name]["b"]), l["b"], rtol=0, atol=1e-5)
    assert not np.array_equal(l["b"], payload.layers[name]["b"])  # a correction was made
