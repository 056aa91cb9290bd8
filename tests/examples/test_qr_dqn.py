"""QR-DQN composed outside the package (examples/qr_dqn/qr_dqn_agent.py): its loss against
a hand computation, and, from a copy in a folder outside the repository, `actorq train
--agent qr_dqn_agent:QRDQNBuilder` (single process and local_mp), eval, quantize (KL on
the quantile means) and export through the run's run.json."""
import csv
import importlib.util
import json
import os
import shutil
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from actorq import core
from actorq.components.acting import variable_client as vc
from actorq.components.envs import environments
from actorq.launch import experiment, local
from actorq.agents import registry
from actorq.quantization import execution as qx
from actorq.quantization import fidelity as qf
from actorq.studies import quantize as quantize_study
from actorq.testing.cli import run_cli

_SOURCE = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "qr_dqn",
                       "qr_dqn_agent.py")
AGENT = "qr_dqn_agent:QRDQNBuilder"
# The console script a user runs: its sys.path[0] is its own folder, not the cwd.
ACTORQ = os.path.join(os.path.dirname(sys.executable), "actorq")


def _import_under(name):
  spec = importlib.util.spec_from_file_location(name, _SOURCE)
  module = importlib.util.module_from_spec(spec)
  sys.modules[name] = module  # dataclasses look their module up
  spec.loader.exec_module(module)
  return module


# Imported under another name: the CLI tests below must import it from their copy's cwd.
qr = _import_under("qr_dqn_agent_under_test")


def _env():
  return dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", JAX_PLATFORMS="cpu")


# ---------------------------------------------------------------------------------------
# The loss, by hand.


def _two_items():
  """Two transitions, A = 2 actions, N = 2 quantiles (taus 0.25, 0.75), kappa = 1.

  Item 0: a = 1, theta(s, 1) = [0, 1]; r = 1, discount 1; at s' action 0 has the larger
  mean ([0, 2] vs [-5, -5]): T theta = [1, 3]. u_ij = T_j - theta_i = [[1, 3], [0, 2]],
  all >= 0, weights tau_i: 0.25 * mean(H(1), H(3)) + 0.75 * mean(H(0), H(2))
  = 0.25 * mean(0.5, 2.5) + 0.75 * mean(0, 1.5) = 0.375 + 0.5625 = 0.9375.
  Item 1: a = 0, theta(s, 0) = [2, 4]; r = 0, discount 0.5; s' picks action 1 ([2, 2]):
  T theta = [1, 1]. u = [[-1, -1], [-3, -3]], all < 0, weights 1 - tau_i:
  0.75 * H(1) + 0.25 * H(3) = 0.375 + 0.625 = 1.0.
  """
  dist_q_tm1 = jnp.array([[[7.0, 7.0], [0.0, 1.0]], [[2.0, 4.0], [9.0, 9.0]]])  # [B, A, N]
  dist_q_t = jnp.array([[[0.0, 2.0], [-5.0, -5.0]], [[-9.0, -9.0], [2.0, 2.0]]])
  return (dist_q_tm1, jnp.array([1, 0]), jnp.array([1.0, 0.0]), jnp.array([1.0, 0.5]),
          dist_q_t)


def test_quantile_huber_loss_matches_a_hand_computation_under_jit_and_vmap():
  args = _two_items()
  assert qr.quantile_midpoints(2).tolist() == [0.25, 0.75]
  loss = jax.jit(qr.qr_loss, static_argnums=5)(*args, 1.0)
  np.testing.assert_allclose(loss, (0.9375 + 1.0) / 2, rtol=1e-6)
  # vmap over batches of one item each: the per-item values.
  per_batch = jax.vmap(lambda *a: qr.qr_loss(*a, 1.0))(*(x[:, None] for x in args))
  np.testing.assert_allclose(per_batch, [0.9375, 1.0], rtol=1e-6)
  # kappa = 0: the plain quantile loss, |u| weighted: item 0 = 0.25 * 2 + 0.75 * 1 = 1.25.
  np.testing.assert_allclose(qr.qr_loss(*(x[:1] for x in args), 0.0), 1.25, rtol=1e-6)


