"""Case Q5 (actors see fresh parameters) and the publisher's convert-once contract."""
import time

import numpy as np
import pytest

from actorq.components.acting import actors, variable_client as vc
from actorq.quantization import network_spec as ns
from actorq.quantization import payload as payload_lib
from actorq.testing import fakes

SPEC = ns.mlp(4, [8], 2)


@pytest.mark.parametrize("asynchronous", [True, False])
@pytest.mark.parametrize("precision", ["fp32", "int8"])
def test_actor_acts_with_fresh_parameters(precision, asynchronous):
  learner = fakes.CountingLearner(SPEC)
  server = vc.PolicyServer(learner, SPEC)
  runtime = vc.make_runtime(precision, SPEC)
  client = vc.VariableClient(server, runtime, update_period=1, asynchronous=asynchronous)
  client.update_and_wait()
  actor = actors.FeedForwardActor(runtime, actors.greedy, client)
  obs = np.ones(4, np.float32)
  for _ in range(10):
    learner.step()
    actor.select_action(obs)
    actor.update()
    time.sleep(0.02)  # stands for the environment step; acting itself never waits
  actor.update()
  assert actor.policy_version >= 9
  # The copy the actor executes is within one quantization step of that version's values.
  held = client.payload
  assert held.version == actor.policy_version == runtime.version
  expected = float(held.version)  # every parameter equals the step count
  one_step = expected / 127.0 if precision == "int8" else 0.0
  for layer, arrays in payload_lib.dequantize_payload(held).items():
    np.testing.assert_allclose(arrays["w"], expected, atol=one_step + 1e-6, err_msg=layer)
    np.testing.assert_allclose(arrays["b"], expected, atol=1e-6, err_msg=layer)


def test_publisher_converts_each_version_once():
  learner = fakes.CountingLearner(SPEC)
  publisher = vc.PolicyPublisher(learner, SPEC, "int8")
  for _ in range(5):  # five actors pulling the same version
    publisher.payload()
  assert publisher.stats["conversions"] == 1
  learner.step()
  publisher.payload()
  assert publisher.stats["conversions"] == 2
  fp32 = vc.PolicyPublisher(learner, SPEC, "fp32").payload()
  assert publisher.stats["payload_bytes"] <= 0.27 * fp32.nbytes + 2 * 4 * 10  # + per-channel scales


def test_update_period_counts_actor_steps():
  learner = fakes.CountingLearner(SPEC)
  runtime = vc.make_runtime("fp32", SPEC)
  client = vc.VariableClient(vc.PolicyServer(learner, SPEC), runtime, update_period=5,
                             asynchronous=True)
  client.update_and_wait()
  learner.step()
  for _ in range(4):
    client.update()
  time.sleep(0.1)
  client.update()  # 5th step: submits a fetch
  time.sleep(0.1)
  client.update()  # applies it
  assert client.version == 1 and client.stats["pulls"] == 2
  with pytest.raises(ValueError, match="update_period"):
    vc.VariableClient(None, runtime, update_period=0)


def test_an_in_process_source_is_pulled_synchronously_at_the_due_step():
  """A PolicyServer of the same process: the pull happens at exactly every 3rd step."""
  learner = fakes.CountingLearner(SPEC)
  runtime = vc.make_runtime("fp32", SPEC)
  client = vc.VariableClient(vc.PolicyServer(learner, SPEC), runtime, update_period=3)
  assert not client.asynchronous
  client.update_and_wait()
  versions = []
  for _ in range(9):
    learner.step()
    client.update()
    versions.append(client.version)
  assert versions == [0, 0, 3, 3, 3, 6, 6, 6, 9]
  assert vc.VariableClient(object(), runtime).asynchronous  # a remote source: background


class _RemoteLike:
  """Answers every attribute with a remote-call function, as a Courier client does."""

  def __getattr__(self, name):
    return lambda *args, **kwargs: None


def test_a_source_answering_every_attribute_is_remote():
  """A Courier client's `in_process` is a (truthy) remote-call function, not True: the
  distributed actors' pulls must still run in the background."""
  runtime = vc.make_runtime("fp32", SPEC)
  assert vc.VariableClient(_RemoteLike(), runtime).asynchronous


