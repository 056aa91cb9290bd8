"""Two network namespaces joined by a veth pair: two "hosts" on one machine, for the
`hosts` launch's tests and `benchmarks/network_pull.py`.

    with netns.HostPair() as pair:            # root only; see `unavailable()`
      subprocess.run(pair.exec_argv(1) + ["python", ...])   # runs "on" 10.231.0.2
      pair.set_rate("100mbit")                 # tc tbf on both ends of the veth

Namespace ``<prefix>n0`` holds ``10.231.0.1/24``, ``<prefix>n1`` holds ``10.231.0.2/24``
(prefix ``aq<pid>``); each also has its loopback up. Nothing else is routed: traffic
goes only between the two namespaces (and each one's loopback). `close()` (also on
leaving the `with`, whatever happened) kills every process left in either namespace and
deletes both, which removes the veth pair. Inside the `with` (in the main thread) SIGTERM
raises `SystemExit(143)`, so a benchmark that is terminated leaves the `with` and cleans up
too (Python's default for SIGTERM is to die at once, with no cleanup). Namespaces of this
kind left by a process that no longer exists (SIGKILL) are deleted when a new pair is made.
"""
from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import threading
import time
from typing import Dict, List, Optional

SUBNET = "10.231.0"
_NAME = re.compile(r"aq(\d+)n[01]")


def _exit_on_sigterm(signum, frame):
  del frame
  raise SystemExit(128 + signum)


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
  return subprocess.run(["ip", *args], capture_output=True, text=True, check=check, timeout=30)


def unavailable() -> Optional[str]:
  """Why network namespaces cannot be made here (None: they can)."""
  if os.geteuid() != 0:
    return "network namespaces need root"
  if shutil.which("ip") is None:
    return "the 'ip' command (iproute2) is not installed"
  probe = f"aq{os.getpid()}probe"
  result = _ip("netns", "add", probe, check=False)
  if result.returncode != 0:
    return f"'ip netns add' failed: {result.stderr.strip()}"
  _ip("netns", "del", probe, check=False)
  return None


def _remove_stale() -> None:
  names = _ip("netns", "list", check=False).stdout.split()
  for name in names:
    m = _NAME.fullmatch(name)
    if m and int(m.group(1)) != os.getpid() and not os.path.exists(f"/proc/{m.group(1)}"):
      _kill_all(name)
      _ip("netns", "del", name, check=False)


def _pids(name: str) -> List[int]:
  out = _ip("netns", "pids", name, check=False).stdout.split()
  return [int(p) for p in out if p.isdigit()]


def _kill_all(name: str, sig: int = signal.SIGKILL) -> None:
  for pid in _pids(name):
    try:
      os.kill(pid, sig)
    except ProcessLookupError:
      pass


class HostPair:
  """Two namespaces and a veth pair between them (see the module docstring).

  Attributes:
    names: the two namespaces.
    addresses: their IPv4 addresses, ``10.231.0.1`` and ``10.231.0.2``.
    links: the veth ends, one in each namespace.

  Raises (from the constructor):
    RuntimeError: `unavailable()` gives a reason, or an `ip` command failed (what was
      made so far is removed).
  """

  def __init__(self):
    reason = unavailable()
    if reason is not None:
      raise RuntimeError(reason)
    _remove_stale()
    prefix = f"aq{os.getpid()}"
    self.names = [f"{prefix}n0", f"{prefix}n1"]
    self.addresses = [f"{SUBNET}.1", f"{SUBNET}.2"]
    self.links = [f"{prefix}v0", f"{prefix}v1"]
    self._closed = False
    try:
      for name in self.names:
        _ip("netns", "add", name)
      _ip("link", "add", self.links[0], "type", "veth", "peer", "name", self.links[1])
      for name, link, address in zip(self.names, self.links, self.addresses):
        _ip("link", "set", link, "netns", name)
        _ip("-n", name, "addr", "add", f"{address}/24", "dev", link)
        _ip("-n", name, "link", "set", link, "up")
        _ip("-n", name, "link", "set", "lo", "up")
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as e:
      self.close()
      detail = getattr(e, "stderr", "") or ""
      raise RuntimeError(f"making the namespaces failed: {e} {detail.strip()}") from None

  def __enter__(self) -> "HostPair":
    self._old_sigterm = None
    if threading.current_thread() is threading.main_thread():
      self._old_sigterm = signal.signal(signal.SIGTERM, _exit_on_sigterm)
    return self

  def __exit__(self, *exc) -> None:
    try:
      self.close()
    finally:
      if self._old_sigterm is not None:
        signal.signal(signal.SIGTERM, self._old_sigterm)

  def exec_argv(self, index: int) -> List[str]:
    """The prefix that runs a command in namespace `index`."""
    return ["ip", "netns", "exec", self.names[index]]

  def pids(self, index: int) -> List[int]:
    """Processes in namespace `index`."""
    return _pids(self.names[index])

  def kill_all(self, index: int, sig: int = signal.SIGKILL) -> None:
    """Sends `sig` to every process in namespace `index`."""
    _kill_all(self.names[index], sig)

  def set_rate(self, rate: Optional[str]) -> None:
    """Limits both directions of the link to `rate` (tc's syntax, e.g. ``1gbit``,
    ``100mbit``) with a token bucket (tbf, 10 ms of burst, 50 ms of queue); None
    removes the limit."""
    for name, link in zip(self.names, self.links):
      if rate is None:
        _ip("-n", name, "link", "show", link)  # the link must still be there
        subprocess.run(["ip", "netns", "exec", name, "tc", "qdisc", "del", "dev", link, "root"],
                       capture_output=True, check=False, timeout=30)
        continue
      bits = rate_bits(rate)
      burst = max(bits // 8 // 100, 64 * 1024)
      subprocess.run(["ip", "netns", "exec", name, "tc", "qdisc", "replace", "dev", link, "root",
                      "tbf", "rate", rate, "burst", str(burst), "latency", "50ms"],
                     capture_output=True, text=True, check=True, timeout=30)

  def link_bytes(self, index: int) -> Dict[str, int]:
    """The veth end of namespace `index`: bytes sent and received so far."""
    out = {}
    for key in ("tx_bytes", "rx_bytes"):
      result = subprocess.run(self.exec_argv(index) + [
          "cat", f"/sys/class/net/{self.links[index]}/statistics/{key}"],
          capture_output=True, text=True, check=True, timeout=30)
      out[key] = int(result.stdout.strip())
    return out

  def close(self) -> None:
    """Kills what runs in the namespaces and deletes them (idempotent)."""
    if self._closed:
      return
    self._closed = True
    existing = set(_ip("netns", "list", check=False).stdout.split())
    for name in self.names:
      if name in existing:
        for _ in range(3):
          _kill_all(name)
          if not _pids(name):
            break
          time.sleep(0.2)
        _ip("netns", "del", name, check=False)


def rate_bits(rate: str) -> int:
  """``"100mbit"`` -> 100_000_000 (bits per second; tc's decimal units).

  Raises:
    ValueError: not ``<number>{bit,kbit,mbit,gbit}``.
  """
  m = re.fullmatch(r"(\d+(?:\.\d+)?)(bit|kbit|mbit|gbit)", rate)
  if not m:
    raise ValueError(f"rate must look like 100mbit or 1gbit, got {rate!r}")
  scale = {"bit": 1, "kbit": 10**3, "mbit": 10**6, "gbit": 10**9}[m.group(2)]
  return int(float(m.group(1)) * scale)
