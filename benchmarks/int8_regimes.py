"""Where int8 actors pay on a CPU: end-to-end int8/fp32 against samples per insert, measured
and predicted (issue 40, item 3).

    python -m actorq.benchmarks.int8_regimes --out DIR \\
        --single RUN_SPI32 RUN_SPI8 RUN_SPI1 [RUN_IMPALA] \\
        --local-mp RUN_SPI32 RUN_SPI8 RUN_SPI1 [RUN_IMPALA] [--cores 2]

Each RUN is the output directory of one finished `actorq bench` invocation at fp32 and int8
(interleaved, paired by seed): `--single` ones without `--launch` (bench.json), `--local-mp`
ones with `--launch local_mp` (bench_distributed.json), e.g. the actorq preset with
`--set samples_per_insert=S`. Runs of an on-policy agent (IMPALA, A2C, PPO: a config with
`rollout_length` and no `samples_per_insert`) are read the same way, each learner step
consuming `batch_size x rollout_length` transitions once (SPI 1 per transition).

Two models, both from per-component costs (times in seconds):

  Single process (the learner's steps run inline, `launch.local`): the loop is serial, so an
  actor step costs t_a(p) (env step + inference + adder + parameter load + loop, from the
  run's `actor_us`) and each learner step t_L (sample + update, `learner_us`; the learner is
  fp32 whatever the actors run), the first of them t_0 (jit compilation: a start-up cost that
  a short run at low SPI does not amortise; `learner_first_step_s` of the run), L being
  what the configuration makes it (Acme's rate limiter: SPI / B learner steps per actor
  step once replay holds min_replay_size items; on-policy, one per B T transitions).
  Converting each new parameter version for the actors (int8: quantization and the LiteRT
  model, ~70-170 ms at 3x2048) runs on the pull's background thread, off the loop's path but
  on the same cores, while the learner's step uses both of them: it is counted in full, as
  c_pub(p) per actor step (the run's publish seconds over its actor steps: one conversion
  per pull of a new version, every `variable_update_period` actor steps whatever the SPI).
  A run of N actor steps and L learner steps then takes N (t_a(p) + c_pub(p)) + (L - 1) t_L
  + t_0:

      X_1(p) = N / (N (t_a(p) + c_pub(p)) + (L - 1) t_L + t_0),
      in the steady state 1 / (t_a(p) + c_pub(p) + (SPI / B) t_L).

  Launchpad (`local_mp`): `actorq.benchmarks.scaling` (X = min(actor-, learner-,
  core-bound) with N actors on C cores), its costs measured per node.

Calibration: each model's costs come from the runs at the highest samples per insert of its
group (the actorq preset's 32), and predict the other SPI values' runs from them (a
prediction, not a fit: only SPI changes between the invocations). An on-policy workload has
one setting, so its costs come from its own runs and its error checks only that the
components add up (`calibrated_on` says which). The error of a point is predicted /
measured - 1. Beside it, each point's own learner step over the calibration's (a shared
machine moves it between invocations) and the prediction redone with the point's own
learner step (t_L, t_0; on `local_mp` t_L and c_L), which separates a wrong model from a
learner that ran slower at that point; the int8/fp32 ratio is the median over seeds of the per-seed ratio (paired).

Measured end to end: a single-process run's actor steps over its training seconds
(evaluations taken out, replay warm-up included, as the model's N and L include it); a
`local_mp` run's actor steps/s in its training window (the steady state under the rate
limiter, `distributed_bench`). Time to target is not part of this report (see the docs).

Outputs in --out: int8_regimes.json (every point, costs, model curves), table.md,
int8_regimes.png (int8/fp32 end to end against SPI, model lines and measured points; actor
steps/s per precision).
"""
from __future__ import annotations

import dataclasses
import json
import os
import statistics
import sys
from typing import Any, Dict, List, Optional, Sequence, Tuple

from actorq.components import atomic
from actorq.benchmarks import scaling
from actorq.launch import spec as spec_lib

SINGLE, LOCAL_MP = "single", "local_mp"
ACTOR_PATH = ("env_step", "inference", "adder", "load", "other")  # t_a: all but waiting
PRECISIONS = ("fp32", "int8")


