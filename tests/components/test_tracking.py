"""`actorq train --track wandb|mlflow` (components/tracking.py, issue 55): an offline W&B run
and a local MLflow file store hold the same evaluation scalars as eval.csv, the run's
config and run.json. Each test needs its optional package (`pip install -e .[track]`; the
suite's .venv has both, requirements/base.txt)."""
import glob
import json
import os
import subprocess
import sys

import pytest

from actorq.cli import main as cli
from actorq.components import run_dir, tracking

SMALL = ["--set", "hidden_sizes=[16,16]", "--set", "batch_size=16", "--set",
         "min_replay_size=100", "--set", "samples_per_insert=8.0", "--steps", "600",
         "--eval-every", "200", "--eval-episodes", "2", "--seed", "5", "--no-progress"]


def _eval_csv(run):
  rows = run_dir.read_evaluations(run)
  assert len(rows) == 3
  return [(int(r["actor_steps"]), r["episode_return"]) for r in rows]


def test_mlflow_file_store_holds_eval_csv_and_the_config(tmp_path, monkeypatch):
  pytest.importorskip("mlflow", reason="mlflow is an optional extra: pip install -e .[track]")
  from mlflow.tracking import MlflowClient  # pylint: disable=import-outside-toplevel
  for name in ("MLFLOW_TRACKING_URI", "MLFLOW_EXPERIMENT_NAME"):
    monkeypatch.delenv(name, raising=False)
  run = str(tmp_path / "run")
  assert cli.main(["train"] + SMALL + ["--logdir", run, "--track", "mlflow"]) == 0
  info = json.load(open(os.path.join(run, tracking.TRACKING_FILE)))
  assert info["tracker"] == "mlflow"
  client = MlflowClient(tracking_uri="file:" + os.path.join(run, "mlruns"))
  history = client.get_metric_history(info["run_id"], "eval/episode_return")
  assert sorted((m.step, m.value) for m in history) == _eval_csv(run)
  learner = client.get_metric_history(info["run_id"], "learner/loss")
  assert learner and all(m.step >= 1 for m in learner)  # at learner steps
  params = client.get_run(info["run_id"]).data.params
  assert params["agent"] == "dqn" and params["seed"] == "5"
  assert params["config.hidden_sizes"] == "[16, 16]"
  assert params["train.steps"] == "600"
  artifacts = os.path.join(run, "mlruns")
  assert glob.glob(os.path.join(artifacts, "*", info["run_id"], "artifacts", "run.json"))


def _wandb_history(path):
  """The history rows of an offline W&B run file (`run-<id>.wandb`)."""
  from wandb.proto import wandb_internal_pb2  # pylint: disable=import-outside-toplevel
  from wandb.sdk.internal import datastore  # pylint: disable=import-outside-toplevel
  store = datastore.DataStore()
  store.open_for_scan(path)
  rows, config = [], {}
  while True:
    data = store.scan_data()
    if data is None:
      return rows, config
    record = wandb_internal_pb2.Record()
    record.ParseFromString(data)
    kind = record.WhichOneof("record_type")
    if kind == "history":
      rows.append({item.key or "/".join(item.nested_key): json.loads(item.value_json)
                   for item in record.history.item})
    elif kind == "run":
      config.update({item.key: json.loads(item.value_json)
                     for item in record.run.config.update})


@pytest.mark.slow  # a subprocess: W&B's service outlives wandb.finish() in a test process
def test_wandb_offline_run_holds_eval_csv_and_the_config(tmp_path):
  pytest.importorskip("wandb", reason="wandb is an optional extra: pip install -e .[track]")
  run = str(tmp_path / "run")
  env = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_")}
  env.update(TF_CPP_MIN_LOG_LEVEL="2", JAX_PLATFORMS="cpu", WANDB_SILENT="true")
  done = subprocess.run([sys.executable, "-m", "actorq.cli.main", "train"] + SMALL
                        + ["--logdir", run, "--track", "wandb"], env=env, timeout=600,
                        capture_output=True, text=True)
  assert done.returncode == 0, done.stderr[-2000:]
  run_id = json.load(open(os.path.join(run, tracking.TRACKING_FILE)))["run_id"]
  files = glob.glob(os.path.join(run, "wandb", f"offline-run-*-{run_id}", f"run-{run_id}.wandb"))
  assert len(files) == 1  # offline (WANDB_MODE unset), one W&B run for the actorq run
  rows, config = _wandb_history(files[0])
  evals = [(int(r["eval/actor_steps"]), r["eval/episode_return"]) for r in rows
           if "eval/episode_return" in r]
  assert evals == _eval_csv(run)
  assert any("learner/loss" in r for r in rows)
  assert config["agent"] == "dqn" and config["seed"] == 5
  assert config["config"]["hidden_sizes"] == [16, 16]
  assert glob.glob(os.path.join(os.path.dirname(files[0]), "files", "run.json"))


def test_an_unknown_or_missing_tracker_is_one_line(tmp_path, capsys, monkeypatch):
  with pytest.raises(SystemExit) as e:
    cli.main(["train", "--track", "neptune", "--logdir", str(tmp_path / "x")])
  assert e.value.code == 2
  assert "invalid choice: 'neptune' (choose from 'wandb', 'mlflow')" in capsys.readouterr().err
  monkeypatch.setitem(tracking.TRACKERS, "wandb", type("T", (), {"package": "no_such_pkg"}))
  run = str(tmp_path / "y")
  assert cli.main(["train"] + SMALL + ["--logdir", run, "--track", "wandb"]) == 2
  assert capsys.readouterr().err == (
      "actorq: error: --track wandb: the no_such_pkg package is not installed (No module "
      "named 'no_such_pkg'); pip install -e .[track]\n")
  assert not os.path.exists(run)
