"""The compression study (studies/compression.py) on a hand-built CartPole
controller and the Pareto front on hand-made tables (fidelity and executions:
tests/quantization/test_fidelity.py, test_execution.py)."""
import math

import numpy as np
import pytest

from actorq.components.acting import actors
from actorq.components.envs import environments
from actorq.quantization import network_spec as ns
from actorq.quantization import execution as qx
from actorq.quantization import fidelity as qf
from actorq.studies import compression as cs


def controller():
  """A 4-16-2 ReLU Q-network whose greedy action is `v . obs > 0` with
  v = (0.1, 0.5, 1, 1) (500 on CartPole-v1), plus a hidden unit with weight -20 whose
  bias -100 keeps it at 0 on every CartPole state: it only inflates a per-tensor scale
  (2-bit per-tensor flushes every other weight of that layer to 0; per-channel does not)."""
  rng = np.random.default_rng(0)
  v = np.array([0.1, 0.5, 1.0, 1.0], np.float32)
  w0 = rng.normal(0, 0.05, (4, 16)).astype(np.float32)
  w0[:, 0], w0[:, 1], w0[:, 2] = v, -v, [-20.0, 0, 0, 0]
  b0 = np.zeros(16, np.float32)
  b0[2] = -100.0
  w1 = rng.normal(0, 0.01, (16, 2)).astype(np.float32)
  w1[0], w1[1], w1[2] = [-1.0, 1.0], [1.0, -1.0], [0.0, 0.0]
  return ns.mlp(4, [16], 2), {"dense_0": {"w": w0, "b": b0},
                              "dense_1": {"w": w1, "b": np.zeros(2, np.float32)}}


def env_fn(seed):
  return environments.make_environment("gym:CartPole-v1", seed=seed)


@pytest.fixture(scope="module")
def study():
  spec, params = controller()
  semantics = qf.OutputSemantics("q_values", actors.greedy, temperature=1.0)
  ctx = cs.StudyContext(params, spec, env_fn, semantics, seeds=[3, 4, 5], latency_repeats=20)
  settings = [s for s in qx.sweep_settings(spec, [8, 2], ["per-channel", "per-tensor"], [0.0])]
  rows = cs.run_study(ctx, settings)
  return {r["setting"]: r for r in rows}, settings


def test_sweep_settings_and_executions(study):
  rows, settings = study
  assert [s.name for s in settings] == ["fp32", "int8", "int8/tensor", "int2", "int2/tensor"]
  assert [s.execution for s in settings] == ["jax-fp32", "litert-int8", "litert-int8",
                                             "simulated", "simulated"]
  assert rows["int2"]["simulated"] and not rows["int8"]["simulated"]
  assert "simulated" in rows["int2"]["notes"]
  for r in rows.values():
    assert set(cs.ROW_COLUMNS) <= set(r) and r["episodes"] == 3


def test_int8_per_channel_keeps_the_policy_and_2bit_per_tensor_breaks_it(study):
  rows, _ = study
  assert rows["fp32"]["return_mean"] == 500.0
  assert rows["int8"]["agreement"] >= 0.98 and rows["int8"]["return_mean"] >= 450
  assert rows["int8"]["kl"] < 1e-3
  assert rows["int2/tensor"]["return_mean"] < 100 and rows["int2/tensor"]["agreement"] < 0.8
  assert rows["int2/tensor"]["paired_diff_mean"] < -400
  assert rows["int2/tensor"]["kl"] > rows["int2"]["kl"] > rows["int8"]["kl"]


def test_paired_seeds_are_identical_across_settings(study):
  rows, _ = study
  firsts = {name: [(e.seed, e.first_observation) for e in r["_episodes"]]
            for name, r in rows.items()}
  assert [s for s, _ in firsts["fp32"]] == [3, 4, 5]
  assert len({d for _, d in firsts["fp32"]}) == 3  # different seeds, different starts
  for name, eps in firsts.items():
    assert eps == firsts["fp32"], name


def test_bytes_and_latency_ratio(study):
  rows, _ = study
  fp32 = rows["fp32"]
  assert fp32["stored_bytes"] == 4 * (64 + 16 + 32 + 2) and fp32["latency_ratio"] == 1.0
  # int8 per channel: 96 weight bytes, 18 scales and 18 biases of 4 bytes.
  assert rows["int8"]["stored_bytes"] == 96 + 4 * 18 + 4 * 18
  assert rows["int8/tensor"]["stored_bytes"] == 96 + 4 * 2 + 4 * 18
  assert rows["int8"]["runtime_bytes"] == rows["int8"]["stored_bytes"]
  for r in rows.values():
    assert r["latency_us"] > 0 and math.isfinite(r["latency_ratio"])


def test_pareto_front_on_a_hand_made_table():
  # (cost, value): A dominates B; C and D trade off; E ties A; F has NaN.
  costs = [1.0, 2.0, 3.0, 0.5, 1.0, float("nan"), 4.0]
  values = [10.0, 9.0, 12.0, 5.0, 10.0, 20.0, 12.0]
  assert cs.pareto_front(costs, values) == [True, False, True, True, True, False, False]
  assert cs.pareto_front([], []) == []


def test_summarize_over_runs():
  def row(name, ret, lat, nbytes):
    return {"setting": name, "weights": "int", "bits": 8, "granularity": "per-channel",
            "sparsity": 0.0, "execution": "litert-int8", "simulated": False,
            "stored_bytes": nbytes, "stored_ratio": nbytes / 100, "latency_us": lat,
            "latency_ratio": lat / 10, "return_mean": ret, "return_min": ret - 1,
            "paired_diff_mean": 0.0, "agreement": 1.0, "kl": 0.0, "action_distance": 0.0,
            "notes": ""}
  rows = cs.summarize({"s0": [row("fp32", 100, 10, 100), row("int8", 90, 2, 25)],
                       "s1": [row("fp32", 200, 12, 100), row("int8", 210, 4, 25)]})
  assert [r["setting"] for r in rows] == ["fp32", "int8"]
  assert rows[0]["return_mean"] == 150 and rows[0]["return_std_over_runs"] == 50
  assert rows[1]["latency_us"] == 3 and rows[1]["runs"] == 2 and rows[1]["return_min"] == 89
  assert rows[1]["pareto_bytes"] and not rows[0]["pareto_bytes"]  # same mean, fewer bytes