@dataclasses.dataclass(frozen=True)
class Workload:
  """One `actorq bench` invocation's runs and what the models need of its setting.

  Attributes:
    name: agent name ("d4pg", "impala", ...). launch: SINGLE or LOCAL_MP.
    runs: the invocation's run records (bench.json or bench_distributed.json "runs").
    batch_size: B, transitions per learner step's sample (on-policy: batch_size x T).
    samples_per_insert: SPI (on-policy: 1.0, each transition learned from once).
    on_policy: True for a rollout-queue agent. source: the run directory.
  """
  name: str
  launch: str
  runs: Tuple[Dict[str, Any], ...]
  batch_size: int
  samples_per_insert: float
  on_policy: bool
  source: str


def _builder_config(agent: str, overrides: Dict[str, Any]):
  return spec_lib.make_builder(agent, overrides=dict(overrides)).config


def load_workload(directory: str, launch: str, config_of=_builder_config) -> Workload:
  """The runs of a finished `actorq bench` in `directory` (`launch` SINGLE: bench.json;
  LOCAL_MP: bench_distributed.json) with the batch size and SPI of its agent config
  (`config_of(agent, overrides)`: the builder's config).

  Raises:
    FileNotFoundError: the directory lacks the file. ValueError: the runs lack fp32 or
      int8, or the agent has neither samples_per_insert nor rollout_length.
  """
  name = "bench.json" if launch == SINGLE else "bench_distributed.json"
  path = os.path.join(directory, name)
  if not os.path.isfile(path):
    raise FileNotFoundError(f"{directory}: no {name} (not a finished `actorq bench"
                            f"{'' if launch == SINGLE else ' --launch local_mp'}`)")
  with open(path, encoding="utf-8") as f:
    data = json.load(f)
  runs = tuple(r for r in data["runs"] if r.get("kind", "train") == "train")
  missing = set(PRECISIONS) - {r["precision"] for r in runs}
  if missing:
    raise ValueError(f"{directory}: no {', '.join(sorted(missing))} run (need fp32 and int8)")
  meta = data["meta"]
  config = config_of(meta["agent"], meta.get("overrides") or {})
  spi = float(getattr(config, "samples_per_insert", 0) or 0)
  if spi > 0:
    return Workload(meta["agent"], launch, runs, int(config.batch_size), spi, False, directory)
  if not hasattr(config, "rollout_length"):
    raise ValueError(f"{directory}: {meta['agent']} has neither samples_per_insert nor "
                     "rollout_length")
  return Workload(meta["agent"], launch, runs, int(config.batch_size * config.rollout_length),
                  1.0, True, directory)


# ---------------------------------------------------------------------------------------------
# The single-process model.
# ---------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class SerialCosts:
  """t_a(p) (seconds per actor step, by precision), t_L (seconds per learner step after the
  first), t_0 (seconds of the first learner step: its jit compilation; 0 when the runs
  did not record it) and c_pub(p) (seconds per actor step of converting new parameter
  versions for the actors, by precision; None: 0)."""
  actor_s: Dict[str, float]
  learner_s: float
  first_step_s: float = 0.0
  publish_s: Optional[Dict[str, float]] = None


def _learner_seconds(run: Dict[str, Any]) -> Tuple[float, float]:
  """(t_L, t_0) of one run: the first step's seconds apart when the run recorded them
  (`learner_first_step_s`), else (mean step, 0)."""
  steps = int(run["learner_steps"])
  total = steps * (run["learner_us"]["sample"] + run["learner_us"]["update"]) / 1e6
  first = float(run.get("learner_first_step_s") or 0.0)
  if first > 0 and steps > 1:
    return (total - first) / (steps - 1), first
  return total / steps, 0.0


def serial_costs(runs: Sequence[Dict[str, Any]]) -> SerialCosts:
  """t_a(p): mean over a precision's runs of the sum of `ACTOR_PATH` in `actor_us`; t_L and
  t_0: means over all runs of `_learner_seconds` (sample + update per learner step).

  Raises:
    ValueError: no runs, or none with learner steps.
  """
  stepped = [r for r in runs if r.get("learner_steps", 0) > 0]
  if not stepped:
    raise ValueError("calibration needs runs with learner steps")
  actor = {}
  for p in sorted({r["precision"] for r in runs}):
    actor[p] = statistics.fmean(sum(r["actor_us"][c] for c in ACTOR_PATH) / 1e6
                                for r in runs if r["precision"] == p)
  publish = {p: statistics.fmean(r["learner_us"].get("publish", 0.0) * r["learner_steps"]
                                  / r["actor_steps"] / 1e6
                                  for r in runs if r["precision"] == p) for p in actor}
  learner = [_learner_seconds(r) for r in stepped]
  return SerialCosts(actor, statistics.fmean(t for t, _ in learner),
                     statistics.fmean(t0 for _, t0 in learner), publish)


