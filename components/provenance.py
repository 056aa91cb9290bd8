"""Where a measurement was made: the machine (CPU kind, cores, load) and the code's commit,
recorded beside every benchmark's and study's figures so a reader can tell which numbers are
comparable (medians and ratios only within one machine kind; see the brief's CPU note).

    meta = {"machine": provenance.machine_info(), "commit": provenance.commit()}
    provenance.machine_line()     # "2-core AMD EPYC 7B13", for a table's caption
    provenance.cpu_line()         # "AMD EPYC 7B13 (family 25, model 1), 2 cores"
"""
from __future__ import annotations

import os
import platform
import subprocess
from typing import Any, Dict, Optional

def machine_info() -> Dict[str, Any]:
  """nproc, CPU model name, `cpu_family_model` ("family/model" from /proc/cpuinfo) and
  `avx512` (whether the CPU has AVX-512F), platform, Python, load averages.

  The CPU family and instruction set matter beyond speed: XLA compiles for the host CPU, so a
  seeded run repeats its values exactly on the same kind of CPU but not across kinds (DQN's
  20k-step learning test: final 500.0 on one AMD EPYC, 263.6 on an AVX-512 one, family 26).
  """
  fields: Dict[str, str] = {}  # "key: value" lines of the first processor's block
  try:
    with open("/proc/cpuinfo", encoding="utf-8") as f:
      for line in f:
        if not line.strip():
          break
        key, _, value = line.partition(":")
        fields[key.strip()] = value.strip()
  except OSError:
    pass
  info = {"nproc": os.cpu_count(), "cpu_model": fields.get("model name", "unknown"),
          "cpu_family_model": f"{fields.get('cpu family', '?')}/{fields.get('model', '?')}",
          "avx512": "avx512f" in fields.get("flags", "").split(),
          "platform": platform.platform(), "python": platform.python_version()}
  try:
    info["loadavg_1_5_15"] = list(os.getloadavg())
  except OSError:
    pass
  return info


def machine_line(info: Optional[Dict[str, Any]] = None) -> str:
  """``"<nproc>-core <CPU model>"`` of `info` (default: this machine's `machine_info()`); the
  model is `platform.processor()` (or `platform.machine()`) where /proc/cpuinfo names none."""
  info = machine_info() if info is None else info
  model = info["cpu_model"]
  if model == "unknown":
    model = platform.processor() or platform.machine()
  return f"{info['nproc']}-core {model}"


def cpu_line(info: Optional[Dict[str, Any]] = None) -> str:
  """``"<CPU model> (family F, model M), <nproc> cores"`` of `info` (default: this
  machine's `machine_info()`)."""
  info = machine_info() if info is None else info
  family, _, model = info["cpu_family_model"].partition("/")
  return f"{info['cpu_model']} (family {family}, model {model}), {info['nproc']} cores"


def commit() -> str:
  """The short hash of the checkout's HEAD (`git rev-parse --short HEAD`), else "unknown"."""
  try:
    return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True, check=True, cwd=os.path.dirname(__file__)).stdout.strip()
  except (OSError, subprocess.CalledProcessError):
    return "unknown"
