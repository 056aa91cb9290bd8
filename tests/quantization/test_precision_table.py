"""Precisions are a table (`runtimes.RUNTIMES`: precision -> runtime class, payload
encoder): the built-in rows, the errors for an unknown one, and a precision registered
from outside the package (one runtime class plus one table entry) that an actor acts with
through the variable client, its payload made once per version on the learner side."""
import dataclasses
import time

import numpy as np
import pytest

from actorq import core
from actorq.agents.dqn import builder as dqn_builder
from actorq.agents.dqn import config as dqn_config
from actorq.components.acting import actors
from actorq.components.acting import variable_client as vc
from actorq.components.envs import environments
from actorq.launch import experiment
from actorq.launch import local
from actorq.quantization import forward
from actorq.quantization import mixed
from actorq.quantization import network_spec as ns
from actorq.quantization import payload as pl
from actorq.quantization import runtimes
from actorq.quantization.runtimes.jax_runtime import JaxRuntime, SimulatedInt8Runtime
from actorq.quantization.runtimes.litert_runtime import (
    LiteRTFloatRuntime, LiteRTInt8Runtime, LiteRTMixedRuntime)
from actorq.testing import fakes

SPEC = ns.mlp(4, [8], 2)


@pytest.fixture
def table():
  """The table as it was before the test (a test's registrations do not leak)."""
  saved = dict(runtimes.RUNTIMES)
  yield runtimes.RUNTIMES
  runtimes.RUNTIMES.clear()
  runtimes.RUNTIMES.update(saved)


# --- The worked example of docs/guides/add-a-precision.md ---------------------------------
class NumpyRuntime(runtimes.PolicyRuntime):
  """fp32 in numpy: the precision ``numpy-fp32``, whose payload is the fp32 arrays under
  that name. It computes the one forward pass (`forward.apply`) on numpy arrays."""
  precision = "numpy-fp32"
  payload_precision = "numpy-fp32"
  accepted_payloads = ("numpy-fp32",)

  def __init__(self, spec, num_threads=1):
    super().__init__(spec, num_threads)
    self._layers = None

  def _load(self, payload):
    pl.check_payload(payload, self.spec, self.accepted_payloads)
    self._layers = payload.layers

  def __call__(self, observation):
    x = forward.scaled_input(self.spec, np.asarray(self._check_observation(observation)))
    self.timings["calls"] += 1
    y = forward.apply(self.spec.layers, x, forward.params_layer(self._layers, np.float32))
    return y.astype(np.float32)


def encode_numpy_fp32(params, spec, precision, version, per_channel=True):
  """The fp32 payload, labelled `precision` (what `NumpyRuntime` pulls)."""
  return dataclasses.replace(pl.make_payload(params, spec, "fp32", version),
                             precision=precision)


NUMPY_FP32 = runtimes.PrecisionEntry(NumpyRuntime, encode_numpy_fp32)
# ------------------------------------------------------------------------------------------


def test_the_table_holds_the_built_in_precisions():
  assert runtimes.precisions() == core.PRECISIONS == runtimes.RUNTIME_PRECISIONS
  assert {p: e.runtime for p, e in runtimes.RUNTIMES.items()} == {
      "fp32": JaxRuntime, "fp16": JaxRuntime, "bf16": JaxRuntime, "int8": LiteRTInt8Runtime,
      "litert-fp32": LiteRTFloatRuntime, "simulated-int8": SimulatedInt8Runtime,
      "mixed:": LiteRTMixedRuntime}
  # The per-layer policies are one family row, found by their names' prefix.
  assert [p for p, e in runtimes.RUNTIMES.items() if e.family] == [mixed.MIXED_PREFIX]
  name = "mixed:int8,fp32"
  assert runtimes.family_of(name) == "mixed:" and runtimes.family_of("mixed:") is None
  assert runtimes.entry_for(name) is runtimes.RUNTIMES["mixed:"]
  runtime = runtimes.make_runtime(name, SPEC)
  assert type(runtime) is LiteRTMixedRuntime and runtime.payload_precision == name
  assert runtime.float_layers == frozenset({"dense_1"})
  params = {n: {k: np.ones(shape, np.float32) for k, shape in shapes.items()}
            for n, shapes in pl.expected_shapes(SPEC).items()}
  assert runtimes.make_payload(params, SPEC, name).precision == "mixed"
  with pytest.raises(ValueError, match="precision 'mixed:' unknown"):
    runtimes.entry_for("mixed:")
  # Actors act with every row but the accuracy-study one.
  assert runtimes.ACTING_PRECISIONS == core.ACTOR_PRECISIONS
  assert "simulated-int8" not in runtimes.ACTING_PRECISIONS
  for precision in core.PRECISIONS:
    runtime = runtimes.make_runtime(precision, SPEC)
    assert type(runtime) is runtimes.RUNTIMES[precision].runtime
    assert runtime.precision == precision == runtime.payload_precision