def predict_serial(costs: SerialCosts, precision: str, actor_steps: float,
                   learner_steps: float) -> float:
  """X_1 = N / (N (t_a(p) + c_pub(p)) + (L - 1) t_L + t_0) (L >= 1; without learner
  steps the learner terms are 0), actor steps/s."""
  if learner_steps < 1:
    learn = 0.0
  elif costs.first_step_s > 0:
    learn = (learner_steps - 1) * costs.learner_s + costs.first_step_s
  else:
    learn = learner_steps * costs.learner_s
  per_step = costs.actor_s[precision] + (costs.publish_s or {}).get(precision, 0.0)
  return actor_steps / (actor_steps * per_step + learn)


def serial_curve(costs: SerialCosts, precision: str, batch_size: int, spi: float) -> float:
  """The steady state 1 / (t_a(p) + c_pub(p) + (SPI / B) t_L), actor steps/s."""
  return 1.0 / (costs.actor_s[precision] + (costs.publish_s or {}).get(precision, 0.0)
                + spi / batch_size * costs.learner_s)


# ---------------------------------------------------------------------------------------------
# Points: every run measured and predicted.
# ---------------------------------------------------------------------------------------------
def _as_distributed(run: Dict[str, Any], w: Workload) -> Dict[str, Any]:
  return dict(run, batch_size=w.batch_size, samples_per_insert=w.samples_per_insert)


def calibrations(workloads: Sequence[Workload], cores: float
                 ) -> Dict[Tuple[str, str], Tuple[Workload, Any]]:
  """Per group (agent, launch): its calibration workload, the one with the highest SPI
  (on-policy: itself), and the costs calibrated on it (`SerialCosts` for SINGLE, a
  `scaling.Costs` for LOCAL_MP).

  Raises:
    ValueError: see `serial_costs`, `scaling.calibrate`.
  """
  out = {}
  for key in dict.fromkeys((w.name, w.launch) for w in workloads):
    calib = max((w for w in workloads if (w.name, w.launch) == key),
                key=lambda w: w.samples_per_insert)
    if key[1] == SINGLE:
      out[key] = (calib, serial_costs(calib.runs))
    else:
      out[key] = (calib, scaling.calibrate([_as_distributed(r, calib) for r in calib.runs],
                                           cores))
  return out


def points(workloads: Sequence[Workload], cores: float,
           calibrated: Optional[Dict[Tuple[str, str], Tuple[Workload, Any]]] = None
           ) -> Tuple[List[Dict[str, Any]], Dict[str, Any]]:
  """One row per run (workload, precision, seed): measured and predicted actor steps/s,
  error, bound and what the costs were calibrated on; and the costs per group
  (`calibrations`, computed here unless given).

  Raises:
    ValueError: see `serial_costs`, `scaling.calibrate`.
  """
  calibrated = calibrations(workloads, cores) if calibrated is None else calibrated
  rows, costs_out = [], {}
  for (name, launch), (calib, costs) in calibrated.items():
    members = [w for w in workloads if (w.name, w.launch) == (name, launch)]
    on = "itself" if calib.on_policy else f"SPI {calib.samples_per_insert:g}"
    costs_out[f"{name}/{launch}"] = dataclasses.asdict(costs)
    for w in members:
      for r in w.runs:
        measured = float(r["actor_steps_per_s"])
        if launch == SINGLE:
          predicted = predict_serial(costs, r["precision"], r["actor_steps"], r["learner_steps"])
          own_t, own_t0 = _learner_seconds(r)
          own = predict_serial(dataclasses.replace(
              costs, learner_s=own_t, first_step_s=own_t0 if costs.first_step_s > 0 else 0.0),
              r["precision"], r["actor_steps"], r["learner_steps"])
          bound, actors, drift = "serial", 1, own_t / costs.learner_s
        else:
          actors = int(r["num_actors"])
          at_spi = dataclasses.replace(costs, samples_per_insert=w.samples_per_insert)
          pred = scaling.predict(at_spi, r["precision"], actors)
          mine = scaling.costs_from_run(_as_distributed(r, w), cores)
          own = scaling.predict(dataclasses.replace(
              at_spi, learner_s=mine["learner_s"], learner_cpu_s=mine["learner_cpu_s"]),
              r["precision"], actors).steps_per_s
          predicted, bound, drift = pred.steps_per_s, pred.bound, mine["learner_s"] / costs.learner_s
        rows.append({"agent": name, "launch": launch, "on_policy": w.on_policy,
                     "samples_per_insert": w.samples_per_insert, "batch_size": w.batch_size,
                     "num_actors": actors, "precision": r["precision"], "seed": r["seed"],
                     "measured": measured, "predicted": predicted,
                     "error": predicted / measured - 1.0, "bound": bound,
                     "learner_step_vs_calibration": drift,
                     "predicted_own_learner": own, "error_own_learner": own / measured - 1.0,
                     "calibrated_on": "itself" if w is calib and calib.on_policy else
                                      ("itself (calibration point)" if w is calib else on),
                     "source": w.source})
  return rows, costs_out


