"""Where a run computes: the learner on the accelerator when there is one, everything else on
the CPU, and how many threads each process of a distributed run may use.

    device = placement.learner_device("auto")    # a jax.Device: a GPU if jax sees one, else CPU
    with jax.default_device(device):
      ...build and step the learner...           # actor runtimes commit to cpu_device() themselves

`learner_device` choices (`actorq.core.LEARNER_DEVICES`, `--learner-device`):
  auto  the first GPU jax sees, else the CPU;
  gpu   the first GPU; `NoAcceleratorError` (one line) when jax sees none;
  cpu   the CPU, even on a machine with a GPU.

Per launch mode:
  * One process (`launch.local`, and `local_mt`, where every node is a thread of one process):
    the learner's code runs inside `jax.default_device(learner device)` (thread-local), and the
    actors' policy runtimes put their parameters on `cpu_device()` explicitly
    (`quantization/runtimes/jax_runtime.py`), so their jitted forward runs on the CPU whatever the
    default is; the int8 runtime is LiteRT on the CPU. JAX's backends are per process: once the
    learner has started the GPU backend (and XLA has reserved its memory, 75% by default), every
    thread shares it. In one process "actors never touch the GPU" therefore means no actor array
    or computation is placed there, not that the process has no GPU backend. `actorq train`
    with `--learner-device cpu` restricts the whole process to the CPU (`restrict_to_cpu`) before
    any backend starts, so then nothing touches the GPU at all.
  * One process per node (`local_mp`): `node_env(group, ...)` is each node's environment
    overrides, applied when the launcher starts the node (`launch.distributed._NodeProcesses`), so
    before Python, and jax, start there. Every node but the learner gets ``JAX_PLATFORMS=cpu``
    and ``CUDA_VISIBLE_DEVICES=""``: jax there cannot start a GPU backend nor reserve GPU memory.
    The learner gets the same two with `cpu`; with `auto`/`gpu` it inherits the launcher's
    environment and picks its device itself. The launcher restricts itself to the CPU too.

Threads (`node_env`, local_mp; `cores` = CPUs this process may run on, `N` = actors):
  | node                    | XLA_FLAGS adds                     | TF_NUM_INTRAOP / INTEROP | OMP |
  | actor, evaluator,       | --xla_cpu_multi_thread_eigen=false | 1 / 1                    | 1   |
  | replay, counter, limiter|                                    |                          |     |
  | learner                 | (none)                             | max(1, cores - N) / -    | same|
The learner also gets ``MALLOC_ARENA_MAX=1`` (unless the launcher's environment sets it): glibc
then keeps one malloc arena, and the step's large buffers stop being unmapped and faulted back in
every step (its steps run in a thread of their own; see `LEARNER_MALLOC_ARENA_MAX`).
Actors act one observation at a time: one thread is their fastest setting and keeps N actors from
competing for the learner's cores. XLA's CPU client sizes its own thread pool from the CPUs the
process may run on; no flag of jaxlib 0.4.23 caps it, so a CPU learner's XLA pool is not capped
here (the eigen flag makes each actor's XLA computations single-threaded). The LiteRT int8 runtime
takes `num_threads=1` itself.
"""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from typing import Dict, List, Mapping, Optional

import jax

from actorq import core

LEARNER_DEVICES = core.LEARNER_DEVICES
CPU_ONLY_ENV = {"JAX_PLATFORMS": "cpu", "CUDA_VISIBLE_DEVICES": ""}
# glibc malloc arenas of the learner node (issue 40, docs/results/bench_distributed/learner_step.md):
# its steps run in a thread other than the main one, and with glibc's default of one arena per
# thread (up to 8 per core) the step's large XLA buffers live in a thread arena whose heap glibc
# trims and regrows every step: ~40,000 minor page faults per second, 12% of the node's CPU in the
# kernel (clear_page, exc_page_fault). One arena (the main one, whose heap is kept) measured ~0.
LEARNER_MALLOC_ARENA_MAX = "1"
ONE_THREAD_XLA_FLAG = "--xla_cpu_multi_thread_eigen=false"
LEARNER_GROUP = "learner"


class NoAcceleratorError(ValueError):
  """`learner_device="gpu"` on a machine where jax sees no GPU (one-line message)."""


def cpu_device() -> jax.Device:
  """The host CPU device every actor, evaluator and policy runtime computes on."""
  return jax.devices("cpu")[0]


