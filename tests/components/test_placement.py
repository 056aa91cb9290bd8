"""Placement: the learner on its device, actors' runtimes on the CPU, local_mp node environments
(CPU only and one thread for every node but the learner)."""
import json
import os
import subprocess
import sys
import textwrap

import jax
import numpy as np
import pytest

from actorq import core
from actorq.components import placement
from actorq.quantization import network_spec as ns
from actorq.quantization import payload as pl
from actorq.quantization import runtimes

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NOT_LEARNER = ("actor", "evaluator", "replay", "counter", "limiter")
# The launcher's environment as on a GPU machine: GPU 0 visible, no platform restriction.
GPU_MACHINE_ENV = {"CUDA_VISIBLE_DEVICES": "0", "XLA_FLAGS": "--xla_cpu_enable_fast_math=false"}


@pytest.mark.parametrize("group", NOT_LEARNER)
@pytest.mark.parametrize("choice", core.LEARNER_DEVICES)
def test_every_node_but_the_learner_is_cpu_only_with_one_thread(group, choice):
  env = placement.node_env(group, choice, num_actors=3, base_env=GPU_MACHINE_ENV, num_cores=16)
  assert env["JAX_PLATFORMS"] == "cpu" and env["CUDA_VISIBLE_DEVICES"] == ""
  assert env["XLA_FLAGS"] == "--xla_cpu_enable_fast_math=false --xla_cpu_multi_thread_eigen=false"
  for key in ("TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS", "OMP_NUM_THREADS"):
    assert env[key] == "1", key


def test_the_learner_node_keeps_the_gpu_unless_told_cpu():
  for choice in ("auto", "gpu"):
    env = placement.node_env("learner", choice, num_actors=12, base_env=GPU_MACHINE_ENV,
                             num_cores=16)
    assert env == {"TF_NUM_INTRAOP_THREADS": "4", "OMP_NUM_THREADS": "4", "MALLOC_ARENA_MAX": "1"}
  env = placement.node_env("learner", "cpu", num_actors=12, base_env=GPU_MACHINE_ENV,
                           num_cores=16)
  assert env["JAX_PLATFORMS"] == "cpu" and env["CUDA_VISIBLE_DEVICES"] == ""
  assert placement.learner_threads(num_actors=4, num_cores=2) == 1


def test_the_learner_keeps_one_malloc_arena_unless_the_launcher_sets_one():
  for choice in core.LEARNER_DEVICES:
    assert placement.node_env("learner", choice, 1, base_env={}, num_cores=2)[
        "MALLOC_ARENA_MAX"] == "1"
    assert "MALLOC_ARENA_MAX" not in placement.node_env(
        "learner", choice, 1, base_env={"MALLOC_ARENA_MAX": "4"}, num_cores=2)
  for group in NOT_LEARNER:  # only the learner's steps run in a thread of their own
    assert "MALLOC_ARENA_MAX" not in placement.node_env(group, "cpu", 1, base_env={}, num_cores=2)


def test_an_unknown_choice_is_one_line():
  with pytest.raises(ValueError, match=r"^learner_device must be one of auto, gpu, cpu; "
                                       r"got 'tpu'$"):
    placement.node_env("actor", "tpu", num_actors=1)


def test_learner_device_here():
  assert placement.learner_device("cpu") == placement.cpu_device()
  assert placement.cpu_device().platform == "cpu"
  gpus = [d for d in jax.devices() if d.platform == "gpu"]
  assert placement.learner_device("auto") == (gpus[0] if gpus else placement.cpu_device())
  if not gpus:  # the tests run with JAX_PLATFORMS=cpu (conftest): no GPU whatever the machine
    with pytest.raises(placement.NoAcceleratorError) as e:
      placement.learner_device("gpu")
    message = str(e.value)
    assert message.startswith("learner_device gpu: jax sees no GPU here (")
    assert message.endswith("; allowed here: auto, cpu") and "\n" not in message