def ratios(rows: Sequence[Dict[str, Any]]) -> List[Dict[str, Any]]:
  """Per (agent, launch, SPI): int8/fp32 measured and predicted (median over seeds of the
  per-seed ratio: paired), fp32 and int8 medians, the largest |error| of its points."""
  keyed: Dict[Tuple, Dict[Tuple[Any, str], Dict[str, Any]]] = {}
  for r in rows:
    keyed.setdefault((r["agent"], r["launch"], r["samples_per_insert"], r["on_policy"]), {})[
        (r["seed"], r["precision"])] = r
  out = []
  for (agent, launch, spi, on_policy), by in keyed.items():
    seeds = sorted({s for s, p in by if (s, "fp32") in by and (s, "int8") in by})
    if not seeds:
      continue
    ratio = lambda key: statistics.median(by[(s, "int8")][key] / by[(s, "fp32")][key]
                                          for s in seeds)
    med = lambda p, key: statistics.median(by[(s, p)][key] for s in seeds)
    out.append({"agent": agent, "launch": launch, "samples_per_insert": spi,
                "on_policy": on_policy, "seeds": seeds,
                "fp32_measured": med("fp32", "measured"), "fp32_predicted": med("fp32", "predicted"),
                "int8_measured": med("int8", "measured"), "int8_predicted": med("int8", "predicted"),
                "ratio_measured": ratio("measured"), "ratio_predicted": ratio("predicted"),
                "max_abs_error": max(abs(r["error"]) for r in by.values()),
                "bounds": sorted({r["bound"] for r in by.values()})})
  out.sort(key=lambda r: (r["on_policy"], r["agent"], r["launch"], -r["samples_per_insert"]))
  return out


def format_table(summary: Sequence[Dict[str, Any]], rows: Sequence[Dict[str, Any]]) -> str:
  """The markdown tables: one row per setting, then every point."""
  lines = ["| agent | launch | samples per insert | fp32 actor steps/s (model) | int8 (model) | "
           "**int8/fp32 end to end** (model) | bound (model) | largest model error |",
           "|---|---|---|---|---|---|---|---|"]
  for s in summary:
    spi = "on-policy (1 per transition)" if s["on_policy"] else f"{s['samples_per_insert']:g}"
    lines.append(f"| {s['agent']} | {s['launch']} | {spi} | {s['fp32_measured']:,.1f} "
                 f"({s['fp32_predicted']:,.1f}) | {s['int8_measured']:,.1f} "
                 f"({s['int8_predicted']:,.1f}) | **{s['ratio_measured']:.2f}x** "
                 f"({s['ratio_predicted']:.2f}x) | {', '.join(s['bounds'])} | "
                 f"{100 * s['max_abs_error']:.0f}% |")
  lines += ["", "| agent | launch | SPI | precision | seed | measured | predicted | error | "
            "costs from | this run's learner step / calibration's | predicted with this run's "
            "learner step (error) |", "|---|---|---|---|---|---|---|---|---|---|---|"]
  for r in rows:
    lines.append(f"| {r['agent']} | {r['launch']} | {r['samples_per_insert']:g} | "
                 f"{r['precision']} | {r['seed']} | {r['measured']:,.1f} | "
                 f"{r['predicted']:,.1f} | {100 * r['error']:+.1f}% | {r['calibrated_on']} | "
                 f"{r['learner_step_vs_calibration']:.2f}x | {r['predicted_own_learner']:,.1f} "
                 f"({100 * r['error_own_learner']:+.1f}%) |")
  return "\n".join(lines)


