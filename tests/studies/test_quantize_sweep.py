"""`actorq quantize --sweep` / `--search` end to end on tiny trained CartPole runs (one
plain, one trained with `qat_bits=4`), and their bad input."""
import csv
import json
import math

import numpy as np
import pytest

from actorq.agents.dqn import networks as dqn_networks
from actorq.cli import main as cli
from actorq.components.envs import environments
from actorq.agents import registry
from actorq.launch import spec as spec_lib
from actorq.quantization import forward, mixed, ptq, qat
from actorq.quantization import network_spec as ns
from actorq.testing.cli import run_cli


_main = run_cli


def _rows(path):
  with open(path, newline="") as f:
    return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
  root = tmp_path_factory.mktemp("runs")
  common = ["train", "--steps", "1000", "--eval-every", "1000", "--eval-episodes", "1",
            "--no-progress", "--set", "hidden_sizes=[16]", "--set", "min_replay_size=200"]
  assert cli.main(common + ["--logdir", str(root / "plain")]) == 0
  assert cli.main(common + ["--logdir", str(root / "qat4"), "--set", "qat_bits=4"]) == 0
  return root


@pytest.mark.slow  # trains two small runs (module fixture)
def test_sweep_files_columns_bytes_and_paired_seeds(runs, capsys, tmp_path):
  out = tmp_path / "sweep"
  code, stdout, _ = _main(["quantize", "--checkpoint", str(runs / "plain"), "--sweep", "bits=8,2",
                           "--granularity", "per-channel,per-tensor", "--sparsity", "0,0.9",
                           "--seeds", "7,8", "--latency-repeats", "10", "--out", str(out)],
                          capsys)
  assert code == 0, stdout
  for name in ("sweep.csv", "episodes.csv", "summary.csv", "table.md", "sweep.png", "sweep.json"):
    assert (out / name).stat().st_size > 0, name
  rows = {r["setting"]: r for r in _rows(out / "sweep.csv")}
  assert list(rows) == ["fp32", "int8", "int8/tensor", "int8+p0.9", "int8/tensor+p0.9", "int2",
                        "int2/tensor", "int2+p0.9", "int2/tensor+p0.9"]
  header = list(next(iter(rows.values())))
  for column in ("stored_bytes", "latency_us", "wall_us", "cpu_us", "return_mean",
                 "paired_diff_mean", "agreement", "kl", "execution", "simulated", "notes",
                 "latency_ratio"):
    assert column in header
  assert rows["int8"]["execution"] == "litert-int8" and rows["int8"]["simulated"] == "False"
  assert rows["int2"]["execution"] == "simulated" and rows["int2"]["simulated"] == "True"
  assert "SIMULATED" in (out / "table.md").read_text() and "SIMULATED" in stdout
  # Stored bytes of int8 at sparsity 0.9 (per channel): per layer a presence bitmask of
  # ceil(n / 8) bytes plus one byte per kept weight, 4-byte scales and biases.
  _, state, _ = registry.restore_run(str(runs / "plain"))
  params = state["policy_params"]
  want = 0
  for name in ("dense_0", "dense_1"):
    w = np.asarray(params[name]["w"], np.float32)
    keep = np.ones(w.size, bool)
    keep[np.argsort(np.abs(w).reshape(-1), kind="stable")[:round(0.9 * w.size)]] = False
    q, _, _ = ptq.quantize_array(np.where(keep.reshape(w.shape), w, 0), 8, True, 1)
    want += math.ceil(w.size / 8) + int(np.count_nonzero(q)) + 8 * w.shape[1]
  assert int(rows["int8+p0.9"]["stored_bytes"]) == want
  # DQN's default dueling head: the last layer has A + 1 = 3 outputs [V, A_1, A_2].
  assert int(rows["int8"]["stored_bytes"]) == (4 * 16 + 16 * 3) + 8 * (16 + 3)
  assert int(rows["fp32"]["stored_bytes"]) == 4 * (4 * 16 + 16 + 16 * 3 + 3)
  # Paired seeds: the same seeds and first observations in every setting.
  episodes = _rows(out / "episodes.csv")
  by_setting = {}
  for e in episodes:
    by_setting.setdefault(e["setting"], []).append((e["seed"], e["first_observation"]))
  assert len(by_setting) == 9
  for name, eps in by_setting.items():
    assert eps == by_setting["fp32"] and [s for s, _ in eps] == ["7", "8"], name
  summary = _rows(out / "summary.csv")
  assert [r["setting"] for r in summary] == list(rows)
  assert any(r["pareto_bytes"] == "True" for r in summary)
  data = json.loads((out / "sweep.json").read_text())
  assert data["evaluation_seeds"] == [7, 8] and data["checkpoints"][0]["qat_bits"] is None