def test_the_example_is_a_builder_by_the_contract():
  builder = qr.QRDQNBuilder()
  assert isinstance(builder, core.Builder) and qr.QRDQNBuilder.config_class is qr.QRDQNConfig
  env = environments.make_environment("gym:CartPole-v1", seed=0)
  spec = environments.environment_spec(env)
  env.close()
  networks = builder.make_networks(spec)
  assert networks.spec.output_size == 2 * 51
  outputs = builder.policy_outputs(networks, spec)
  y = np.arange(102, dtype=np.float32)[None]
  assert outputs.kind == "q_values"
  np.testing.assert_allclose(outputs.values(y), [[25.0, 76.0]])  # means of 0..50, 51..101
  action, _ = builder.make_policy(networks, spec, evaluation=True).selector(y[0], None, 0)
  assert int(action) == 1
  with pytest.raises(core.UnsupportedEnvironmentError, match="needs discrete actions"):
    pend = environments.make_environment("gym:Pendulum-v1", seed=0)
    builder.make_networks(environments.environment_spec(pend))


@pytest.mark.slow
def test_single_process_learns_cartpole():
  """Seed 0, 20k actor steps (5k learner steps; ~20 s of CPU on the project's 2-core
  machine): greedy returns 62, 236, 479, 381, 416, 483, 474, 500 at 2.5k..20k steps
  (5 episodes); the threshold leaves room for float differences on another CPU."""
  config = experiment.ExperimentConfig(
      builder=qr.QRDQNBuilder(), env_id="gym:CartPole-v1", num_steps=20_000, seed=0,
      eval_every=5_000, eval_episodes=5)
  result = local.run(config)
  assert result.final_eval_return >= 400, result.evaluations


# ---------------------------------------------------------------------------------------
# The command line, from a copy outside the repository.


@pytest.fixture(scope="module")
def user_dir(tmp_path_factory):
  """examples/qr_dqn/qr_dqn_agent.py copied into a fresh folder (under the system's temp
  directory, outside the repository), and a short int8-actor run trained there by the
  `actorq` console script."""
  path = tmp_path_factory.mktemp("qr_dqn_user")
  shutil.copy(_SOURCE, path / "qr_dqn_agent.py")
  proc = subprocess.run([ACTORQ, "train", "--agent", AGENT, "--steps", "1500",
                         "--eval-every", "1500", "--eval-episodes", "2", "--set",
                         "min_replay_size=500", "--actor-precision", "int8", "--logdir", "run",
                         "--no-progress"], cwd=path, capture_output=True, text=True,
                        env=_env(), check=False)
  assert proc.returncode == 0, proc.stdout + proc.stderr
  return path


@pytest.fixture
def in_user_dir(user_dir, monkeypatch):
  """This process in the user's folder (sys.path, the registry's import paths and the
  imported module restored afterwards)."""
  monkeypatch.chdir(user_dir)
  monkeypatch.setattr(sys, "path", list(sys.path))
  monkeypatch.setattr(registry, "_IMPORT_PATHS", [])
  yield user_dir
  sys.modules.pop("qr_dqn_agent", None)


@pytest.mark.slow
def test_train_records_the_agent_string_and_eval_reads_it(in_user_dir, capsys):
  info = json.loads((in_user_dir / "run" / "run.json").read_text())
  assert info["agent"] == AGENT and info["config"]["num_quantiles"] == 51
  assert info["config"]["actor_precision"] == "int8"
  code, out, err = run_cli(["eval", "--checkpoint", "run", "--episodes", "2",
                            "--precision", "fp32"], capsys)
  assert code == 0, err
  assert sys.modules["qr_dqn_agent"].__file__ == str(in_user_dir / "qr_dqn_agent.py")
  assert "returns:" in out


