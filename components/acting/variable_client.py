"""Moving policy parameters from the learner to actors.

Learner side, a `PolicyServer` wraps a learner (any `actorq.core.VariableSource` that
serves ``"policy"`` and ``"version"``) and is the actors' variable source: for the name
``"policy/<precision>"`` (`policy_name`) it returns the `Payload` actors execute at that
precision (fp32/fp16/bf16 arrays, or int8 weights + float32 scales, see
`actorq.quantization.payload`; for a per-layer policy's ``"mixed:<choice>,..."`` name,
the `actorq.quantization.mixed` payload of that policy), made by one `PolicyPublisher` per
precision, which converts each *parameter version* once however many actors pull it.
Other names go to the learner. In a distributed run the learner node serves the same
names over Courier.

Actor side, a `VariableClient` pulls ``policy/<runtime.payload_precision>`` every
`update_period` actor steps, asynchronously (a background thread fetches; acting never
waits), and loads what it received into its policy runtime: the runtime's precision
decides what is pulled. `update_and_wait()` fetches synchronously;
`SynchronousVariableClient` always does.

dm-acme 0.4.0's `acme.jax.variable_utils.VariableClient` does not import on jax 0.4.13
(`jax.xla.Device`), hence this implementation.
"""
from __future__ import annotations

import concurrent.futures
import threading
import time
from typing import Any, Dict, List, Optional, Sequence

from actorq import core
from actorq.quantization import bias_correction
from actorq.quantization import network_spec as ns
from actorq.quantization import payload as payload_lib
from actorq.quantization import runtimes

FP32 = core.FP32
_POLICY_PREFIX = "policy/"
VERSION = "version"


def policy_name(precision: str) -> str:
  """The variable name of the policy payload at `precision`: ``"policy/<precision>"``."""
  return _POLICY_PREFIX + precision


class PolicyPublisher:
  """Learner-side conversion of each policy version to one precision, done once and cached.

  Args:
    learner: serves `get_variables(["policy", "version"])` -> `[params, int]`.
    spec: the policy's `NetworkSpec`.
    precision: a precision of `runtimes.RUNTIMES` (`actorq.core.PRECISIONS` and any
      registered since), or a per-layer policy's
      ``"mixed:<choice>,..."`` name (`actorq.quantization.mixed.precision_name`), whose
      payload is `mixed.make_payload` of that policy.
    per_channel: per-channel weight scales for the uniform integer precisions.
    calibration: None, or a callable returning recent observations `[N, *input_shape]`
      (or None while it has none): a payload with integer layers then has its biases
      corrected on them (`bias_correction.correct_payload`; feed-forward specs), so every
      version is recalibrated on the states of the newest replay sample.

  `payload()` returns the newest version's payload; `stats` counts conversions, their
  time (s), the newest payload's bytes (`payload_bytes`), and what was served: `pulls`
  (`payload()` calls) and `bytes_sent` (the sum of the served payloads' `nbytes`, i.e.
  what the variable source sends; a remote transport adds its own framing);
  `thread_convert_seconds()` is the conversion time (s) spent in the calling thread.

  Raises:
    ValueError: an unknown precision, or a ``"mixed:..."`` name that does not fit `spec`
      (see `mixed.policy_of`).
  """

  def __init__(self, learner: core.VariableSource, spec: ns.NetworkSpec,
               precision: str = FP32, per_channel: bool = True,
               calibration: Optional[bias_correction.Calibration] = None):
    self._learner = learner
    self._calibration = None if isinstance(spec, ns.RecurrentSpec) else calibration
    self._spec = spec
    self._precision = runtimes.check_precision(precision, "precision", acting=False)
    runtimes.check_fits(precision, spec)  # refuses a per-layer name that does not fit now
    self._per_channel = per_channel
    self._lock = threading.Lock()
    self._cached = None
    self._thread = threading.local()
    self.stats = {"conversions": 0, "convert_seconds": 0.0, "payload_bytes": 0, "pulls": 0,
                  "bytes_sent": 0}

  def _convert(self, params, version: int):
    start = time.perf_counter()
    out = make_payload(params, self._spec, self._precision, int(version), self._per_channel)
    observations = self._calibration() if self._calibration is not None else None
    if observations is not None:
      out = bias_correction.correct_payload(out, params, self._spec, observations)
    seconds = time.perf_counter() - start
    self.stats["conversions"] += 1
    self.stats["convert_seconds"] += seconds
    self.stats["payload_bytes"] = int(out.nbytes)
    self._thread.convert_seconds = self.thread_convert_seconds() + seconds
    return out

  def thread_convert_seconds(self) -> float:
    """Seconds of conversion done by `payload` calls from the calling thread.

    A pull that waits on the lock while another thread converts the same version
    does not count that conversion (`stats["convert_seconds"]` counts all threads).
    """
    return float(getattr(self._thread, "convert_seconds", 0.0))

  def payload(self) -> payload_lib.Payload:
    """The newest parameter version at this precision (converted on first request)."""
    with self._lock:
      params, version = self._learner.get_variables(["policy", "version"])
      if self._cached is None or self._cached.version != int(version):
        self._cached = self._convert(params, version)
      self.stats["pulls"] += 1
      # The cached payload's nbytes, set by `_convert` (summing its arrays on every pull
      # cost a vector actor ~1 us per step).
      self.stats["bytes_sent"] += self.stats["payload_bytes"]
      return self._cached