def test_litert_fp32_is_the_int8_path_with_float_kernels():
  """The placebo of int8: fp32 weights through the int8 runtime's path (patched
  flatbuffer, a new interpreter per version) on LiteRT's float kernels, so it computes
  what the fp32 (JAX) runtime computes up to float summation order."""
  rng = np.random.default_rng(0)
  spec = ns.mlp(4, [64, 64], 3)
  params = {n: {k: rng.normal(0, 0.5, s).astype(np.float32) for k, s in shp.items()}
            for n, shp in pl.expected_shapes(spec).items()}
  placebo = runtimes.make_runtime("litert-fp32", spec)
  assert isinstance(placebo, LiteRTInt8Runtime)  # the int8 runtime's load path
  assert placebo.float_layers == frozenset(pl.expected_shapes(spec))
  payload = vc.make_payload(params, spec, "litert-fp32", 7)
  assert payload.precision == "litert-fp32" and payload.version == 7
  assert payload.nbytes == vc.make_payload(params, spec, "fp32", 7).nbytes
  placebo.load(payload)
  fp32 = runtimes.make_runtime("fp32", spec)
  fp32.load(vc.make_payload(params, spec, "fp32", 7))
  int8 = runtimes.make_runtime("int8", spec)
  int8.load(vc.make_payload(params, spec, "int8", 7))
  obs = rng.normal(size=(256, 4)).astype(np.float32)
  q, q_fp32, q_int8 = placebo(obs), fp32(obs), int8(obs)
  placebo_error = np.abs(q - q_fp32).max()
  assert placebo.version == 7 and placebo_error < 1e-4 * np.abs(q_fp32).max()
  # int8's perturbation is orders of magnitude larger than the placebo's.
  assert np.abs(q_int8 - q_fp32).max() > 100 * placebo_error
  with pytest.raises(ValueError, match="cannot be loaded here"):
    placebo.load(vc.make_payload(params, spec, "int8", 8))
  # Published as int8 is: a PolicyServer converts each version once for its pulls.
  server = vc.PolicyServer(fakes.CountingLearner(spec), spec)
  client = vc.VariableClient(server, runtimes.make_runtime("litert-fp32", spec), 1)
  client.update_and_wait()
  assert server.served()["litert-fp32"]["conversions"] == 1
  assert client.payload.precision == "litert-fp32"


def test_an_unknown_precision_keeps_its_errors():
  with pytest.raises(ValueError) as e:
    runtimes.make_runtime("int3", SPEC)
  assert str(e.value) == ("precision 'int3' unknown; allowed: ('fp32', 'fp16', 'bf16', "
                          "'int8', 'litert-fp32', 'simulated-int8')")
  with pytest.raises(ValueError) as e:
    vc.PolicyPublisher(fakes.CountingLearner(SPEC), SPEC, "int3")
  assert str(e.value).startswith("precision must be one of fp32, fp16, bf16, int8, "
                                 "litert-fp32, simulated-int8 or ")
  assert str(e.value).endswith("; got 'int3'")


def test_register_precision_refuses_a_taken_or_malformed_name(table):
  with pytest.raises(ValueError, match="precision 'int8' is already registered"):
    runtimes.register_precision("int8", NUMPY_FP32)
  for bad in ("", "a b", "a,b", "mixed:fp32", None):
    with pytest.raises(ValueError, match="a precision name must be one word"):
      runtimes.register_precision(bad, NUMPY_FP32)
  with pytest.raises(ValueError, match="must be a PrecisionEntry of a PolicyRuntime subclass"):
    runtimes.register_precision("numpy-fp32", runtimes.PrecisionEntry(object, encode_numpy_fp32))
  assert runtimes.precisions() == core.PRECISIONS


def test_an_agent_config_refuses_an_unregistered_precision_in_one_line():
  with pytest.raises(ValueError) as e:
    dqn_config.DQNConfig(actor_precision="numpy-fp32")
  assert str(e.value) == ("DQNConfig.actor_precision must be one of fp32, fp16, bf16, int8, "
                          f"litert-fp32 or {mixed.MIXED_FORM}; got 'numpy-fp32'")