@pytest.mark.slow
def test_quantize_kl_is_on_the_quantile_means(in_user_dir, capsys):
  """The sweep's KL is KL(softmax(mean_q fp32) || softmax(mean_q int8)) over the A = 2
  actions; checked by hand on observations of a fresh episode."""
  code, _, err = run_cli(["quantize", "--checkpoint", "run", "--sweep", "bits=8", "--seeds",
                          "0-1", "--latency-repeats", "3", "--out", "sweep"], capsys)
  assert code == 0, err
  rows = {r["setting"]: r for r in csv.DictReader(open(in_user_dir / "sweep" / "sweep.csv"))}
  kl = float(rows["int8"]["kl"])
  assert np.isfinite(kl) and kl >= 0 and float(rows["fp32"]["kl"]) == 0
  assert json.loads((in_user_dir / "sweep" / "sweep.json").read_text())["output_kind"] == (
      "q_values")

  run = quantize_study.load_run("run", temperature=1.0)
  env = run.env_fn(7)
  obs = [env.reset().observation]
  for a in (0, 1, 0, 1, 1, 0):
    obs.append(env.step(a).observation)
  env.close()
  obs = np.stack(obs).astype(np.float32)
  y = {}
  for precision in ("fp32", "int8"):
    rt = vc.make_runtime(precision, run.spec)
    rt.load(vc.make_payload(run.params, run.spec, precision))
    y[precision] = qx.batched(rt, obs)
  assert y["fp32"].shape == (7, 102) and not np.array_equal(y["fp32"], y["int8"])
  by_hand = 0.0
  for row_ref, row in zip(y["fp32"].astype(np.float64), y["int8"].astype(np.float64)):
    p = np.exp(row_ref.reshape(2, 51).mean(-1))
    q = np.exp(row.reshape(2, 51).mean(-1))
    p, q = p / p.sum(), q / q.sum()
    by_hand += float(np.sum(p * np.log(p / q))) / len(obs)
  fid = qf.fidelity(y["fp32"], y["int8"], run.semantics)
  np.testing.assert_allclose(fid["kl"], by_hand, rtol=1e-6, atol=1e-12)
  assert fid["kl"] != pytest.approx(qf.mean_kl(y["fp32"], y["int8"]))  # not over 102 outputs


@pytest.mark.slow
def test_export_writes_the_declared_rule(in_user_dir, capsys):
  code, out, err = run_cli(["export", "--checkpoint", "run", "--episodes", "1"], capsys)
  assert code == 0, err
  report = json.loads((in_user_dir / "run" / "export" / "policy-int8.json").read_text())
  assert report["source"]["agent"] == AGENT and report["output"]["shape"] == [-1, 102]
  assert report["action_rule"] == {
      "kind": "agent", "rule": f"the {AGENT} agent's evaluation selector over y: argmax_a "
                               "mean_j y[a * 51 + j] (y = 2 actions x 51 quantiles, "
                               "action-major)"}
  assert report["parity"]["greedy_action_agreement"] > 0.8, out


@pytest.mark.slow
def test_local_mp_nodes_import_the_agent_from_the_launchers_directory(user_dir):
  """local_mp node processes run Launchpad's entry script (sys.path[0] is its folder): the
  builder they unpickle imports because the launcher gives them its PYTHONPATH entry."""
  proc = subprocess.run([ACTORQ, "train", "--agent", AGENT, "--launch", "local_mp",
                         "--num-actors", "1", "--steps", "600", "--eval-every", "600",
                         "--eval-episodes", "1", "--set", "min_replay_size=100",
                         "--logdir", "mp", "--no-progress"], cwd=user_dir, capture_output=True,
                        text=True, env=_env(), check=False, timeout=300)
  assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
  assert json.loads((user_dir / "mp" / "run.json").read_text())["agent"] == AGENT
  assert "step limit 600 reached" in proc.stdout, proc.stdout[-2000:]
  assert (user_dir / "mp" / "eval.csv").exists()
