"""`actorq export`: the standalone .tflite and its JSON; a subprocess with only ai_edge_litert
and numpy reproduces the actor's greedy actions on recorded observations."""
import dataclasses
import hashlib
import json
import os
import resource
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from ai_edge_litert.interpreter import Interpreter

from actorq import core
from actorq.cli import main as cli
from actorq.components import fault_points
from actorq.components.envs import environments
from actorq.components import run_dir
from actorq.launch import spec as spec_lib
from actorq.quantization import bias_correction
from actorq.quantization import mixed
from actorq.quantization import network_spec as ns
from actorq.quantization import payload as pl
from actorq.quantization import runtimes
from actorq.quantization.runtimes import litert_runtime
from actorq.studies import reward_parity as evaluation
from actorq.testing.cli import run_cli


def _params(spec, seed=0):
  rng = np.random.default_rng(seed)
  return {n: {k: rng.normal(0, 0.3, s).astype(np.float32) for k, s in shp.items()}
          for n, shp in pl.expected_shapes(spec).items()}


def _run_model(model: bytes, obs: np.ndarray) -> np.ndarray:
  """The `.tflite` model run by ai_edge_litert on a batch of observations."""
  interp = Interpreter(model_content=model)
  inp, out = interp.get_input_details()[0]["index"], interp.get_output_details()[0]["index"]
  interp.resize_tensor_input(inp, list(obs.shape))
  interp.allocate_tensors()
  interp.set_tensor(inp, obs.astype(np.float32))
  interp.invoke()
  return interp.get_tensor(out)


MIXED = "mixed:fp16,int4+p0.5,int8"  # one label per layer of mlp(6, [32, 32], 3)


@pytest.mark.parametrize("precision", ["int8", "fp32", MIXED])
def test_standalone_model_runs_what_the_actor_runs(precision):
  spec = dataclasses.replace(ns.mlp(6, [32, 32], 3), input_scale=0.5)
  params = _params(spec)
  model = litert_runtime.standalone_model(params, spec, precision)
  obs = np.random.default_rng(1).normal(size=(5, 6)).astype(np.float32)
  got = _run_model(model, obs)
  runtime = runtimes.make_runtime(precision, spec)
  if precision == MIXED:
    runtime.load(mixed.make_payload(params, spec, mixed.policy_of(precision, spec), 0))
  else:
    runtime.load(pl.make_payload(params, spec, precision, 0))
  want = runtime(obs)
  tol = 1e-4 if precision == "fp32" else 1e-6  # fp32: LiteRT vs XLA summation order
  np.testing.assert_allclose(got, want, atol=tol * np.abs(want).max())


def test_standalone_mixed_model_holds_the_policys_weights():
  # int4+p0.5 layer: int8 tensor of 4-bit values, half of them exact zeros; the fp16 layer
  # float32 values that are fp16-representable; the model differs from the uniform int8 one.
  spec = ns.mlp(6, [32, 32], 3)
  params = _params(spec)
  model = litert_runtime.standalone_model(params, spec, MIXED)
  interp = Interpreter(model_content=model)
  tensors = {d["name"]: d for d in interp.get_tensor_details()}
  int8_weights = [interp.get_tensor(d["index"]) for d in tensors.values()
                  if d["dtype"] == np.int8 and d["shape"].size == 2]
  assert len(int8_weights) == 2  # the int4 and int8 layers; the fp16 layer is float
  four_bit = [w for w in int8_weights if np.abs(w).max() <= 7]
  assert len(four_bit) == 1 and np.mean(four_bit[0] == 0) >= 0.5
  assert model != litert_runtime.standalone_model(params, spec, "int8")


def test_standalone_model_refuses_other_precisions():
  spec = ns.mlp(6, [8], 2)
  with pytest.raises(ValueError, match="int8, fp32 or mixed"):
    litert_runtime.standalone_model(_params(spec), spec, "fp16")
  with pytest.raises(ValueError, match="2 parameter layers"):
    litert_runtime.standalone_model(_params(spec), spec, "mixed:int8,int8,int8")