def cuda_installed() -> bool:
  """Whether a CUDA backend for jax is installed (the jax-cuda12 plugin of
  requirements/gpu-py310.txt, or a CUDA jaxlib); imports nothing and starts no backend."""
  for name in ("jax_cuda12_plugin", "jax_cuda11_plugin", "jaxlib.cuda"):
    try:
      if importlib.util.find_spec(name) is not None:
        return True
    except (ImportError, ValueError):
      continue
  return False


def _no_gpu_reason() -> str:
  if not cuda_installed():
    return ("no CUDA backend for jax is installed, ./dev setup adds one where nvidia-smi works "
            "or with ACTORQ_GPU=1")
  platforms = os.environ.get("JAX_PLATFORMS", "")
  if platforms and "cuda" not in platforms and "gpu" not in platforms:
    return f"JAX_PLATFORMS={platforms} hides it"
  if os.environ.get("CUDA_VISIBLE_DEVICES") in ("", "-1"):
    return "CUDA_VISIBLE_DEVICES hides every GPU"
  return "jax's CUDA backend found no usable GPU"


def no_gpu_error(name: str = "learner_device") -> NoAcceleratorError:
  """The one-line error for a GPU learner on a machine without one."""
  return NoAcceleratorError(f"{name} gpu: jax sees no GPU here ({_no_gpu_reason()}); "
                            f"allowed here: auto, cpu")


def _gpus_in_process() -> List[jax.Device]:
  if not cuda_installed():
    return []  # nothing could provide one: do not start backends to find out
  try:
    return list(jax.devices("gpu"))
  except RuntimeError:  # no platform of that kind, or its backend failed to start
    return []


_CPU_FALLBACK = {"checked": False}


def cpu_unless_gpu() -> None:
  """Before this process starts jax's backends: keep it on the CPU when the CUDA plugin is
  installed but finds no GPU. jax 0.4.23 then fails to start ANY backend ("Unable to initialize
  backend 'cuda' ... set JAX_PLATFORMS=cpu") instead of falling back to the CPU, e.g. after
  `ACTORQ_GPU=1 ./dev setup` on a CPU machine or with the GPUs hidden. Asks a child process
  (`probe_gpu`) once per process, only when the plugin is installed, JAX_PLATFORMS is unset and
  no backend has started; otherwise does nothing."""
  if _CPU_FALLBACK["checked"]:
    return
  _CPU_FALLBACK["checked"] = True
  from jax._src import xla_bridge  # pylint: disable=g-import-not-at-top
  if (os.environ.get("JAX_PLATFORMS") or jax.config.jax_platforms or not cuda_installed()
      or xla_bridge.backends_are_initialized()):
    return
  if probe_gpu() is None:
    restrict_to_cpu()


def learner_device(choice: str = "auto") -> jax.Device:
  """The device the learner of THIS process computes on (may start jax's backends here).

  With "cpu" the whole process is kept on the CPU (`restrict_to_cpu`) when no backend has
  started yet: actors and evaluators use the CPU anyway, so nothing here needs a GPU backend.

  Args:
    choice: one of `LEARNER_DEVICES`.

  Raises:
    ValueError: `choice` is not one of `LEARNER_DEVICES`.
    NoAcceleratorError: `choice` is "gpu" and jax sees no GPU.
  """
  core.check_learner_device(choice)
  if choice == "cpu":
    restrict_to_cpu()
    return cpu_device()
  cpu_unless_gpu()
  gpus = _gpus_in_process()
  if gpus:
    return gpus[0]
  if choice == "gpu":
    raise no_gpu_error()
  return cpu_device()


def restrict_to_cpu() -> bool:
  """Makes this process's jax use the CPU only, if its backends have not started yet (then no
  GPU backend is ever started and no GPU memory reserved here). Returns whether it could."""
  from jax._src import xla_bridge  # pylint: disable=g-import-not-at-top
  if xla_bridge.backends_are_initialized():
    return False
  jax.config.update("jax_platforms", "cpu")
  return True


def started_platforms() -> List[str]:
  """The platforms whose jax backend this process has started ([] before any)."""
  from jax._src import xla_bridge  # pylint: disable=g-import-not-at-top
  if not xla_bridge.backends_are_initialized():
    return []
  return sorted(xla_bridge.backends())


_PROBE = ("import jax\ntry:\n  d = jax.devices('gpu')\nexcept RuntimeError:\n  d = []\n"
          "print(repr(d[0]) if d else '')\n")


