"""Moving policy parameters from the learner to actors.

Learner side, a `PolicyPublisher` wraps a learner (any `acme.core.VariableSource` that
serves the names ``"policy"`` and ``"version"``) and converts each *parameter version*
once into the `Payload` actors execute: fp32/fp16/bf16 arrays, or int8 weights +
float32 scales (see `actorq.quantization.payload`). Actors never
trigger a second conversion of the same version, however many pull it.

Actor side, a `VariableClient` pulls from a source every `update_period` actor steps,
asynchronously (a background thread fetches; acting never waits), and loads what it
received into a policy runtime. `update_and_wait()` fetches synchronously.

dm-acme 0.4.0's `acme.jax.variable_utils.VariableClient` does not import on jax 0.4.13
(`jax.xla.Device`), hence this implementation.
"""
from __future__ import annotations

import concurrent.futures
import threading
import time
from typing import Optional, Sequence

from acme import core

from actorq.quantization import network_spec as ns
from actorq.quantization import payload as payload_lib
from actorq.quantization import runtimes

FP32 = "fp32"


class PolicyPublisher(core.VariableSource):
  """Learner-side conversion of each policy version, done once and cached.

  Args:
    learner: serves `get_variables(["policy", "version"])` -> `[params, int]`.
    spec: the policy's `NetworkSpec`.
    precision: any precision of `actorq.quantization.payload.make_payload`
      (``"fp32"``, ``"fp16"``, ``"bf16"``, ``"int8"``, ``"simulated-int8"``).
    per_channel: per-channel weight scales for integer precisions.

  `get_variables(names)` returns `[payload]` for any names (actors ask for
  ``["policy"]``); `stats` counts conversions, their time (s) and payload bytes;
  `thread_convert_seconds()` is the conversion time (s) spent in the calling thread.
  """

  def __init__(self, learner: core.VariableSource, spec: ns.NetworkSpec,
               precision: str = FP32, per_channel: bool = True):
    self._learner = learner
    self._spec = spec
    self._precision = precision
    self._per_channel = per_channel
    self._lock = threading.Lock()
    self._cached = None
    self._thread = threading.local()
    self.stats = {"conversions": 0, "convert_seconds": 0.0, "payload_bytes": 0}
    if precision not in payload_lib.PRECISIONS:
      raise ValueError(f"precision {precision!r} unknown; allowed: {payload_lib.PRECISIONS}")

  def _convert(self, params, version: int):
    start = time.perf_counter()
    out = payload_lib.make_payload(params, self._spec, self._precision, int(version),
                                   per_channel=self._per_channel)
    seconds = time.perf_counter() - start
    self.stats["conversions"] += 1
    self.stats["convert_seconds"] += seconds
    self.stats["payload_bytes"] = int(out.nbytes)
    self._thread.convert_seconds = self.thread_convert_seconds() + seconds
    return out

  def thread_convert_seconds(self) -> float:
    """Seconds of conversion done by `get_variables` calls from the calling thread.

    A pull that waits on the lock while another thread converts the same version
    does not count that conversion (`stats["convert_seconds"]` counts all threads).
    """
    return float(getattr(self._thread, "convert_seconds", 0.0))

  def get_variables(self, names: Sequence[str] = ("policy",)):
    del names
    with self._lock:
      params, version = self._learner.get_variables(["policy", "version"])
      if self._cached is None or self._cached.version != int(version):
        self._cached = self._convert(params, version)
      return [self._cached]


def make_runtime(precision: str, spec: ns.NetworkSpec):
  """The actor-side policy runtime for `precision` (see `actorq.quantization.runtimes`)."""
  return runtimes.make_runtime(precision, spec)


class VariableClient:
  """Pulls the policy every `update_period` actor steps without blocking acting.

  Args:
    source: a `PolicyPublisher` (or its Launchpad/courier handle).
    runtime: has `load(payload)` and `version`.
    update_period: actor steps between pulls (>= 1).

  Attributes:
    stats: pulls, bytes received, fetch seconds (transfer) and load seconds.
    payload: the payload the runtime executes (None before the first load).
  """

  def __init__(self, source, runtime, update_period: int = 1):
    if update_period < 1:
      raise ValueError(f"update_period must be >= 1 actor step, got {update_period}")
    self._source = source
    self._runtime = runtime
    self._period = int(update_period)
    self._calls = 0
    self._executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="variable-client")
    self._future: Optional[concurrent.futures.Future] = None
    self.payload = None
    self.stats = {"pulls": 0, "bytes": 0, "fetch_seconds": 0.0, "load_seconds": 0.0}

  @property
  def version(self) -> int:
    return self._runtime.version

  def _fetch(self):
    start = time.perf_counter()
    payload = self._source.get_variables(["policy"])[0]
    return payload, time.perf_counter() - start

  def _load(self, result) -> None:
    payload, fetch_seconds = result
    self.stats["pulls"] += 1
    self.stats["fetch_seconds"] += fetch_seconds
    self.stats["bytes"] += int(payload.nbytes)
    if int(payload.version) != self._runtime.version:
      start = time.perf_counter()
      self._runtime.load(payload)
      self.payload = payload
      self.stats["load_seconds"] += time.perf_counter() - start

  def update(self, wait: bool = False) -> None:
    """Counts one actor step; pulls when due. Never blocks unless `wait`."""
    if wait:
      self.update_and_wait()
      return
    if self._future is not None and self._future.done():
      future, self._future = self._future, None
      self._load(future.result())  # re-raises a failed fetch here, on the actor thread
    self._calls += 1
    if self._calls >= self._period and self._future is None:
      self._calls = 0
      self._future = self._executor.submit(self._fetch)

  def update_and_wait(self) -> None:
    """Fetches and loads the newest parameters now."""
    if self._future is not None:
      self._future.result()
      self._future = None
    self._load(self._fetch())
    self._calls = 0

  def close(self) -> None:
    self._executor.shutdown(wait=False)