def curves(workloads: Sequence[Workload], cores: float, spis: Sequence[float],
           calibrated: Optional[Dict[Tuple[str, str], Tuple[Workload, Any]]] = None
           ) -> Dict[str, Dict[str, List[float]]]:
  """Steady-state model curves of the off-policy groups over `spis`: "agent/launch" ->
  {precision: actor steps/s per SPI, "ratio": int8/fp32} (`calibrations`, computed here
  unless given)."""
  calibrated = calibrations(workloads, cores) if calibrated is None else calibrated
  out = {}
  for (name, launch), (calib, costs) in sorted(calibrated.items(), key=lambda kv: kv[0]):
    if calib.on_policy:
      continue
    n = max(int(r.get("num_actors", 1)) for r in calib.runs)
    if launch == SINGLE:
      f = lambda p, s: serial_curve(costs, p, calib.batch_size, s)
    else:
      f = lambda p, s: scaling.predict(dataclasses.replace(costs, samples_per_insert=s),
                                       p, n).steps_per_s
    c = {p: [f(p, s) for s in spis] for p in PRECISIONS}
    c["ratio"] = [a / b for a, b in zip(c["int8"], c["fp32"])]
    c["num_actors"] = n
    out[f"{name}/{launch}"] = c
  return out


def plot(summary, rows, model, spis, path: str) -> str:
  """Left: int8/fp32 end to end against SPI (lines: the steady-state model, circles: measured
  medians, bars: the seeds' range, crosses: the model at the runs' own N and L; on-policy
  points as stars at SPI 1). Right: actor steps/s per precision.
  Writes a PNG; returns its path."""
  import matplotlib  # pylint: disable=g-import-not-at-top (only when plotting)
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  fig, (ax, bx) = plt.subplots(1, 2, figsize=(12.5, 4.6))
  colours = {SINGLE: "tab:blue", LOCAL_MP: "tab:red"}
  for key, c in model.items():
    launch = key.split("/")[1]
    label = f"{key} (model)" if launch == SINGLE else f"{key}, {c['num_actors']} actors (model)"
    ax.plot(spis, c["ratio"], "-", color=colours[launch], label=label)
    for p, style in (("fp32", "-"), ("int8", "--")):
      bx.plot(spis, c[p], style, color=colours[launch], label=f"{key} {p} (model)")
  for s in summary:
    per_seed = [r for r in rows if (r["agent"], r["launch"], r["samples_per_insert"]) ==
                (s["agent"], s["launch"], s["samples_per_insert"])]
    seed_ratios = []
    for seed in s["seeds"]:
      get = lambda p: next(r["measured"] for r in per_seed
                           if r["seed"] == seed and r["precision"] == p)
      seed_ratios.append(get("int8") / get("fp32"))
    colour = colours[s["launch"]]
    marker = "*" if s["on_policy"] else "o"
    yerr = [[s["ratio_measured"] - min(seed_ratios)], [max(seed_ratios) - s["ratio_measured"]]]
    ax.errorbar([s["samples_per_insert"]], [s["ratio_measured"]], yerr=yerr, fmt=marker,
                color=colour, mfc="none" if not s["on_policy"] else colour, ms=9, capsize=3,
                label=(f"{s['agent']} {s['launch']} (on-policy, measured)" if s["on_policy"]
                       else None))
    ax.plot([s["samples_per_insert"]], [s["ratio_predicted"]], "x", color=colour, ms=8)
    for p, fill in (("fp32", colour), ("int8", "none")):
      bx.plot([s["samples_per_insert"]], [s[f"{p}_measured"]], marker, color=colour, mfc=fill,
              ms=8)
  ax.plot([], [], "o", color="grey", mfc="none", label="measured (median of seeds, range)")
  ax.plot([], [], "x", color="grey", label="model at the measured runs' steps (incl. warm-up)")
  ax.axhline(1.0, color="grey", lw=0.8)
  for a in (ax, bx):
    a.set_xscale("log", base=2)
    a.set_xlabel("samples per insert (learner samples per inserted transition)")
    a.grid(alpha=0.3)
  ax.set_ylabel("int8 / fp32 actor steps/s, end to end")
  ax.set_title("Where int8 actors pay on this CPU: end to end, int8 over fp32", fontsize=10)
  bx.set_yscale("log")
  bx.set_ylabel("actor steps/s (filled: fp32, open: int8)")
  bx.set_title("Actor steps/s: model (lines) and measured (markers)", fontsize=10)
  ax.legend(fontsize=7, loc="upper right")
  bx.legend(fontsize=6, loc="lower right")
  fig.tight_layout()
  with atomic.atomic_write(path, "wb") as f:
    fig.savefig(f, dpi=110, format="png")
  plt.close(fig)
  return path


if __name__ == "__main__":
  from actorq.cli.benchmarks import int8_regimes as command_line  # its flags: cli/
  sys.exit(command_line.main())