def test_a_registered_precision_computes_what_fp32_computes(table):
  runtimes.register_precision("numpy-fp32", NUMPY_FP32)  # the one table entry
  rng = np.random.default_rng(0)
  params = {n: {k: rng.normal(0, 0.5, s).astype(np.float32) for k, s in shp.items()}
            for n, shp in pl.expected_shapes(SPEC).items()}
  payload = vc.make_payload(params, SPEC, "numpy-fp32", 3)
  assert (payload.precision, payload.version) == ("numpy-fp32", 3)
  assert payload.nbytes == vc.make_payload(params, SPEC, "fp32", 3).nbytes
  mine, fp32 = vc.make_runtime("numpy-fp32", SPEC), vc.make_runtime("fp32", SPEC)
  assert type(mine) is NumpyRuntime
  mine.load(payload)
  fp32.load(vc.make_payload(params, SPEC, "fp32", 3))
  obs = rng.normal(size=(16, 4)).astype(np.float32)
  np.testing.assert_allclose(mine(obs), fp32(obs), rtol=1e-5, atol=1e-6)
  # Payloads of another precision are refused, naming what it takes.
  with pytest.raises(ValueError, match=r"payload precision 'fp32' cannot be loaded here; "
                                       r"allowed: \('numpy-fp32',\)"):
    mine.load(vc.make_payload(params, SPEC, "fp32", 4))


def test_an_actor_acts_with_a_registered_precision_through_the_variable_client(table):
  runtimes.register_precision("numpy-fp32", NUMPY_FP32)
  learner = fakes.CountingLearner(SPEC)  # every parameter equals its step count
  server = vc.PolicyServer(learner, SPEC)
  runtime = vc.make_runtime("numpy-fp32", SPEC)
  client = vc.VariableClient(server, runtime, update_period=1)
  client.update_and_wait()
  actor = actors.FeedForwardActor(runtime, actors.greedy, client)
  env = environments.make_environment("gym:CartPole-v1", seed=0)
  ts = env.reset()
  actions = []
  for _ in range(10):
    learner.step()
    action = actor.select_action(ts.observation)
    actions.append(int(action))
    ts = env.step(action)
    if ts.last():
      ts = env.reset()
    actor.update()
    time.sleep(0.02)
  actor.update()
  assert actor.policy_version >= 9 and runtime.version == actor.policy_version
  # The learner side encoded ``policy/numpy-fp32`` with the registered encoder, once per
  # version pulled, and the actor holds that version's values.
  publisher = server.publisher("numpy-fp32")
  assert publisher.stats["conversions"] <= learner.step_count + 1
  held = client.payload
  assert held.precision == "numpy-fp32"
  for arrays in held.layers.values():
    np.testing.assert_array_equal(arrays["w"], float(held.version))
  # All parameters equal and positive: both outputs are equal, argmax picks action 0.
  assert actions == [0] * 10


@pytest.mark.slow
def test_dqn_trains_with_a_registered_precision(table, monkeypatch):
  """The config takes it once registered (a live view of the table), and a single-process
  run's actor and evaluator execute the registered runtime."""
  runtimes.register_precision("numpy-fp32", NUMPY_FP32)
  cfg = dqn_config.DQNConfig(min_replay_size=32, batch_size=16, hidden_sizes=(16,),
                             epsilon_decay_steps=100, actor_precision="numpy-fp32")
  calls, load = [], NumpyRuntime._load
  monkeypatch.setattr(NumpyRuntime, "_load",
                      lambda self, payload: (calls.append(payload.version), load(self, payload)))
  result = local.run(experiment.ExperimentConfig(
      builder=dqn_builder.DQNBuilder(cfg), env_id="gym:CartPole-v1", num_steps=200, seed=0,
      eval_every=200, eval_episodes=1, checkpoint_every=None))
  assert result.actor_steps == 200 and result.learner_steps > 0
  assert len(result.evaluations) == 1 and result.evaluations[0]["episode_return"] >= 8
  # The actor pulled new versions of policy/numpy-fp32 as the learner stepped.
  assert max(calls) > 0 and len(set(calls)) > 1


# --- A family of precisions is one class plus one table entry ----------------------------
class ScaledRuntime(NumpyRuntime):
  """The toy family ``scaled:<k>``: fp32 outputs times the integer k (a name's parameter,
  read by the class alone; the table asks it the family's questions). It pulls the payload
  named by the precision itself, the fp32 arrays."""

  @classmethod
  def for_precision(cls, precision, spec, num_threads=1):
    runtime = cls(spec, num_threads)
    runtime.factor = int(precision[len("scaled:"):])
    runtime.precision = runtime.payload_precision = precision
    runtime.accepted_payloads = (precision,)
    return runtime

  @classmethod
  def check_name(cls, precision):
    if not precision[len("scaled:"):].isdigit():
      raise ValueError(f"precision {precision!r}: k must be a whole number")

  @classmethod
  def check_fits(cls, precision, spec):
    if int(precision[len("scaled:"):]) > len(spec.parameter_layers):
      raise ValueError(f"precision {precision!r}: k exceeds the layer count")

  def __call__(self, observation):
    return super().__call__(observation) * self.factor