class PolicyServer:
  """The actors' variable source: `get_variables(["policy/<precision>"])` -> `[payload]`.

  `in_process` is True: an actor of the same process pulls it synchronously (see
  `VariableClient`); the learner node serves the same names to remote actors.

  Owns one `PolicyPublisher` per precision, made on the first request for it
  (thread-safe); any other name is served by the learner itself (``"policy"``,
  ``"version"``, ...), so this also is the learner's `acme.core.VariableSource`.

  Args:
    learner: serves `get_variables(["policy", "version"])`.
    spec: the policy's `NetworkSpec`.
    per_channel: per-channel weight scales for integer precisions.
    calibration: recent observations for the integer payloads' bias correction (see
      `PolicyPublisher`; the launchers pass `bias_correction.ObservationTap.observations`
      of the learner's replay iterator).
  """

  in_process = True

  def __init__(self, learner: core.VariableSource, spec: ns.NetworkSpec,
               per_channel: bool = True,
               calibration: Optional[bias_correction.Calibration] = None):
    self._learner = learner
    self._spec = spec
    self._per_channel = per_channel
    self._calibration = calibration
    self._lock = threading.Lock()
    self._publishers: Dict[str, PolicyPublisher] = {}

  def publisher(self, precision: str) -> PolicyPublisher:
    """The publisher of `precision` (made on first use). Raises ValueError if unknown."""
    with self._lock:
      if precision not in self._publishers:
        self._publishers[precision] = PolicyPublisher(self._learner, self._spec, precision,
                                                      self._per_channel, self._calibration)
      return self._publishers[precision]

  def get_variables(self, names: Sequence[str]) -> List[Any]:
    out = []
    for name in names:
      if name.startswith(_POLICY_PREFIX):
        out.append(self.publisher(name[len(_POLICY_PREFIX):]).payload())
      else:
        out.append(self._learner.get_variables([name])[0])
    return out

  @property
  def stats(self) -> Dict[str, float]:
    """Conversions and their seconds summed over the precisions served."""
    with self._lock:
      publishers = list(self._publishers.values())
    return {"conversions": sum(p.stats["conversions"] for p in publishers),
            "convert_seconds": sum(p.stats["convert_seconds"] for p in publishers)}

  def served(self) -> Dict[str, Dict[str, float]]:
    """Precision -> a copy of its publisher's `stats` (pulls, bytes_sent, payload_bytes,
    conversions, convert_seconds): what this variable source has sent."""
    with self._lock:
      publishers = dict(self._publishers)
    return {precision: dict(p.stats) for precision, p in publishers.items()}

  def thread_convert_seconds(self) -> float:
    """Conversion seconds spent in the calling thread, over every precision."""
    with self._lock:
      publishers = list(self._publishers.values())
    return float(sum(p.thread_convert_seconds() for p in publishers))