def test_publisher_counts_pulls_and_bytes_sent():
  learner = fakes.CountingLearner(SPEC)
  server = vc.PolicyServer(learner, SPEC)
  for _ in range(3):
    server.get_variables([vc.policy_name("int8")])
  learner.step()
  server.get_variables([vc.policy_name("int8")])
  served = server.served()["int8"]
  assert served["pulls"] == 4 and served["conversions"] == 2
  assert served["bytes_sent"] == 4 * served["payload_bytes"] > 0


def test_policy_server_serves_each_precision_from_one_source():
  learner = fakes.CountingLearner(SPEC)
  server = vc.PolicyServer(learner, SPEC)
  int8, fp32 = server.get_variables([vc.policy_name("int8"), vc.policy_name("fp32")])
  assert (int8.precision, fp32.precision) == ("int8", "fp32")
  assert server.get_variables(["version"]) == [0]  # other names: the learner's own
  server.get_variables([vc.policy_name("int8")])
  assert server.stats["conversions"] == 2  # one per precision, not per pull
  with pytest.raises(ValueError, match="precision must be one of"):
    server.get_variables([vc.policy_name("int4")])


class _CountingSource:
  """Payload fetches (`calls`) and version checks (`checks`) counted apart."""

  def __init__(self):
    self.calls, self.checks, self.version = 0, 0, 0

  def get_variables(self, names):
    if list(names) == [vc.VERSION]:
      self.checks += 1
      return [self.version]
    assert list(names) == [vc.policy_name("fp32")]  # what the runtime executes
    self.calls += 1
    return [_Payload(self.version)]


class _Payload:
  nbytes = 4

  def __init__(self, version):
    self.version = version


class _Runtime:
  version = -1
  payload_precision = "fp32"

  def load(self, payload):
    self.version = int(payload.version)


def test_synchronous_variable_client_loads_the_new_version_when_due():
  source, runtime = _CountingSource(), _Runtime()
  client = vc.SynchronousVariableClient(source, runtime, update_period=3)
  try:
    client.update_and_wait()
    assert (source.calls, runtime.version) == (1, 0)
    source.version = 7
    client.update(), client.update()
    assert (source.calls, runtime.version) == (1, 0)  # not due yet
    client.update()  # third step: pulled and loaded before returning
    assert (source.calls, runtime.version) == (2, 7)
    source.version = 8
    client.update(wait=True)
    assert (source.calls, runtime.version) == (3, 8)
  finally:
    client.close()


def test_on_policy_pulls_fetch_the_payload_only_for_a_new_version():
  """The synchronous (on-policy) client asks for the version first once it holds a
  payload: an unchanged version costs a version check, not the payload (issue 40)."""
  source, runtime = _CountingSource(), _Runtime()
  client = vc.SynchronousVariableClient(source, runtime, update_period=1)
  client.update_and_wait()  # nothing loaded yet: the payload, without a check
  assert (source.calls, source.checks, runtime.version) == (1, 0, 0)
  for _ in range(3):  # the learner has not stepped
    client.update()
  assert (source.calls, source.checks, runtime.version) == (1, 3, 0)
  source.version = 1
  client.update()
  assert (source.calls, source.checks, runtime.version) == (2, 4, 1)
  assert client.stats["pulls"] == 5 and client.stats["unchanged"] == 3
  assert client.stats["bytes"] == 2 * _Payload.nbytes


def test_the_default_client_fetches_the_payload_on_every_pull():
  source, runtime = _CountingSource(), _Runtime()
  client = vc.VariableClient(source, runtime, update_period=1, asynchronous=False)
  client.update_and_wait()
  client.update(), client.update()
  assert (source.calls, source.checks) == (3, 0)


