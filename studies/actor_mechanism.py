"""What int8 actors do differently during training, measured per actor step (issue 53).

Two candidate mechanisms for int8 actors ending worse than fp32 ones:

* **staleness**: the actor acts with an older policy version than an fp32 actor would
  (conversion and publishing of int8 payloads taking longer). Per actor step we record
  the version the action was selected with and the learner's version at that moment;
  the lag is their difference, in learner steps.
* **different actions at the same parameters**: the actor's greedy choice at its own
  precision against the fp32 policy's greedy choice at the same parameter version, on the
  observation the action was selected on, binned by the fp32 action gap
  Q(s, best) - Q(s, second best) (return units): near-ties are where int8 rounding flips
  the choice, and the transitions the learner sees change from there.

`MechanismRecorder` is a `loop.Hook` given to a single-process run through
`ExperimentConfig.training_hooks` (it runs first at each step, before the learner's steps
of that step, so the learner's version it reads is the one the action was taken against).
It draws no randomness and changes nothing the actor does: the run is the run of its
seed (the training CSV of a measured run equals the unmeasured one's; `run` writes one).
The fp32 policy of the same version is pulled from the run's own `PolicyServer`
(``policy/fp32``, converted once per version); in a single-process run pulls are
synchronous, so it is the same version as the actor's.

    python -m actorq.studies.actor_mechanism --precision int8 --seed 0 --steps 30000 \\
        --out DIR [--agent dqn] [--env gym:CartPole-v1] [--set K=V ...]

writes DIR/<precision>-s<seed>/{lag.csv, action_gaps.csv, summary.json, train.csv, ...}:
  lag.csv          per 1,000 actor steps: mean and max lag, steps compared, differing
                   greedy choices and their share
  action_gaps.csv  per fp32 action-gap bin: steps, differing greedy choices, share
  summary.json     the lag histogram (lag -> steps), totals, the settings
"""
from __future__ import annotations

import collections
import csv
import dataclasses
import math
import os
import sys
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from actorq import core
from actorq.components import atomic
from actorq.components.acting import loop as loop_lib
from actorq.components.envs import single_agent
from actorq.launch import local
from actorq.launch import spec as spec_lib
from actorq.quantization import runtimes

WINDOW = 1_000  # actor steps per lag.csv row
# Bin edges of the fp32 action gap |Q(s, best) - Q(s, second)|, return units.
GAP_EDGES = (0.0, 0.01, 0.03, 0.1, 0.3, 1.0, 3.0, math.inf)


def action_gap(values: np.ndarray) -> float:
  """Best minus second-best of a [A] row of action values (inf for one action)."""
  if values.shape[-1] < 2:
    return math.inf
  top = np.sort(values)[-2:]
  return float(top[1] - top[0])


def gap_bin(gap: float, edges: Sequence[float] = GAP_EDGES) -> int:
  """Index i of the bin [edges[i], edges[i+1]) holding `gap` >= 0."""
  return int(np.searchsorted(edges, gap, side="right") - 1)


