"""Experiment tracking: the run's scalars, config and run.json also go to W&B or MLflow.

    pip install -e .[track]                       # wandb and mlflow-skinny (optional)
    actorq train --track wandb                    # offline: <logdir>/wandb/, `wandb sync` later
    actorq train --track mlflow                   # <logdir>/mlruns (a local file store)

`actorq train --track NAME` writes `<logdir>/tracking.json` (`start`: the tracker's name
and the run's id there) before the run starts. Every process of the run that makes loggers
for the run directory (`components.loggers.make_logger_factory`: the single-process run, the
learner, actor and evaluator nodes) finds it (`read`) and adds one logger per label
(`eval`, `train`, `learner`, `actor_<i>`, `counter`) writing the same rows as the CSV and
TensorBoard files: every numeric column as ``<label>/<column>``, at the row's step (its
first present column of `logging.STEP_KEYS`, as TensorBoard's). The run's run.json (agent,
environment, seed, config, train settings, a warm start's origin) is the tracked run's
config (W&B config; MLflow params, flattened as ``config.<field>``) and is attached as a
file. A resumed run (`--resume`) continues the same tracked run.

Offline by default, no network: W&B runs with ``WANDB_MODE=offline`` unless the
environment sets WANDB_MODE; MLflow writes to ``file:<logdir>/mlruns`` unless
MLFLOW_TRACKING_URI is set. Peers: CleanRL's ``--track`` (W&B), Stoix's loggers, SB3's
MLflow output format.

A tracker is one class with `create(logdir, name) -> run id` (in the launching process)
and `open(logdir, run_id)` / `log(label, step_key, step, values)` / `close()` (in each
process), and one row of `TRACKERS`.
"""
from __future__ import annotations

import importlib
import json
import os
import time
import uuid
from typing import Any, Dict, Optional


from actorq import core
from actorq.components import atomic
from actorq.components import run_dir

TRACKING_FILE = "tracking.json"
PROJECT = "actorq"  # the W&B project and MLflow experiment, unless the environment names one
RUN_INFO = run_dir.RUN_INFO


def _run_info(logdir: str) -> Dict[str, Any]:
  """The run's run.json (`run_dir.read_info`), {} when it has none yet."""
  try:
    return run_dir.read_info(logdir)
  except core.UsageError:
    return {}


def flat_params(info: Dict[str, Any], prefix: str = "") -> Dict[str, str]:
  """run.json's contents as flat ``a.b`` -> string pairs (MLflow params)."""
  out: Dict[str, str] = {}
  for key, value in info.items():
    name = f"{prefix}{key}"
    if isinstance(value, dict):
      out.update(flat_params(value, name + "."))
    else:
      out[name] = value if isinstance(value, str) else json.dumps(value)
  return out


class WandbTracker:
  """Weights & Biases (`wandb`), offline unless WANDB_MODE says otherwise: one W&B run
  per actorq run (its id in tracking.json), files under `<logdir>/wandb/`. Each label's
  columns are plotted against that label's step column (`define_metric`), so learner rows
  (by learner step) and evaluation rows (by actor step) share the run."""
  package = "wandb"

  def __init__(self):
    self._run = None
    self._defined = set()

  @staticmethod
  def create(logdir: str, name: str) -> str:
    del logdir, name
    return uuid.uuid4().hex[:16]

  def open(self, logdir: str, run_id: str) -> None:
    os.environ.setdefault("WANDB_MODE", "offline")
    wandb = importlib.import_module("wandb")
    self._run = wandb.init(project=os.environ.get("WANDB_PROJECT", PROJECT), id=run_id,
                           name=os.path.basename(os.path.abspath(logdir)), dir=logdir,
                           config=_run_info(logdir), resume="allow", reinit=True)
    if os.path.exists(os.path.join(logdir, RUN_INFO)):
      self._run.save(os.path.join(logdir, RUN_INFO), base_path=logdir, policy="now")

  def log(self, label: str, step_key: Optional[str], step: int, values: Dict[str, float]):
    if label not in self._defined:
      self._defined.add(label)
      if step_key is not None:
        self._run.define_metric(f"{label}/{step_key}")
        self._run.define_metric(f"{label}/*", step_metric=f"{label}/{step_key}")
    self._run.log({f"{label}/{k}": v for k, v in values.items()})

  def close(self) -> None:
    self._run.finish()