@pytest.mark.parametrize("argv,fragment", [
    (["export", "--checkpoint", "/nonexistent/run"], "/nonexistent/run"),
    (["export", "--checkpoint", "x", "--precision", "fp16"], "--precision 'fp16' not allowed"),
    (["export", "--checkpoint", "x", "--precision", "mixed:int9,int8"], "'int9'"),
    (["export", "--checkpoint", "x", "--precision", "nothere.json"], "nothere.json"),
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


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory):
  """A short DQN CartPole run: export needs its checkpoint, not a good policy (the tests
  compare actions and outputs)."""
  run = tmp_path_factory.mktemp("export") / "run"
  code = cli.main(["train", "--steps", "200", "--eval-every", "200", "--eval-episodes", "1",
                   "--logdir", str(run), "--no-progress", "--set", "min_replay_size=64",
                   "--set", "batch_size=32", "--set", "hidden_sizes=[32,32]"])
  assert code == 0
  return run


def _policy_network(run):
  run_spec, state, _ = spec_lib.load_run(str(run))
  info, builder = run_spec.to_json(), run_spec.make_builder()
  env = environments.make_environment(run_spec.env, seed=5)
  env_spec = environments.environment_spec(env)
  networks = builder.make_networks(env_spec)
  return info, state, builder, env, env_spec, networks


def run_spec_policy(run):
  """The run's greedy evaluation policy."""
  _, _, builder, _, env_spec, networks = _policy_network(run)
  return builder.make_policy(networks, env_spec, evaluation=True)


@pytest.mark.slow
def test_export_round_trip_without_jax_or_actorq(trained_run, tmp_path, capsys):
  run = trained_run
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
  info, state, builder, env, env_spec, networks = _policy_network(run)
  policy = builder.make_policy(networks, env_spec, evaluation=True)
  # The actors' int8 payload has its biases corrected (issue 39); export calibrates on the
  # fp32 episode of `evaluation.CALIBRATION_SEED`, as `calibration_for` does.
  assert meta["bias_correction"]["calibration_env_seed"] == evaluation.CALIBRATION_SEED
  calibration = evaluation.calibration_for(
      state["policy_params"], networks.spec, policy.selector,
      lambda seed: environments.make_environment(info["env"], seed=seed), "int8")
  actor = evaluation.fixed_policy_actor(state["policy_params"], networks.spec, "int8",
                                        policy.selector, calibration=calibration)
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


@pytest.mark.slow
def test_export_of_a_per_layer_policy_file(trained_run, tmp_path, capsys):
  run = trained_run
  _, state, _, env, _, networks = _policy_network(run)
  spec, params = networks.spec, state["policy_params"]
  names = [l.name for l in spec.parameter_layers]
  assert len(names) == 3, names  # hidden_sizes=[32,32] and the Q head
  choices = [mixed.parse_choice(c) for c in ("fp16", "int4+p0.5", "int8")]
  policy = mixed.PrecisionPolicy(tuple(zip(names, choices)))
  policy_file = tmp_path / "precision_policy.json"
  mixed.save(str(policy_file), policy, spec)
  name = mixed.precision_name(policy)
  capsys.readouterr()
  assert cli.main(["export", "--checkpoint", str(run), "--precision", str(policy_file),
                   "--episodes", "2"]) == 0
  assert name in capsys.readouterr().out
  # Default --out: named by the policy's digest, as the sweep names its runs.
  out = run / "export" / f"policy-{runtimes.precision_slug(name)}.tflite"
  assert out.name.startswith("policy-mixed-") and len(out.name) == len("policy-mixed-") + 15
  meta = json.loads(out.with_suffix(".json").read_text())
  assert meta["model"]["precision"] == name and meta["model"]["bytes"] == os.path.getsize(out)
  assert mixed.from_json_dict(meta["precision_policy"], spec) == policy
  # Scales of the two integer layers only, one per output channel (32 units; the dueling
  # head's V and 2 advantages).
  assert [(s["layer"], len(s["scale"])) for s in meta["scales"]] == [(names[1], 32),
                                                                      (names[2], 3)]
  assert meta["scales"][0]["weights"] == "int4+p0.5 held in int8, per output channel"
  layers = mixed.compress(params, spec, policy)
  assert meta["stored_bytes"]["bytes"] == mixed.storage_report(layers)["bytes"]
  assert meta["parity"]["export_payload_bytes"] == mixed.payload_of(layers).nbytes
  assert 0.0 <= meta["parity"]["greedy_action_agreement"] <= 1.0

  # The file computes what the policy's actors compute (LiteRTMixedRuntime by name, the
  # integer layers' biases corrected on the calibration episode: issue 39).
  obs = np.stack([env.reset().observation for _ in range(16)]).astype(np.float32)
  runtime = runtimes.make_runtime(name, spec)
  selector = run_spec_policy(run).selector
  calibration = evaluation.calibration_for(
      params, spec, selector, lambda seed: environments.make_environment("gym:CartPole-v1",
                                                                         seed=seed), name)
  assert meta["bias_correction"]["calibration_observations"] == len(calibration)
  runtime.load(bias_correction.correct_payload(mixed.make_payload(params, spec, policy, 0),
                                               params, spec, calibration))
  want = runtime(obs)
  np.testing.assert_allclose(_run_model(out.read_bytes(), obs), want,
                             atol=1e-6 * np.abs(want).max())

  # The mixed: name gives the same model; a policy for another network is refused, nothing
  # written.
  by_name = tmp_path / "by_name.tflite"
  assert cli.main(["export", "--checkpoint", str(run), "--precision", name, "--out",
                   str(by_name), "--episodes", "1"]) == 0
  assert by_name.read_bytes() == out.read_bytes()
  capsys.readouterr()
  refused = tmp_path / "refused" / "p.tflite"
  assert cli.main(["export", "--checkpoint", str(run), "--precision", "mixed:int8,int8",
                   "--out", str(refused)]) == 2
  err = capsys.readouterr().err.strip()
  assert len(err.splitlines()) == 1 and "3 parameter layers" in err, err
  assert not refused.parent.exists()


def test_b10_a_failed_write_is_one_line_exit_1_and_keeps_the_previous_pair(trained_run,
                                                                           tmp_path, capsys):
  out = tmp_path / "deploy" / "policy.tflite"
  meta = tmp_path / "deploy" / "policy.json"
  argv = ["export", "--checkpoint", str(trained_run), "--out", str(out), "--episodes", "1"]
  code, _, err = run_cli(argv, capsys)
  assert code == 0, err
  model, report = out.read_bytes(), meta.read_text()
  info = json.loads(report)
  assert info["model"]["bytes"] == len(model)
  assert info["model"]["sha256"] == hashlib.sha256(model).hexdigest()  # the pair's link
  # The disk "fills" at half the model's size (RLIMIT_FSIZE: writes past it fail with
  # EFBIG, "File too large", as a full disk fails with ENOSPC).
  soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
  previous = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
  resource.setrlimit(resource.RLIMIT_FSIZE, (len(model) // 2, hard))
  try:
    code, _, err = run_cli(argv, capsys)
  finally:
    resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    signal.signal(signal.SIGXFSZ, previous)
  lines = err.strip().splitlines()
  assert code == 1 and len(lines) == 1, err
  assert lines[0].startswith(f"actorq: stopped: cannot write {out} and {meta}: File too large")
  assert "the files there before are kept as they were" in lines[0]
  assert out.read_bytes() == model and meta.read_text() == report  # the previous pair
  assert sorted(os.listdir(out.parent)) == ["policy.json", "policy.tflite"]


def test_an_export_stopped_right_before_its_write_keeps_the_previous_pair(trained_run, tmp_path,
                                                                          capsys, monkeypatch):
  out = tmp_path / "policy.tflite"
  argv = ["export", "--checkpoint", str(trained_run), "--out", str(out), "--episodes", "1"]
  assert run_cli(argv, capsys)[0] == 0
  before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
  monkeypatch.setattr(fault_points, "_PLAN", {"export_write": [(1, int(signal.SIGINT))]})
  monkeypatch.setattr(fault_points, "_SEEN", {})
  code, _, err = run_cli(argv + ["--precision", "fp32", "--out", str(out)], capsys)
  assert code == 130 and err.strip() == "actorq: interrupted", err
  assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_group_on_a_single_agent_run_is_one_line_exit_2(trained_run, tmp_path, capsys):
  out = tmp_path / "p.tflite"
  code, printed, err = run_cli(["export", "--checkpoint", str(trained_run), "--group", "shared",
                                "--out", str(out)], capsys)
  assert (code, printed) == (2, "")
  assert err == ("actorq: error: --group shared: gym:CartPole-v1 is a single-agent run; "
                 "--group names a parameter group of a multi-agent (pz:) run\n")
  assert not os.path.exists(out)


class _SpacesEnv:
  """A Gymnasium env with the given spaces (random observations, episodes of 10 steps)."""

  def __init__(self, observation_space, action_space):
    import gymnasium  # pylint: disable=import-outside-toplevel
    self.env = type("SpacesEnv", (gymnasium.Env,), {
        "reset": lambda s, seed=None, options=None: (
            gymnasium.Env.reset(s, seed=seed) or s.observation_space.sample(), {}),
        "step": lambda s, a: (s.observation_space.sample(), 1.0, False, False, {}),
    })()
    self.env.observation_space, self.env.action_space = observation_space, action_space


def _register_spaces_envs():
  import gymnasium  # pylint: disable=import-outside-toplevel
  from gymnasium import spaces  # pylint: disable=import-outside-toplevel
  envs = {
      "ActorqDictGrid-v0": (spaces.Dict({"pos": spaces.Box(-1, 1, (2,)),
                                         "mode": spaces.Discrete(3)}),
                            spaces.MultiDiscrete([3, 4])),
      "ActorqShifted-v0": (spaces.Box(-1, 1, (3,)), spaces.Discrete(3, start=-1)),
  }
  for env_id, (obs, act) in envs.items():
    if env_id not in gymnasium.registry:
      gymnasium.register(id=env_id, max_episode_steps=10, disable_env_checker=True,
                         entry_point=lambda o=obs, a=act, **_: _SpacesEnv(o, a).env)
  return envs


@pytest.mark.parametrize("env_id,fragment", [
    ("ActorqDictGrid-v0", "has observation space Dict('mode': Discrete(3), 'pos': "),
    ("ActorqShifted-v0", "has action space Discrete(3, start=-1) (acted as flat indices 0..2)"),
])
def test_b17_export_of_a_mapped_space_is_refused_in_one_line(env_id, fragment, tmp_path,
                                                             capsys):
  """Case B17: a model exported for Dict observations or MultiDiscrete (or shifted
  Discrete) actions took the adapter's flattened observation and gave flat action
  indices while its JSON said to feed raw observations: 0/40 of its greedy actions were
  the environment's. Such an export is refused in one line, exit 2, nothing written."""
  _register_spaces_envs()
  run = tmp_path / "run"
  code, _, err = run_cli(["train", "--env", f"gym:{env_id}", "--steps", "30", "--eval-every",
                          "30", "--eval-episodes", "1", "--set", "hidden_sizes=[8]",
                          "--set", "min_replay_size=20", "--set", "batch_size=4",
                          "--no-progress", "--logdir", str(run)], capsys)
  assert code == 0, err
  out = tmp_path / "out" / "policy.tflite"
  code, _, err = run_cli(["export", "--checkpoint", str(run), "--out", str(out),
                          "--episodes", "1"], capsys)
  assert code == 2 and err.count("\n") == 1, err
  assert err.startswith(f"actorq: error: actorq export: gym:{env_id} ") and fragment in err, err
  assert err.endswith(f"evaluate this run with: actorq eval --checkpoint {run}\n"), err
  assert not (tmp_path / "out").exists() and not (run / "export").exists()