@pytest.mark.parametrize("precision", ["fp32", "bf16", "simulated-int8", "int8"])
def test_runtimes_say_they_compute_on_the_cpu(precision):
  spec = ns.mlp(4, [8], 2)
  rng = np.random.default_rng(0)
  params = {n: {k: rng.normal(0, 0.1, s).astype(np.float32) for k, s in shp.items()}
            for n, shp in pl.expected_shapes(spec).items()}
  runtime = runtimes.make_runtime(precision, spec)
  runtime.load(pl.make_payload(params, spec, runtime.payload_precision, 0))
  assert runtime(np.zeros((1, 4), np.float32)).shape == (1, 2)
  devices = runtime.devices()
  if precision == "int8":
    assert devices == ("cpu",)
  else:
    assert devices == (str(placement.cpu_device()),)


_FAKE_ACCELERATOR = textwrap.dedent("""
    import json, os
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=2"
    os.environ["JAX_PLATFORMS"] = "cpu"
    import jax
    from actorq.agents.dqn import builder, config
    from actorq.components import placement
    from actorq.components.acting import variable_client as vc
    from actorq.launch import experiment, local

    accelerator = jax.devices("cpu")[1]  # stands in for the GPU the learner would get
    placement.learner_device = lambda choice="auto": accelerator
    made = []
    make_runtime = vc.make_runtime
    def recording_make_runtime(*args, **kwargs):
      made.append(make_runtime(*args, **kwargs))
      return made[-1]
    vc.make_runtime = recording_make_runtime
    seen = set()
    def on_learner_step(learner):
      seen.update(str(d) for x in jax.tree_util.tree_leaves(learner.get_variables(["policy"]))
                  for d in x.devices())
    cfg = config.DQNConfig(hidden_sizes=(16,), min_replay_size=50, actor_precision="fp32")
    result = local.run(experiment.ExperimentConfig(
        builder.DQNBuilder(cfg), "gym:CartPole-v1", num_steps=200, eval_every=200,
        eval_episodes=1), on_learner_step=on_learner_step)
    print(json.dumps({"learner": sorted(seen), "runtimes": [list(r.devices()) for r in made],
                      "learner_device": result.learner_device, "cpu": str(jax.devices()[0]),
                      "accelerator": str(accelerator)}))
""")


@pytest.mark.slow
def test_single_process_learner_on_its_device_actors_on_the_cpu(tmp_path):
  """A second XLA CPU device stands in for the GPU: `local.run` puts the learner's state on
  it (`jax.default_device`), while the actor's and evaluator's runtimes stay on CPU 0."""
  script = tmp_path / "fake_accelerator.py"
  script.write_text(_FAKE_ACCELERATOR)
  proc = subprocess.run([sys.executable, str(script)], cwd=ROOT, capture_output=True, text=True,
                        timeout=300, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
  assert proc.returncode == 0, proc.stderr[-3000:]
  got = json.loads(proc.stdout.strip().splitlines()[-1])
  assert got["learner"] == [got["accelerator"]] and got["learner_device"] == "cpu:1"
  assert len(got["runtimes"]) == 2  # the training actor's and the evaluator's
  assert all(devices == [got["cpu"]] for devices in got["runtimes"]), got


_FALLBACK = textwrap.dedent("""
    import json, sys
    import jax
    from actorq.components import placement
    placement.cuda_installed = lambda: True          # as after ACTORQ_GPU=1 ./dev setup
    placement.probe_gpu = lambda *a, **k: None if sys.argv[1] == "none" else "CudaDevice(id=0)"
    placement.cpu_unless_gpu()
    print(json.dumps(jax.config.jax_platforms))
""")


@pytest.mark.slow
@pytest.mark.parametrize("probe,platforms", [("none", "cpu"), ("gpu", None)])
def test_a_cuda_plugin_without_a_gpu_keeps_the_process_on_the_cpu(tmp_path, probe, platforms):
  """jax 0.4.23 with its CUDA plugin and no GPU starts no backend at all unless told
  JAX_PLATFORMS=cpu; `cpu_unless_gpu` (asked before any backend starts) says it for the
  process when the probe finds no GPU, and leaves jax alone when it finds one."""
  script = tmp_path / "fallback.py"
  script.write_text(_FALLBACK)
  env = {k: v for k, v in os.environ.items() if k != "JAX_PLATFORMS"}
  proc = subprocess.run([sys.executable, str(script), probe], cwd=ROOT, capture_output=True,
                        text=True, timeout=120, env=env)
  assert proc.returncode == 0, proc.stderr[-2000:]
  assert json.loads(proc.stdout.strip().splitlines()[-1]) == platforms
