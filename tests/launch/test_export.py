"""`actorq export`: the standalone .tflite and its JSON; a subprocess with only ai_edge_litert
and numpy reproduces the actor's greedy actions on recorded observations."""
import dataclasses
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from ai_edge_litert.interpreter import Interpreter

from actorq.components import environments, evaluation
from actorq.launch import cli, run_dir
from actorq.quantization import network_spec as ns
from actorq.quantization import payload as pl
from actorq.quantization import runtimes
from actorq.quantization.runtimes import litert_runtime
from actorq.testing.cli import run_cli


def _params(spec, seed=0):
  rng = np.random.default_rng(seed)
  return {n: {k: rng.normal(0, 0.3, s).astype(np.float32) for k, s in shp.items()}
          for n, shp in pl.expected_shapes(spec).items()}


@pytest.mark.parametrize("precision", ["int8", "fp32"])
def test_standalone_model_runs_what_the_actor_runs(precision):
  spec = dataclasses.replace(ns.mlp(6, [32, 32], 3), input_scale=0.5)
  params = _params(spec)
  model = litert_runtime.standalone_model(params, spec, precision)
  obs = np.random.default_rng(1).normal(size=(5, 6)).astype(np.float32)
  interp = Interpreter(model_content=model)
  inp, out = interp.get_input_details()[0]["index"], interp.get_output_details()[0]["index"]
  interp.resize_tensor_input(inp, [5, 6])
  interp.allocate_tensors()
  interp.set_tensor(inp, obs)
  interp.invoke()
  got = interp.get_tensor(out)
  runtime = runtimes.make_runtime(precision, spec)
  runtime.load(pl.make_payload(params, spec, precision, 0))
  want = runtime(obs)
  tol = 1e-6 if precision == "int8" else 1e-4  # fp32: LiteRT vs XLA summation order
  np.testing.assert_allclose(got, want, atol=tol * np.abs(want).max())


def test_standalone_model_refuses_other_precisions():
  spec = ns.mlp(6, [8], 2)
  with pytest.raises(ValueError, match="int8 or fp32"):
    litert_runtime.standalone_model(_params(spec), spec, "fp16")


@pytest.mark.parametrize("argv,fragment", [
    (["export", "--checkpoint", "/nonexistent/run"], "/nonexistent/run"),
    (["export", "--checkpoint", "x", "--precision", "fp16"], "--precision"),
    (["export", "--checkpoint", "x", "--out", "policy.onnx"], "must end in .tflite"),
    (["export", "--checkpoint", "x", "--episodes", "0"], "--episodes"),
])
def test_bad_input_is_one_line_exit_2(argv, fragment, capsys):
  code, _, err = run_cli(argv, capsys)
  err = err.strip()
  assert code == 2 and len(err.splitlines()) == 1 and fragment in err, err


STANDALONE = textwrap.dedent("""
    import json, sys
    import numpy as np
    from ai_edge_litert.interpreter import Interpreter
    model, meta, obs_path, out_path = sys.argv[1:5]
    info = json.load(open(meta))
    obs = np.load(obs_path)
    interp = Interpreter(model_path=model)
    inp = interp.get_input_details()[0]["index"]
    out = interp.get_output_details()[0]["index"]
    interp.resize_tensor_input(inp, list(obs.shape))
    interp.allocate_tensors()
    interp.set_tensor(inp, obs.astype(np.float32))
    interp.invoke()
    y = interp.get_tensor(out)
    rule = info["action_rule"]
    assert rule["kind"] == "argmax", rule
    actions = np.argmax(y[:, 1:] if rule["dueling"] else y, axis=1).astype(np.int32)
    np.save(out_path, actions)
    print("modules:", sorted(m for m in ("jax", "actorq", "tensorflow") if m in sys.modules))
""")


@pytest.mark.slow
def test_export_round_trip_without_jax_or_actorq(tmp_path, capsys):
  run = tmp_path / "run"
  # A short run: export needs its checkpoint, not a good policy (the actions are compared).
  code = cli.main(["train", "--steps", "200", "--eval-every", "200", "--eval-episodes", "1",
                   "--logdir", str(run), "--no-progress", "--set", "min_replay_size=64",
                   "--set", "batch_size=32", "--set", "hidden_sizes=[32,32]"])
  assert code == 0
  capsys.readouterr()
  out = tmp_path / "deploy" / "policy.tflite"
  assert cli.main(["export", "--checkpoint", str(run), "--out", str(out), "--episodes",
                   "2"]) == 0
  printed = capsys.readouterr().out
  assert "greedy-action agreement" in printed
  meta = json.loads((tmp_path / "deploy" / "policy.json").read_text())
  assert meta["model"]["bytes"] == os.path.getsize(out) and meta["model"]["precision"] == "int8"
  assert meta["source"]["run"] == str(run) and meta["source"]["agent"] == "dqn"
  assert meta["observation_spec"]["shape"] == [4] and meta["action_spec"]["num_values"] == 2
  assert 0.0 <= meta["parity"]["greedy_action_agreement"] <= 1.0
  assert meta["scales"] and meta["normalisation"]["folded_into_model"]

  # The actor's actions on recorded observations (the int8 runtime, greedy selector).
  info, state, _ = run_dir.load(str(run))
  builder = run_dir.make_builder(info)
  env = environments.make_environment(info["env"], seed=5)
  env_spec = environments.environment_spec(env)
  networks = builder.make_networks(env_spec)
  policy = builder.make_policy(networks, env_spec, evaluation=True)
  actor = evaluation.fixed_policy_actor(state["policy_params"], networks.spec, "int8",
                                        policy.selector)
  observations, actions = [], []
  ts = env.reset()
  for _ in range(200):
    action = actor.select_action(ts.observation)
    observations.append(ts.observation)
    actions.append(int(action))
    ts = env.step(action)
    if ts.last():
      ts = env.reset()
  np.save(tmp_path / "obs.npy", np.stack(observations))
  script = tmp_path / "standalone.py"
  script.write_text(STANDALONE)
  # -I: isolated (no PYTHONPATH, no user site, not the test's cwd on sys.path).
  proc = subprocess.run([sys.executable, "-I", str(script), str(out),
                         str(tmp_path / "deploy" / "policy.json"), str(tmp_path / "obs.npy"),
                         str(tmp_path / "actions.npy")], capture_output=True, text=True,
                        cwd=str(tmp_path), timeout=120, check=False)
  assert proc.returncode == 0, proc.stderr
  assert "modules: []" in proc.stdout
  np.testing.assert_array_equal(np.load(tmp_path / "actions.npy"), np.array(actions))