SCALED = runtimes.PrecisionEntry(ScaledRuntime, encode_numpy_fp32, family=True,
                                 form="scaled:<k>", help="scaled:<k> (a whole number)")


def test_a_family_is_one_class_plus_one_table_entry(table):
  runtimes.register_precision("scaled:", SCALED)  # the one table entry
  name = "scaled:2"
  assert runtimes.family_of(name) == "scaled:" and runtimes.entry_for(name) is SCALED
  # Every question is asked of the table, which asks the row's class.
  assert runtimes.check_precision(name) == name
  with pytest.raises(ValueError) as e:
    runtimes.check_precision("fp64")
  assert str(e.value) == ("actor_precision must be one of fp32, fp16, bf16, int8, litert-fp32 "
                          f"or {mixed.MIXED_FORM} or scaled:<k>; got 'fp64'")
  assert runtimes.parse_precision(name, "--actor-precision") == (name, None)
  with pytest.raises(ValueError, match=r"^--actor-precision: precision 'scaled:x': k must"):
    runtimes.parse_precision("scaled:x", "--actor-precision")
  assert runtimes.precision_help().endswith("feed-forward agents only), scaled:<k> (a whole number)")
  runtimes.check_fits(name, SPEC)
  with pytest.raises(ValueError, match=r"^--precision scaled:3: precision 'scaled:3': k exceeds"):
    runtimes.check_fits("scaled:3", SPEC, what="--precision")
  slug = runtimes.precision_slug(name)
  assert slug.startswith("scaled-") and len(slug) == len("scaled-") + 8
  assert runtimes.precision_slug("int8") == "int8"
  # An agent config takes the family's names (its parameter checked by the row).
  assert dqn_config.DQNConfig(actor_precision=name).actor_precision == name
  with pytest.raises(ValueError, match="k must be a whole number"):
    dqn_config.DQNConfig(actor_precision="scaled:x")
  # Its runtime and payload come from the row.
  params = {n: {k: np.ones(shape, np.float32) for k, shape in shapes.items()}
            for n, shapes in pl.expected_shapes(SPEC).items()}
  runtime = runtimes.make_runtime(name, SPEC)
  runtime.load(runtimes.make_payload(params, SPEC, runtime.payload_precision))
  fp32 = runtimes.make_runtime("fp32", SPEC)
  fp32.load(runtimes.make_payload(params, SPEC, "fp32"))
  obs = np.ones((1, 4), np.float32)
  np.testing.assert_allclose(runtime(obs), 2 * fp32(obs), rtol=1e-5)


def test_a_uniform_row_answers_the_family_questions_with_the_defaults():
  # litert-fp32 shares the mixed: row's LiteRT machinery, not its reading of a name.
  for precision in core.PRECISIONS:
    row = runtimes.entry_for(precision).runtime
    row.check_name(precision)
    row.check_fits(precision, SPEC)
    assert row.part_precision(precision, SPEC, ["dense_0"]) == precision
  mixed_row = runtimes.entry_for("mixed:int8,fp32").runtime
  assert mixed_row.part_precision("mixed:int8,fp32", SPEC, ["dense_1"]) == "mixed:fp32"
  with pytest.raises(ValueError, match="2 parameter layers"):
    runtimes.check_fits("mixed:int8,int8,int8", SPEC)
  with pytest.raises(ValueError, match="int9"):
    runtimes.check_name("mixed:int9,int8")


def test_parse_precisions_splits_a_list_of_table_rows():
  """`runtimes.parse_precisions` (what `actorq sweep --precisions` takes): ',' between
  uniform precisions, ';' once a mixed: name (which has commas of its own) is among them."""
  assert runtimes.parse_precisions("fp32, int8") == ("fp32", "int8")
  assert runtimes.parse_precisions("fp32;mixed:fp16,int8;") == ("fp32", "mixed:fp16,int8")
  for text, fragment in (("fp32,mixed:fp16,int8", "separate the precisions with ';'"),
                         ("int8,int8", "repeats a precision"), (" ; ", "no precisions"),
                         ("fp32,int4", "mixed:int4,int4")):
    with pytest.raises(ValueError, match="--precisions") as e:
      runtimes.parse_precisions(text, "--precisions")
    assert fragment in str(e.value), (text, str(e.value))