@pytest.mark.slow  # trains two small runs (module fixture)
def test_sweep_reuses_a_checkpoints_rows_only_for_the_same_options(runs, capsys, tmp_path):
  out = tmp_path / "sweep"
  base = ["quantize", "--sweep", "bits=8,2", "--latency-repeats", "5", "--out", str(out)]
  code, stdout, _ = _main(base + ["--checkpoint", str(runs / "plain"), "--seeds", "7"], capsys)
  assert code == 0, stdout
  first = {r["setting"]: r for r in _rows(out / "sweep.csv")}
  cached = json.loads((out / "runs" / "plain.json").read_text())
  assert [r["setting"] for r in cached["rows"]] == ["fp32", "int8", "int2"]
  assert cached["key"]["seeds"] == [7] and cached["key"]["learner_steps"] >= 0
  # A folder holding a finished report is not replaced without asking (issue 56).
  before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
  code, _, err = _main(base + ["--checkpoint", str(runs / "plain"), str(runs / "qat4"),
                               "--seeds", "7"], capsys)
  assert code == 2 and err == (f"actorq: error: --out {out} already holds a report of 'actorq "
                               "quantize' (sweep.json, table.md); give another --out, or add "
                               "--overwrite to replace it\n"), err
  assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before
  base.append("--overwrite")
  # The same options with a checkpoint added: plain is reused as it was, qat4 computed.
  code, stdout, _ = _main(base + ["--checkpoint", str(runs / "plain"), str(runs / "qat4"),
                                  "--seeds", "7"], capsys)
  assert code == 0, stdout
  assert "plain: reused 3 settings" in stdout and "qat4: reused" not in stdout
  rows = _rows(out / "sweep.csv")
  again = {r["setting"]: r for r in rows if r["run"] == "plain"}
  assert again == {k: dict(v) for k, v in first.items()}  # every value, latency included
  assert sorted({r["run"] for r in rows}) == ["plain", "qat4"]
  assert len(_rows(out / "episodes.csv")) == 6
  # Other evaluation seeds: nothing reused. A broken file: recomputed, not an error.
  code, stdout, _ = _main(base + ["--checkpoint", str(runs / "plain"), "--seeds", "8"], capsys)
  assert code == 0 and "reused" not in stdout
  assert {e["seed"] for e in _rows(out / "episodes.csv")} == {"8"}
  (out / "runs" / "plain.json").write_text("{not json")
  code, stdout, _ = _main(base + ["--checkpoint", str(runs / "plain"), "--seeds", "8"], capsys)
  assert code == 0 and "reused" not in stdout
  assert json.loads((out / "runs" / "plain.json").read_text())["key"]["seeds"] == [8]