def make_runtime(precision: str, spec: ns.NetworkSpec):
  """The actor-side policy runtime for `precision` (see `actorq.quantization.runtimes`)."""
  return runtimes.make_runtime(precision, spec)


def make_payload(params, spec: ns.NetworkSpec, precision: str, version: int = 0,
                 per_channel: bool = True) -> payload_lib.Payload:
  """`params` encoded for `make_runtime(precision, spec)` (`runtimes.make_payload`: the
  `runtimes.RUNTIMES` row's encoder, `payload.make_payload` for the built-in precisions,
  or `mixed.make_payload` of the policy a ``"mixed:<choice>,..."`` precision names;
  `per_channel` does not apply there: each layer's label says).

  Raises:
    ValueError: an unknown precision or params/policy that do not fit `spec`.
  """
  return runtimes.make_payload(params, spec, precision, int(version), per_channel)


class VariableClient:
  """Pulls the policy every `update_period` actor steps.

  Asynchronous pulls (the default for a remote source) run in a background thread: acting
  never waits, and which version a step acts with depends on the fetch's timing. A
  source in the actor's own process (`in_process = True`, e.g. a `PolicyServer` of a
  single-process run) is pulled synchronously at the due step instead: a pull is a
  function call there, and the version every step acts with is then fixed by the step
  count (deterministic runs).

  Args:
    source: a `PolicyServer` (or the learner node's Courier handle): anything serving
      `get_variables(["policy/<precision>"])`.
    runtime: has `load(payload)`, `version` and `payload_precision` (what is pulled).
    update_period: actor steps between pulls (>= 1).
    asynchronous: pull in a background thread; None: unless the source is in process.
    check_version: once a payload is loaded, a pull first asks the source for
      ``"version"`` (an int) and fetches the payload only when it differs from the
      runtime's: a pull of an unchanged version then moves a few bytes, not the whole
      payload (33.6 MB for the 3x2048 fp32 policy). The source must serve ``"version"``
      (learners and `PolicyServer` do). False: every pull fetches the payload.

  Attributes:
    stats: pulls, bytes received, fetch seconds (transfer) and load seconds;
      ``"unchanged"``: pulls that found the version current (check_version).
    payload: the payload the runtime executes (None before the first load).
  """

  def __init__(self, source, runtime, update_period: int = 1,
               asynchronous: Optional[bool] = None, check_version: bool = False):
    if update_period < 1:
      raise ValueError(f"update_period must be >= 1 actor step, got {update_period}")
    self._source = source
    self._runtime = runtime
    self._name = policy_name(runtime.payload_precision)
    self._period = int(update_period)
    self._calls = 0
    if asynchronous is None:
      # `is True`: a remote source (a Courier client, or a wrapper of one) answers any
      # attribute, `in_process` included, with a remote-call function, which is truthy.
      asynchronous = getattr(source, "in_process", False) is not True
    self.asynchronous = bool(asynchronous)
    self._executor = (concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="variable-client")
                      if self.asynchronous else None)
    self._future: Optional[concurrent.futures.Future] = None
    self.payload = None
    self._counted, self._counted_bytes = None, 0  # the last payload pulled, its nbytes
    self.stats = {"pulls": 0, "bytes": 0, "fetch_seconds": 0.0, "load_seconds": 0.0,
                  "unchanged": 0}
    self._check_version = bool(check_version)

  @property
  def version(self) -> int:
    return self._runtime.version

  def source_version(self) -> int:
    """The newest parameter version the source holds now (its ``"version"``: the
    learner's steps): one call to the source (a function call in process, a remote call
    otherwise). `source_version() - version` is how many versions the actor lags."""
    return int(self._source.get_variables([VERSION])[0])

  def source_payload(self, precision: str) -> payload_lib.Payload:
    """The source's newest payload at another `precision` (e.g. fp32 beside an int8
    actor's own: a measurement of what the actor would do at fp32)."""
    return self._source.get_variables([policy_name(precision)])[0]

  def _fetch(self):
    """(the payload, or None when `check_version` found the runtime's version current;
    seconds)."""
    start = time.perf_counter()
    if self._check_version and self.payload is not None:
      version = self._source.get_variables([VERSION])[0]
      if int(version) == self._runtime.version:
        return None, time.perf_counter() - start
    payload = self._source.get_variables([self._name])[0]
    return payload, time.perf_counter() - start

  def _load(self, result) -> None:
    payload, fetch_seconds = result
    self.stats["pulls"] += 1
    self.stats["fetch_seconds"] += fetch_seconds
    if payload is None:
      self.stats["unchanged"] += 1
      return
    if payload is not self._counted:  # a new object: count its arrays once
      self._counted, self._counted_bytes = payload, int(payload.nbytes)
    self.stats["bytes"] += self._counted_bytes
    if int(payload.version) != self._runtime.version:
      start = time.perf_counter()
      self._runtime.load(payload)
      self.payload = payload
      self.stats["load_seconds"] += time.perf_counter() - start

  def update(self, wait: bool = False, steps: int = 1) -> None:
    """Counts `steps` actor steps (int >= 1); pulls when due. Blocks only when `wait` or
    synchronous.

    `update(steps=k)` is k calls of `update()` with nothing in between (a vectorized
    actor's k rows): the count after it is the same, and where one or more pulls fall due
    among them, one pull is made (back-to-back pulls would fetch the same version), at
    the end of the k synchronously, else submitted in the background as the call that
    fell due would have."""
    if wait:
      self.update_and_wait()
      return
    if self._future is not None and self._future.done():
      future, self._future = self._future, None
      self._load(future.result())  # re-raises a failed fetch here, on the actor thread
    calls = self._calls + steps
    if calls < self._period or self._future is not None:
      self._calls = calls
      return
    if not self.asynchronous:  # pulls at every multiple of the period: the last one counts
      self.update_and_wait()
      self._calls = calls % self._period
      return
    # The call that fell due (the first of the k, or the one reaching the period) reset
    # the count and submitted; the calls after it count again.
    self._calls = steps - max(self._period - self._calls, 1)
    self._future = self._executor.submit(self._fetch)

  def update_and_wait(self) -> None:
    """Fetches and loads the newest parameters now."""
    if self._future is not None:
      self._future.result()
      self._future = None
    self._load(self._fetch())
    self._calls = 0

  def close(self) -> None:
    if self._executor is not None:
      self._executor.shutdown(wait=False)


class SynchronousVariableClient(VariableClient):
  """A `VariableClient` that always pulls synchronously, whatever the source.

  On-policy actors should act with the policy the learner just produced: with
  background pulls, which version a step is taken with depends on thread scheduling
  (and A2C, which has no off-policy correction, would train on a lagging policy's data).
  On-policy actors pull often (every few steps) and most pulls find no new version, so
  this client checks the version first (`check_version`): a pull of an unchanged version
  costs one small `get_variables(["version"])` call (issue 40: in a `local_mp` IMPALA run
  with the 3x2048 policy each fp32 pull moved the whole 33.6 MB payload, ~24 ms per actor
  step); a new version is converted once by the learner-side `PolicyPublisher`.
  """

  def __init__(self, source, runtime, update_period: int = 1):
    super().__init__(source, runtime, update_period, asynchronous=False, check_version=True)