class MlflowTracker:
  """MLflow (`mlflow-skinny` is enough): one MLflow run per actorq run in the experiment
  "actorq" (MLFLOW_EXPERIMENT_NAME overrides) of ``file:<logdir>/mlruns`` unless
  MLFLOW_TRACKING_URI is set; metrics ``<label>/<column>`` at the row's step, run.json's
  fields as params and run.json as an artifact."""
  package = "mlflow"

  def __init__(self):
    self._client, self._run_id = None, None

  @staticmethod
  def _client_for(logdir: str):
    uri = os.environ.get("MLFLOW_TRACKING_URI") or "file:" + os.path.join(
        os.path.abspath(logdir), "mlruns")
    if uri.startswith("file:"):
      # MLflow >= 3.7 refuses its file store unless asked (it recommends a database, which
      # needs SQLAlchemy, not in mlflow-skinny): a local, offline file store is what we want.
      os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
    return importlib.import_module("mlflow.tracking").MlflowClient(tracking_uri=uri)

  @classmethod
  def create(cls, logdir: str, name: str) -> str:
    client = cls._client_for(logdir)
    experiment = os.environ.get("MLFLOW_EXPERIMENT_NAME", PROJECT)
    found = client.get_experiment_by_name(experiment)
    experiment_id = found.experiment_id if found else client.create_experiment(experiment)
    return client.create_run(experiment_id, run_name=name).info.run_id

  def open(self, logdir: str, run_id: str) -> None:
    self._client, self._run_id = self._client_for(logdir), run_id
    info = _run_info(logdir)
    if info:
      entities = importlib.import_module("mlflow.entities")
      params = [entities.Param(k, v[:6000]) for k, v in flat_params(info).items()]
      existing = self._client.get_run(run_id).data.params
      params = [p for p in params if p.key not in existing]  # a resumed run's are there
      for i in range(0, len(params), 100):
        self._client.log_batch(run_id, params=params[i:i + 100])
      self._client.log_artifact(run_id, os.path.join(logdir, RUN_INFO))

  def log(self, label: str, step_key: Optional[str], step: int, values: Dict[str, float]):
    del step_key
    entities = importlib.import_module("mlflow.entities")
    timestamp = int(1000 * time.time())
    self._client.log_batch(self._run_id, metrics=[
        entities.Metric(f"{label}/{k}", v, timestamp, step) for k, v in values.items()])

  def close(self) -> None:
    pass  # the run stays open for a resume; its metrics are on disk after every row


TRACKERS = {"wandb": WandbTracker, "mlflow": MlflowTracker}


def check_tracker(name: str) -> str:
  """`--track NAME`: a name of `TRACKERS` whose package imports.

  Raises:
    core.UsageError: an unknown name (naming the allowed ones) or a missing package (how
      to install it).
  """
  if name not in TRACKERS:
    raise core.UsageError(f"--track {name}: unknown tracker; allowed: {', '.join(TRACKERS)}")
  try:
    importlib.import_module(TRACKERS[name].package)
  except ImportError as e:
    raise core.UsageError(f"--track {name}: the {TRACKERS[name].package} package is not "
                          f"installed ({e}); pip install -e .[track]") from None
  return name


def start(logdir: str, name: str) -> None:
  """Makes `logdir` a tracked run: creates the tracked run and writes tracking.json
  (atomically). A run directory that already has one (a resumed run) keeps it."""
  path = os.path.join(logdir, TRACKING_FILE)
  if os.path.exists(path):
    return
  run_id = TRACKERS[name].create(logdir, os.path.basename(os.path.abspath(logdir)))
  atomic.write_json(path, {"tracker": name, "run_id": run_id}, indent=None)


def read(logdir: Optional[str]) -> Optional[Dict[str, str]]:
  """The run directory's tracking.json (``{"tracker": NAME, "run_id": ID}``) when `logdir`
  is a tracked run with a known tracker, else None."""
  if logdir is None:
    return None
  try:
    with open(os.path.join(logdir, TRACKING_FILE), encoding="utf-8") as f:
      info = json.load(f)
    return info if info.get("tracker") in TRACKERS and info.get("run_id") else None
  except (OSError, ValueError, AttributeError):
    return None