@pytest.mark.slow  # trains two small runs (module fixture)
def test_qat_run_is_evaluated_with_its_training_quantizer(runs, capsys, tmp_path):
  """A qat_bits=4 run: the sweep's int4 setting (simulated) holds exactly the weights the
  QAT forward computed with, and runs the network the learner trained."""
  run_spec, state, _ = spec_lib.load_run(str(runs / "qat4"))
  assert run_spec.config["qat_bits"] == 4
  params = state["policy_params"]
  builder = run_spec.make_builder()
  env = environments.make_environment(run_spec.env, seed=0)
  networks = builder.make_networks(environments.environment_spec(env))
  spec = networks.spec
  sim = mixed.simulated_params(mixed.compress(
      params, spec, mixed.PrecisionPolicy.uniform(spec, mixed.parse_choice("int4"))))
  fq = qat.fake_quant_params(params, bits=4)  # what DQNBuilder.make_learner applies
  for name in sim:
    np.testing.assert_array_equal(np.asarray(fq[name]["w"]), sim[name]["w"])
  obs = np.random.default_rng(0).normal(size=(5, 4)).astype(np.float32)
  q_sim = forward.forward(sim, spec, obs)
  if networks.dueling:  # the spec's outputs are [V, A_1..A_n]; the network returns Q
    q_sim = dqn_networks.dueling_q(q_sim)
  np.testing.assert_allclose(np.asarray(networks.network.apply(fq, obs)),
                             np.asarray(q_sim), rtol=1e-6, atol=1e-6)
  out = tmp_path / "both"
  code, stdout, _ = _main(["quantize", "--checkpoint", str(runs), "--sweep", "bits=4",
                           "--seeds", "1", "--latency-repeats", "5", "--out", str(out)], capsys)
  assert code == 0
  assert "trained with QAT at 4 bits" in stdout
  assert "QAT at 4 bits" in (out / "table.md").read_text()
  summary = {r["setting"]: r for r in _rows(out / "summary.csv")}
  assert summary["int4"]["runs"] == "2" and summary["fp32"]["runs"] == "2"


@pytest.mark.slow  # trains two small runs (module fixture)
def test_search_writes_a_loadable_policy(runs, capsys, tmp_path):
  out = tmp_path / "search"
  code, stdout, _ = _main(["quantize", "--checkpoint", str(runs / "plain"), "--search",
                           "--latency-budget", "5", "--size-budget", "0.5",
                           "--choices", "fp32,int8,int4", "--calibration-episodes", "1",
                           "--seeds", "3", "--latency-repeats", "5", "--latency-clock", "cpu",
                           "--out", str(out)], capsys)
  assert code == 0, stdout
  data = json.loads((out / "precision_policy.json").read_text())
  assert data["measured"]["meets_budget"] is True
  assert data["measured"]["stored_bytes"] <= 0.5 * data["budget"]["fp32_stored_bytes"]
  assert all(layer["why"].startswith(layer["choice"] + ":") for layer in data["layers"])
  _, state, _ = registry.restore_run(str(runs / "plain"))
  # DQN's default dueling head: 3 outputs [V, A_1, A_2].
  policy = mixed.load(str(out / "precision_policy.json"), ns.mlp(4, [16], 3))
  assert len(policy.layers) == 2
  trials = _rows(out / "search_trials.csv")
  assert trials[0]["phase"] == "start" and trials[-1]["phase"] == "final"
  assert {r["setting"] for r in _rows(out / "search_eval.csv")} >= {"fp32", "search", "int8"}
  assert len(_rows(out / "search_latency.csv")) == 4  # 2 layers: every float/int8 pattern


