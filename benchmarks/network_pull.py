"""Parameter pulls over a rate-limited link: fp32 vs int8, 3x256 and 3x2048 policies.

Two network namespaces joined by a veth pair (`testing/netns.py`, root only) stand in for
a learner host (10.231.0.1) and an actor host (10.231.0.2); `tc ... tbf` limits both
directions of the link to each rate in turn. The learner process serves a `PolicyServer`
over Courier, as the learner node does (each parameter version converted once per
precision, on the learner); the actor process pulls with a `VariableClient` into the
policy runtime it acts with (JAX fp32, LiteRT int8; one thread) and runs it once. Per
pull:

  latency  from the moment the learner holds a new parameter version to the first action
           of the actor's runtime loaded with it (both processes read the machine's one
           CLOCK_MONOTONIC): conversion on the learner, transfer, deserialisation, load,
           one call on a batch-1 observation
  payload  bytes of the payload's arrays (`Payload.nbytes`)
  wire     bytes received on the actor host's end of the veth during the pull (payload
           plus TCP/IP, gRPC and Courier framing)

Medians over `--pulls` pulls per cell; fp32 and int8 alternate which goes first. Each
rate also gets a plain TCP transfer of 24 MB (the link's goodput, to check the shaping).
The namespaces are removed on every exit path.

    sudo .venv/bin/python benchmarks/network_pull.py [--rates none,1gbit,100mbit]
        [--pulls 5] [--json FILE]
"""
from __future__ import annotations

import json
import os
import socket
import statistics
import sys
import threading
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # pylint: disable=g-import-not-at-top

# actor_inference pins XLA to one thread when imported (the actor's policy runtime).
from actorq.benchmarks import actor_inference  # pylint: disable=g-import-not-at-top
from actorq.components.acting import variable_client  # pylint: disable=g-import-not-at-top
from actorq.quantization import runtimes  # pylint: disable=g-import-not-at-top

NETWORKS = ("mlp_3x256", "mlp_3x2048")
PRECISIONS = ("fp32", "int8")
PORT = 29350  # Courier; PORT + 1: the raw TCP transfer
RAW_BYTES = 24 * 2**20


# ---------------------------------------------------------------------------------------
# The learner host.


class _Learner:
  """The learner as the `PolicyServer` sees it: ``policy`` and ``version``."""

  def __init__(self, params):
    self.params, self.version = params, 0

  def get_variables(self, names):
    return [self.params if n == "policy" else self.version for n in names]


class PullSource:
  """Courier methods: `new_version(net) -> float` (the CLOCK_MONOTONIC time at which the
  new version is in place) and `get_variables(net, names)` (the `PolicyServer`'s)."""

  def __init__(self):
    rng = np.random.default_rng(0)
    self._learners, self._servers = {}, {}
    for net in NETWORKS:
      spec = actor_inference.NETWORKS[net]()
      self._learners[net] = _Learner(actor_inference.random_params(spec, rng))
      self._servers[net] = variable_client.PolicyServer(self._learners[net], spec)

  def new_version(self, net: str) -> float:
    learner = self._learners[net]
    learner.params = {l: {k: a + np.float32(1e-3) for k, a in layer.items()}
                      for l, layer in learner.params.items()}
    learner.version += 1
    return time.monotonic()

  def get_variables(self, net: str, names):
    return self._servers[net].get_variables(names)