def test_a_mixed_precision_actor_pulls_its_policy_by_name():
  """An actor whose runtime is a per-layer policy ("mixed:<choice>,...") pulls
  policy/<that name>; the server's publisher converts each version once with that policy
  (fp16 layer: float32 weights of the rounded values; int4 layer: int8 values with
  scales) and the bytes pulled are those payloads'."""
  from actorq.quantization import mixed  # pylint: disable=g-import-not-at-top
  name = "mixed:fp16,int4"
  learner = fakes.CountingLearner(SPEC)
  server = vc.PolicyServer(learner, SPEC)
  runtime = vc.make_runtime(name, SPEC)
  client = vc.VariableClient(server, runtime, update_period=1, asynchronous=False)
  learner.steps = 3
  client.update_and_wait()
  payload = client.payload
  assert (payload.precision, payload.version) == ("mixed", 3)
  first = payload.layers["dense_0"]
  assert first["w"].dtype == np.float32 and "scale" not in first
  # Every weight of the fake learner is 3.0: int4 symmetric -> q = 7, scale = 3/7 per channel.
  np.testing.assert_array_equal(payload.layers["dense_1"]["w"], np.full((8, 2), 7, np.int8))
  np.testing.assert_allclose(payload.layers["dense_1"]["scale"], np.full(2, 3.0 / 7), rtol=1e-6)
  # 4x8 + 8 float32 (fp16 layer, 160 B) + 8x2 int8, 2 scales, 2 biases (32 B).
  assert payload.nbytes == 160 + 16 + 8 + 8
  served = server.served()[name]
  assert (served["conversions"], served["pulls"], served["bytes_sent"]) == (1, 1, 192)
  client.update_and_wait()  # the same version: no new conversion
  assert server.served()[name]["conversions"] == 1
  obs = np.ones((1, 4), np.float32)
  # relu(4 * 3 + 3) = 15 per hidden unit; 8 * 15 * 3 + 3 = 363 per output.
  np.testing.assert_allclose(runtime(obs), np.full((1, 2), 363.0), rtol=1e-2)
  with pytest.raises(ValueError, match="gives 3 layer choice"):
    vc.PolicyServer(learner, SPEC).publisher("mixed:fp16,int8,int8")
  assert mixed.precision_name(mixed.policy_of(name, SPEC)) == name


# (steps per call, the version held at the end): a call that reaches a multiple of 3
# pulls the learner's version at that call (it stepped once per actor step before it).
@pytest.mark.parametrize("counts,final", [([1] * 10, 9), ([4, 4, 2], 10), ([7, 3], 10),
                                          ([10], 10), ([2, 1, 5, 2], 10), ([2, 5], 7)])
def test_update_of_several_steps_counts_as_that_many_updates(counts, final):
  """`update(steps=k)` (a vectorized actor's k rows) leaves what k `update()` calls in a
  row leave: the same step count and, in process, the same version loaded (a pull that
  falls due among them is made in that call)."""
  learner = fakes.CountingLearner(SPEC)
  server = vc.PolicyServer(learner, SPEC)
  batched = vc.VariableClient(server, vc.make_runtime("fp32", SPEC), update_period=3)
  single = vc.VariableClient(server, vc.make_runtime("fp32", SPEC), update_period=3)
  batched.update_and_wait()
  single.update_and_wait()
  for k in counts:
    for _ in range(k):
      learner.step()
    batched.update(steps=k)
    for _ in range(k):
      single.update()
    assert batched.version == single.version
    assert batched._calls == single._calls  # pylint: disable=protected-access
  assert batched.version == single.version == final


def test_update_of_several_steps_in_the_background_submits_once_and_counts_the_rest():
  learner = fakes.CountingLearner(SPEC)
  client = vc.VariableClient(vc.PolicyServer(learner, SPEC), vc.make_runtime("fp32", SPEC),
                             update_period=5, asynchronous=True)
  client.update_and_wait()
  learner.step()
  client.update(steps=3)  # 3 of 5: nothing due
  assert client._calls == 3 and client._future is None  # pylint: disable=protected-access
  client.update(steps=4)  # the 2nd of these 4 falls due: submitted, 2 counted after it
  assert client._calls == 2 and client._future is not None  # pylint: disable=protected-access
  time.sleep(0.1)
  client.update()  # applies it
  assert client.version == 1 and client._calls == 3  # pylint: disable=protected-access