@pytest.mark.parametrize("extra,fragment", [
    (["--sweep", "bits=9"], "--sweep bit width '9' is not supported"),
    (["--sweep", "8,4"], "--sweep '8,4' not understood"),
    (["--sweep", "bits=8", "--granularity", "per-row"], "--granularity 'per-row' unknown"),
    (["--sweep", "bits=8", "--sparsity", "1.0"], "--sparsity '1.0' is outside [0, 1)"),
    (["--sweep", "bits=8", "--seeds", "5-1"], "--seeds 5-1: range '5-1' goes down"),
    (["--search"], "--search needs --latency-budget"),
    (["--search", "--size-budget", "0.5", "--choices", "int9"], "--choices: precision choice"),
    (["--search", "--sweep", "bits=8"], "--sweep and --search are separate studies"),
    (["--sensitivity", "--sweep", "bits=8"], "--sweep and --sensitivity are separate studies"),
    (["--sweep", "bits=8", "--latency-repeats", "0"], "--latency-repeats must be a positive"),
])
def test_bad_input_one_line_exit_2_nothing_written(capsys, tmp_path, extra, fragment):
  """Checked before any checkpoint is read (the run directory need not exist)."""
  out = tmp_path / "never"
  code, _, err = _main(["quantize", "--checkpoint", str(tmp_path / "run"), "--out", str(out)]
                       + extra, capsys)
  assert code == 2 and fragment in err, err
  assert err.strip().count("\n") == 0 and "Traceback" not in err
  assert not out.exists()


@pytest.mark.slow  # trains two small runs (module fixture)
def test_sensitivity_study_rows_and_bias_correction(runs, capsys, tmp_path):
  out = tmp_path / "sensitivity"
  code, stdout, _ = _main(["quantize", "--checkpoint", str(runs / "plain"), "--sensitivity",
                           "--seeds", "7,8", "--latency-repeats", "10",
                           "--calibration-episodes", "1", "--out", str(out)], capsys)
  assert code == 0, stdout
  rows = {r["setting"]: r for r in _rows(out / "sweep.csv")}
  # hidden_sizes=[16]: layers dense_0 (input) and dense_1 (the dueling head).
  assert list(rows) == [
      "fp32", "fp16", "int8", "int8 weights only", "int8 bias-corrected",
      "int8 weights only, bias-corrected", "int8 GPTQ, bias-corrected",
      "int8 weights only, GPTQ, bias-corrected", "only dense_0 int8", "only dense_1 int8",
      "int8 but dense_0 fp32", "int8 but dense_1 fp32"]
  assert float(rows["fp32"]["agreement"]) == 1.0 and float(rows["fp32"]["q_regret"]) == 0.0
  assert all(float(r["q_regret"]) >= 0.0 for r in rows.values())  # fp32's argmax is best
  # Bias correction changes biases only: the same stored bytes as the plain int8 row.
  assert rows["int8 bias-corrected"]["stored_bytes"] == rows["int8"]["stored_bytes"]
  # GPTQ rounding picks other int8 values under the same scales: the same bytes again.
  assert rows["int8 GPTQ, bias-corrected"]["stored_bytes"] == rows["int8"]["stored_bytes"]
  assert rows["int8 GPTQ, bias-corrected"]["execution"] == "litert-int8"
  assert rows["int8 weights only"]["execution"] == "simulated"
  # "only <layer> int8" and "int8 but <other> fp32" are the same policy with two layers.
  assert rows["only dense_0 int8"]["agreement"] == rows["int8 but dense_1 fp32"]["agreement"]
  text = (out / "sensitivity.md").read_text()
  assert "agreement median [min, max]" in text and "| int8 bias-corrected |" in text


@pytest.mark.slow  # trains two small runs (module fixture)
def test_bad_checkpoints(runs, capsys, tmp_path):
  out = tmp_path / "never"
  code, _, err = _main(["quantize", "--checkpoint", str(tmp_path / "nope"), "--sweep", "bits=8",
                        "--out", str(out)], capsys)
  assert code == 2 and "is neither a run directory" in err and not out.exists()
  code, _, err = _main(["quantize", "--checkpoint", str(runs), "--search", "--size-budget", "0.5",
                        "--out", str(out)], capsys)
  assert code == 2 and "--search takes one checkpoint, got 2 runs" in err and not out.exists()
  code, _, err = _main(["quantize", "--checkpoint", str(runs / "plain"), str(runs / "qat4")],
                       capsys)
  assert code == 2 and "takes one run directory unless --sweep" in err