def _raw_sender(port: int) -> None:
  server = socket.socket()
  server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
  server.bind(("0.0.0.0", port))
  server.listen(4)
  block = b"\0" * 2**20
  while True:
    conn, _ = server.accept()
    with conn:
      for _ in range(RAW_BYTES // len(block)):
        conn.sendall(block)


def serve() -> int:
  """Runs the learner host until its standard input closes."""
  from launchpad.nodes.courier import courier_utils  # pylint: disable=g-import-not-at-top
  server = courier_utils.make_courier_server(PullSource(), port=PORT)
  server.Start()
  threading.Thread(target=_raw_sender, args=(PORT + 1,), daemon=True).start()
  print("ready", flush=True)
  sys.stdin.read()
  server.Stop()
  return 0


# ---------------------------------------------------------------------------------------
# The actor host.


class _Source:
  """One network's variable source for a `VariableClient`, over the Courier client."""

  def __init__(self, client, net):
    self._client, self._net = client, net

  def get_variables(self, names):
    return self._client.get_variables(self._net, names)


def _rx_bytes(link: str) -> int:
  with open(f"/sys/class/net/{link}/statistics/rx_bytes", encoding="ascii") as f:
    return int(f.read())


def _goodput_mbit(address: str) -> float:
  with socket.create_connection((address, PORT + 1), timeout=120) as conn:
    t0, got = time.perf_counter(), 0
    while got < RAW_BYTES:
      chunk = conn.recv(2**20)
      if not chunk:
        break
      got += len(chunk)
    return got * 8 / (time.perf_counter() - t0) / 1e6


def act(address: str, link: str, rates, pulls: int) -> int:
  """For each rate (announced on stdout, started on a line on stdin): `pulls` pulls per
  network and precision; prints one JSON line of results per rate."""
  import courier  # pylint: disable=g-import-not-at-top
  client = courier.Client(f"{address}:{PORT}", call_timeout=300)
  cells = {}
  for net in NETWORKS:
    spec = actor_inference.NETWORKS[net]()
    obs = np.random.default_rng(1).normal(size=(1,) + spec.input_shape).astype(np.float32)
    for precision in PRECISIONS:
      runtime = runtimes.make_runtime(precision, spec, num_threads=1)
      pull = variable_client.VariableClient(_Source(client, net), runtime, asynchronous=False)
      cells[net, precision] = (runtime, pull, obs)
      client.new_version(net)  # warm-up: the LiteRT template, jit, the channel
      pull.update_and_wait()
      runtime(obs)
  for rate in rates:
    print(f"rate {rate}", flush=True)
    sys.stdin.readline()
    rows = []
    for rep in range(pulls):
      for net in NETWORKS:
        for precision in PRECISIONS[::1 if rep % 2 == 0 else -1]:
          runtime, pull, obs = cells[net, precision]
          rx = _rx_bytes(link)
          start = client.new_version(net)
          pull.update_and_wait()
          runtime(obs)
          latency = time.monotonic() - start
          rows.append({"net": net, "precision": precision, "latency_s": latency,
                       "payload_bytes": int(pull.payload.nbytes),
                       "wire_bytes": _rx_bytes(link) - rx})
    print("result " + json.dumps({"rate": rate, "goodput_mbit": _goodput_mbit(address),
                                  "pulls": rows}), flush=True)
  return 0


# ---------------------------------------------------------------------------------------
# The run: namespaces, the two hosts, the table.


def summarize(results):
  """Per rate, network and precision: medians; per rate and network: fp32/int8 ratios."""
  table = []
  for result in results:
    for net in NETWORKS:
      cell = {}
      for precision in PRECISIONS:
        rows = [r for r in result["pulls"] if r["net"] == net and r["precision"] == precision]
        cell[precision] = {k: statistics.median(r[k] for r in rows)
                           for k in ("latency_s", "payload_bytes", "wire_bytes")}
      table.append({"rate": result["rate"], "goodput_mbit": result["goodput_mbit"], "net": net,
                    **{f"{p}_{k}": v for p, c in cell.items() for k, v in c.items()},
                    "latency_ratio": cell["fp32"]["latency_s"] / cell["int8"]["latency_s"],
                    "wire_ratio": cell["fp32"]["wire_bytes"] / cell["int8"]["wire_bytes"]})
  return table


def print_table(table, pulls, load):
  print(f"\nnew parameter version on the learner -> runnable policy on the remote actor "
        f"(median of {pulls} pulls; load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} "
        f"at the start, {os.cpu_count()} cores)")
  print(f"{'link':>8} {'goodput':>9} {'policy':>10} | {'fp32 ms':>9} {'int8 ms':>9} "
        f"{'fp32/int8':>9} | {'fp32 wire B':>12} {'int8 wire B':>12} {'fp32/int8':>9} "
        f"| {'int8 payload B':>14}")
  for r in table:
    print(f"{r['rate']:>8} {r['goodput_mbit']:6.0f} Mb {r['net'][4:]:>10} | "
          f"{1e3 * r['fp32_latency_s']:9.1f} {1e3 * r['int8_latency_s']:9.1f} "
          f"{r['latency_ratio']:8.2f}x | {r['fp32_wire_bytes']:12,.0f} "
          f"{r['int8_wire_bytes']:12,.0f} {r['wire_ratio']:8.2f}x | "
          f"{r['int8_payload_bytes']:14,.0f}")


if __name__ == "__main__":
  from actorq.cli.benchmarks import network_pull as command_line  # its flags: cli/
  sys.exit(command_line.main())