def probe_gpu(timeout_s: float = 120.0, env: Optional[Mapping[str, str]] = None
              ) -> Optional[str]:
  """The first GPU a new process with environment `env` (default: this one's) would see (its
  repr), or None.

  Asked in a child process so that this one starts no GPU backend and reserves no GPU memory (a
  `local_mp` launcher runs no learner). Instant (no child) when no CUDA backend is installed.
  """
  if not cuda_installed():
    return None
  env = {**(os.environ if env is None else env), "XLA_PYTHON_CLIENT_PREALLOCATE": "false",
         "TF_CPP_MIN_LOG_LEVEL": "3"}
  try:
    proc = subprocess.run([sys.executable, "-c", _PROBE], env=env, capture_output=True,
                          text=True, timeout=timeout_s, check=False)
  except subprocess.TimeoutExpired:
    return None
  out = proc.stdout.strip().splitlines()
  return out[-1] if proc.returncode == 0 and out and out[-1] else None


def check_learner_device(choice: str, in_process: bool, name: str = "learner_device") -> None:
  """Fails early (before a run writes anything) when `choice` cannot be met.

  Args:
    choice: one of `LEARNER_DEVICES`.
    in_process: the learner will run in this process (`local`, `local_mt`): look here; else
      (`local_mp`) ask a child process with this environment (`probe_gpu`).
    name: how the error names the setting (e.g. "--learner-device").

  Raises:
    ValueError: unknown `choice`.
    NoAcceleratorError: "gpu" and jax sees no GPU.
  """
  core.check_learner_device(choice, name)
  if choice != "gpu":
    return
  if in_process:
    cpu_unless_gpu()
  if not (_gpus_in_process() if in_process else probe_gpu()):
    raise no_gpu_error(name)


def device_name(device: jax.Device) -> str:
  """``"<platform>:<id>"``, e.g. "cpu:0", "gpu:0"."""
  return f"{device.platform}:{device.id}"


def cores() -> int:
  """CPUs this process may run on (its affinity mask)."""
  try:
    return len(os.sched_getaffinity(0))
  except AttributeError:  # not Linux
    return os.cpu_count() or 1


def learner_threads(num_actors: int, num_cores: Optional[int] = None) -> int:
  """Threads for the learner's TF/OpenMP pools: the cores the actors do not take, >= 1."""
  return max(1, (cores() if num_cores is None else int(num_cores)) - int(num_actors))


def node_env(group: str, learner_device_choice: str, num_actors: int,
             base_env: Optional[Mapping[str, str]] = None,
             num_cores: Optional[int] = None) -> Dict[str, str]:
  """The environment overrides of a `local_mp` node of `group` (see the module docstring).

  Args:
    group: the node's group (`launch.distributed.GROUPS`).
    learner_device_choice: the run's `learner_device`.
    num_actors: actor nodes in the program.
    base_env: the environment the node inherits (XLA_FLAGS is extended, not replaced);
      default `os.environ`.
    num_cores: default `cores()`.

  Raises:
    ValueError: unknown `learner_device_choice`.
  """
  core.check_learner_device(learner_device_choice)
  base = os.environ if base_env is None else base_env
  if group == LEARNER_GROUP:
    n = str(learner_threads(num_actors, num_cores))
    env = {"TF_NUM_INTRAOP_THREADS": n, "OMP_NUM_THREADS": n}
    if "MALLOC_ARENA_MAX" not in base:  # a user's own setting wins
      env["MALLOC_ARENA_MAX"] = LEARNER_MALLOC_ARENA_MAX
    if learner_device_choice == "cpu":
      env.update(CPU_ONLY_ENV)
    return env
  flags = base.get("XLA_FLAGS", "")
  if ONE_THREAD_XLA_FLAG not in flags.split():
    flags = f"{flags} {ONE_THREAD_XLA_FLAG}".strip()
  return {**CPU_ONLY_ENV, "XLA_FLAGS": flags, "TF_NUM_INTRAOP_THREADS": "1",
          "TF_NUM_INTEROP_THREADS": "1", "OMP_NUM_THREADS": "1"}


def describe_process() -> Dict[str, object]:
  """What a node reports about its own placement (tests, `status()`): the environment
  variables `node_env` sets, the jax platforms started here and the default device."""
  keys = ("JAX_PLATFORMS", "CUDA_VISIBLE_DEVICES", "XLA_FLAGS", "TF_NUM_INTRAOP_THREADS",
          "TF_NUM_INTEROP_THREADS", "OMP_NUM_THREADS")
  return {"pid": os.getpid(), "env": {k: os.environ.get(k) for k in keys},
          "started_platforms": started_platforms()}