class MechanismRecorder(loop_lib.Hook):
  """Records, per training step, the version lag and (for a non-fp32 actor) whether its
  greedy choice differs from the fp32 policy's at the same version (module docstring).

  Args:
    actor: the training `FeedForwardActor` (with its variable client).
    to_values: raw outputs [N, output_size] -> action values [N, A] (the builder's
      `PolicyOutputs.to_values`; None: the outputs are the values).
    spec: the policy's `NetworkSpec` (for the fp32 shadow runtime).

  Attributes:
    lags: Counter lag -> steps.
    windows: lag.csv rows so far.
    gap_steps, gap_differ: [len(GAP_EDGES) - 1] steps and differing choices per gap bin.
    version_mismatch: steps whose fp32 payload was of another version than the actor's
      (an asynchronous client; such steps are not compared).
  """

  def __init__(self, actor, to_values, spec):
    self._actor = actor
    self._client = actor.variable_client
    self._to_values = to_values or (lambda y: y)
    own = actor.runtime.payload_precision
    self._shadow = runtimes.make_runtime(core.FP32, spec) if own != core.FP32 else None
    self._acting_version: Optional[int] = None
    self.lags: collections.Counter = collections.Counter()
    self.windows: List[Dict[str, Any]] = []
    bins = len(GAP_EDGES) - 1
    self.gap_steps, self.gap_differ = np.zeros(bins, np.int64), np.zeros(bins, np.int64)
    self.version_mismatch = 0
    self._w = self._new_window()
    self._pending_differ: Optional[tuple] = None

  @staticmethod
  def _new_window():
    return {"steps": 0, "lag_sum": 0, "lag_max": 0, "compared": 0, "differ": 0}

  def _prepare(self, timestep) -> None:
    """Before the next action: the version it will be selected with and, against fp32 at
    that version, whether its greedy choice differs (counted when it is taken)."""
    self._acting_version = self._actor.policy_version
    self._pending_differ = None
    if self._shadow is None or not self._sync_shadow():
      return
    obs = np.asarray(timestep.observation, np.float32)[None]
    own = np.asarray(self._to_values(self._actor.runtime(obs)))[0]
    ref = np.asarray(self._to_values(self._shadow(obs)))[0]
    self._pending_differ = (gap_bin(action_gap(ref)), int(np.argmax(own) != np.argmax(ref)))

  def _sync_shadow(self) -> bool:
    """Loads the fp32 payload of the actor's version into the shadow runtime when the
    actor has a new one (called before the learner steps of the step, when the source's
    newest version is the one the actor just pulled); False if the source has moved on."""
    version = self._actor.policy_version
    if self._shadow.version != version:
      payload = self._client.source_payload(core.FP32)
      if int(payload.version) != version:
        self.version_mismatch += 1
        return False
      self._shadow.load(payload)
    return True

  def on_episode_start(self, loop, timestep) -> None:
    self._prepare(timestep)

  def on_step(self, loop, action, timestep) -> None:
    if self._acting_version is not None:
      lag = self._client.source_version() - self._acting_version
      self.lags[lag] += 1
      w = self._w
      w["steps"] += 1
      w["lag_sum"] += lag
      w["lag_max"] = max(w["lag_max"], lag)
      if self._pending_differ is not None:
        b, differ = self._pending_differ
        self.gap_steps[b] += 1
        self.gap_differ[b] += differ
        w["compared"] += 1
        w["differ"] += differ
      if loop.steps % WINDOW == 0:
        self._close_window(loop.steps)
    self._acting_version = None
    if not timestep.last():
      self._prepare(timestep)
    elif self._shadow is not None:  # the next action (after the reset) uses this version
      self._sync_shadow()

  def _close_window(self, step: int) -> None:
    w = self._w
    self.windows.append({
        "actor_steps": step, "steps": w["steps"],
        "mean_lag": w["lag_sum"] / w["steps"] if w["steps"] else math.nan,
        "max_lag": w["lag_max"], "compared": w["compared"], "differ": w["differ"],
        "share_differ": w["differ"] / w["compared"] if w["compared"] else math.nan})
    self._w = self._new_window()

  def summary(self) -> Dict[str, Any]:
    steps = sum(self.lags.values())
    compared = int(self.gap_steps.sum())
    return {"steps": steps,
            "mean_lag": sum(k * v for k, v in self.lags.items()) / steps if steps else None,
            "max_lag": max(self.lags) if self.lags else None,
            "lag_histogram": {str(k): v for k, v in sorted(self.lags.items())},
            "compared": compared, "differ": int(self.gap_differ.sum()),
            "share_differ": float(self.gap_differ.sum() / compared) if compared else None,
            "version_mismatch": self.version_mismatch}

  def gap_rows(self) -> List[Dict[str, Any]]:
    return [{"gap_low": GAP_EDGES[i], "gap_high": GAP_EDGES[i + 1],
             "steps": int(self.gap_steps[i]), "differ": int(self.gap_differ[i]),
             "share_differ": (float(self.gap_differ[i] / self.gap_steps[i])
                              if self.gap_steps[i] else "")}
            for i in range(len(GAP_EDGES) - 1)]


def _write_csv(path: str, fields: Sequence[str], rows) -> None:
  with atomic.atomic_write(path) as f:
    w = csv.DictWriter(f, fieldnames=list(fields))
    w.writeheader()
    w.writerows(rows)


def run(agent: str, env: str, seed: int, steps: int, precision: str, out: str,
        assignments: Sequence[str] = ()) -> Dict[str, Any]:
  """Trains `agent` on `env` with `seed` for `steps` actor steps at actor `precision` in
  one process (`launch.local.run`, run directory DIR/<precision>-s<seed>, one evaluation
  at the end) with a `MechanismRecorder`, and writes its files (module docstring);
  returns the summary.

  Raises:
    core.UsageError: as `actorq train` refuses the settings.
  """
  run_dir = os.path.join(out, f"{runtimes.precision_slug(precision)}-s{seed}")
  spec = spec_lib.RunSpec.resolve(agent=agent, env=env, seed=seed, set=list(assignments),
                                  actor_precision=precision)
  spec = dataclasses.replace(spec, steps=steps, eval_every=steps, eval_episodes=1,
                             logdir=run_dir)
  config = spec.build()
  recorders = []

  def make(actor):
    builder = config.builder
    env_spec = single_agent.environment_spec(config)
    networks = builder.make_networks(env_spec)
    outputs = builder.policy_outputs(networks, env_spec)
    if outputs.kind != "q_values":
      raise core.UsageError(f"actor_mechanism measures Q-value policies; {agent}'s outputs "
                            f"are {outputs.kind}")
    recorders.append(MechanismRecorder(actor, outputs.to_values, networks.spec))
    return recorders[-1]

  config = dataclasses.replace(config, training_hooks=(make,))
  local.run(config)
  rec = recorders[0]
  _write_csv(os.path.join(run_dir, "lag.csv"),
             ("actor_steps", "steps", "mean_lag", "max_lag", "compared", "differ",
              "share_differ"), rec.windows)
  _write_csv(os.path.join(run_dir, "action_gaps.csv"),
             ("gap_low", "gap_high", "steps", "differ", "share_differ"), rec.gap_rows())
  summary = dict(rec.summary(), agent=agent, env=env, seed=seed, precision=precision,
                 actor_steps=steps, set=list(assignments))
  atomic.write_json(os.path.join(run_dir, "summary.json"), summary)
  return summary


if __name__ == "__main__":  # its flags live in cli/
  from actorq.cli.studies import actor_mechanism as command_line
  sys.exit(command_line.main())
