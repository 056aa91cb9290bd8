"""A scaling model of a distributed ActorQ run: end-to-end actor steps/s against the number
of actors N and the learner's step time, from measured per-component costs.

    python -m actorq.benchmarks.scaling --calibrate RUN_DIR_N1 \\
        --validate RUN_DIR_N1 RUN_DIR_N2 --out DIR      # RUN_DIRs of `actorq bench --launch`

The model (all times in seconds; p is the actor precision):

  Costs (`Costs`, measured by `actorq bench --launch`, `costs_from_run`):
    t_a(p)   actor CPU seconds per actor step, parameter pulls excluded (env step,
             inference, adder, loop)
    t_pull(p) seconds per parameter pull on the actor (Courier fetch + load into the
             runtime); one pull every K actor steps (`variable_update_period`)
    t_L      the learner's seconds per learner step (update + publish; waiting excluded)
    c_L      host CPU seconds per learner step (a CPU learner: its process's CPU per step;
             a GPU learner: the host's share, sampling and dispatch)
    c_r      CPU seconds of the replay node per actor step (inserting it and sampling it
             SPI times)
    e        cores taken regardless of throughput (the evaluator's, counter's and
             limiter's measured shares: they poll at fixed periods)
    B, SPI   batch size and samples per insert; C cores

  One actor with a core to itself steps at r_a(p) = 1 / (t_a(p) + t_pull(p) / K).
  (1) actor-bound:   X_A = N * r_a(p)
  (2) learner-bound: X_L = B / (SPI * t_L). Reverb's SampleToInsertRatio limiter keeps
      samples / inserts at SPI (within its error buffer); a learner step samples B items and
      each actor step inserts one n-step transition, so the actors may insert at most
      B / SPI items per learner step (Acme's convention, `components/replay/reverb_replay.py`).
  (3) core-bound:    X_C = (C - e) / (t_a(p) + t_pull(p) / K + c_r + (SPI / B) * c_L): every
      actor step needs its own CPU, its share of replay work and SPI / B learner steps' host
      CPU, and together they cannot use more than the C - e free cores (core sharing).
  X(N) = min(X_A, X_L, X_C); the bound is the term that attains the minimum. The run
  becomes learner-bound at N_L = X_L / r_a(p) actors when X_L < X_C (else it becomes
  core-bound first, at N_C = X_C / r_a(p)).

Not modelled: start-up, the rate limiter's error buffer (slack of a few hundred inserts),
evaluator bursts, memory bandwidth and the GIL inside a node, and a GPU learner's own
limits beyond the assumed t_L.
"""
from __future__ import annotations

import dataclasses
import json
import os
import sys
from typing import Any, Dict, List, Optional, Sequence

from actorq.components import atomic

BOUNDS = ("actor", "learner", "cores")
FIXED_NODES = ("evaluator/0", "counter/0", "limiter/0")


@dataclasses.dataclass(frozen=True)
class Costs:
  """Measured (or assumed) per-component costs; see the module docstring for each symbol.

  Attributes:
    actor_s: precision -> t_a, actor CPU seconds per actor step without pulls (> 0).
    pull_s: precision -> t_pull, seconds per parameter pull on the actor (>= 0).
    update_period: K, actor steps between pulls (>= 1).
    learner_s: t_L, seconds per learner step (> 0).
    learner_cpu_s: c_L, host CPU seconds per learner step (>= 0).
    replay_cpu_s: c_r, replay CPU seconds per actor step (>= 0).
    fixed_cores: e, cores busy regardless of throughput (>= 0, < cores).
    batch_size: B (>= 1). samples_per_insert: SPI (> 0). cores: C (> 0).

  Raises:
    ValueError: a value out of range (naming it).
  """
  actor_s: Dict[str, float]
  pull_s: Dict[str, float]
  update_period: int
  learner_s: float
  learner_cpu_s: float
  replay_cpu_s: float
  fixed_cores: float
  batch_size: int
  samples_per_insert: float
  cores: float

  def __post_init__(self):
    if not self.actor_s or any(not v > 0 for v in self.actor_s.values()):
      raise ValueError(f"actor_s must give each precision a time > 0, got {self.actor_s}")
    if set(self.pull_s) != set(self.actor_s) or any(not v >= 0 for v in self.pull_s.values()):
      raise ValueError(f"pull_s must give the precisions of actor_s a time >= 0, got "
                       f"{self.pull_s}")
    for name, ok in (("update_period", self.update_period >= 1),
                     ("learner_s", self.learner_s > 0), ("learner_cpu_s", self.learner_cpu_s >= 0),
                     ("replay_cpu_s", self.replay_cpu_s >= 0),
                     ("batch_size", self.batch_size >= 1),
                     ("samples_per_insert", self.samples_per_insert > 0),
                     ("cores", self.cores > 0),
                     ("fixed_cores", 0 <= self.fixed_cores < self.cores)):
      if not ok:
        raise ValueError(f"{name} out of range: {getattr(self, name)!r}")


@dataclasses.dataclass(frozen=True)
class Prediction:
  """X(N) and its three terms (actor steps/s); `bound`: which term is the minimum."""
  num_actors: int
  steps_per_s: float
  actor_bound: float
  learner_bound: float
  core_bound: float
  bound: str


def actor_rate(costs: Costs, precision: str) -> float:
  """r_a(p) = 1 / (t_a + t_pull / K): one actor's steps/s with a core to itself."""
  return 1.0 / (costs.actor_s[precision] + costs.pull_s[precision] / costs.update_period)


def learner_bound(costs: Costs) -> float:
  """X_L = B / (SPI * t_L), actor steps/s."""
  return costs.batch_size / (costs.samples_per_insert * costs.learner_s)


def core_bound(costs: Costs, precision: str) -> float:
  """X_C = (C - e) / (t_a + t_pull / K + c_r + (SPI / B) * c_L), actor steps/s."""
  per_step = (1.0 / actor_rate(costs, precision) + costs.replay_cpu_s
              + costs.samples_per_insert / costs.batch_size * costs.learner_cpu_s)
  return (costs.cores - costs.fixed_cores) / per_step


def predict(costs: Costs, precision: str, num_actors: int) -> Prediction:
  """X(N) = min(X_A, X_L, X_C) for `num_actors` actors at `precision`.

  Raises:
    ValueError: num_actors < 1; KeyError: a precision `costs` has no cost for.
  """
  if num_actors < 1:
    raise ValueError(f"num_actors must be >= 1, got {num_actors}")
  terms = (num_actors * actor_rate(costs, precision), learner_bound(costs),
           core_bound(costs, precision))
  i = min(range(3), key=lambda k: terms[k])
  return Prediction(num_actors, terms[i], *terms, BOUNDS[i])


def saturation_point(costs: Costs, precision: str) -> Dict[str, Any]:
  """Where adding actors stops helping: {"num_actors": N_L or N_C (a real number),
  "bound": "learner" or "cores", "steps_per_s": the plateau}."""
  x_l, x_c = learner_bound(costs), core_bound(costs, precision)
  bound, plateau = ("learner", x_l) if x_l <= x_c else ("cores", x_c)
  return {"num_actors": plateau / actor_rate(costs, precision), "bound": bound,
          "steps_per_s": plateau}


def _mean(values: Sequence[float]) -> float:
  return float(sum(values) / len(values))


def costs_from_run(run: Dict[str, Any], cores: float) -> Dict[str, Any]:
  """The measured costs of one `actorq bench --launch` run (an entry of its
  bench_distributed.json "runs"), for its own precision: the keyword arguments of `Costs`
  with actor_s and pull_s as single values.

  t_a: the actor nodes' mean CPU per step minus their pull cost per step; t_pull: (load +
  fetch seconds) / pulls over the whole run (a window holds few pulls); t_L: update + publish per learner step; c_L: the learner node's
  CPU per learner step; c_r: the replay node's CPU seconds per actor step in the window;
  e: the evaluator's, counter's and limiter's cores in the window (at most half the cores).

  Raises:
    ValueError: the run has no learner steps or no pulls in its window.
  """
  actors = run["actor_us"]
  pulls = sum(a["pulls_total"] for a in actors)
  if pulls <= 0 or not run["learner_steps_window"] > 0:
    raise ValueError("the run has no pulls or its window no learner steps: run it longer")
  pull_s = sum(a["pull_s_total"] for a in actors) / pulls
  period = int(run["variable_update_period"])
  cpu_step = _mean([a["cpu"] for a in actors]) / 1e6
  lus = run["learner_us"]
  fixed = sum(run["cpu_cores"].get(n, 0.0) for n in FIXED_NODES)
  return {"actor_s": max(cpu_step - pull_s / period, 1e-6), "pull_s": pull_s,
          "update_period": period, "learner_s": (lus["update"] + lus["publish"]) / 1e6,
          "learner_cpu_s": lus["cpu"] / 1e6,
          "replay_cpu_s": run["cpu_cores"].get("replay/0", 0.0) / run["actor_steps_per_s"],
          "fixed_cores": min(fixed, 0.5 * cores),
          "batch_size": int(run["batch_size"]),
          "samples_per_insert": float(run["samples_per_insert"]), "cores": float(cores)}


def calibrate(runs: Sequence[Dict[str, Any]], cores: float) -> Costs:
  """`Costs` from runs of one setting at several precisions: per-precision actor costs
  from each precision's run(s) (means), the shared terms averaged over all runs.

  Raises:
    ValueError: no runs; see `costs_from_run`.
  """
  if not runs:
    raise ValueError("calibrate needs at least one run")
  parts = [(r["precision"], costs_from_run(r, cores)) for r in runs]
  precisions = sorted({p for p, _ in parts})
  per = lambda key, p: _mean([c[key] for q, c in parts if q == p])
  shared = lambda key: _mean([c[key] for _, c in parts])
  return Costs(actor_s={p: per("actor_s", p) for p in precisions},
               pull_s={p: per("pull_s", p) for p in precisions},
               update_period=int(parts[0][1]["update_period"]),
               learner_s=shared("learner_s"), learner_cpu_s=shared("learner_cpu_s"),
               replay_cpu_s=shared("replay_cpu_s"), fixed_cores=shared("fixed_cores"),
               batch_size=int(parts[0][1]["batch_size"]),
               samples_per_insert=float(parts[0][1]["samples_per_insert"]),
               cores=float(cores))


def validate(costs: Costs, runs: Sequence[Dict[str, Any]]) -> List[Dict[str, Any]]:
  """Predicted vs measured actor steps/s of each run: rows with num_actors, precision,
  measured, predicted, bound and error = predicted / measured - 1."""
  rows = []
  for r in runs:
    pred = predict(costs, r["precision"], int(r["num_actors"]))
    rows.append({"num_actors": int(r["num_actors"]), "precision": r["precision"],
                 "seed": r["seed"], "measured": r["actor_steps_per_s"],
                 "predicted": pred.steps_per_s, "bound": pred.bound,
                 "error": pred.steps_per_s / r["actor_steps_per_s"] - 1.0})
  return rows


def curves(costs: Costs, max_actors: int) -> Dict[str, List[Dict[str, Any]]]:
  """precision -> [`Prediction` as a dict for N = 1..max_actors]."""
  return {p: [dataclasses.asdict(predict(costs, p, n)) for n in range(1, max_actors + 1)]
          for p in sorted(costs.actor_s)}


def plot(panels: Sequence[Dict[str, Any]], path: str) -> str:
  """One panel per entry {"title", "costs", "max_actors", "measured": [(N, precision,
  steps/s)]}: X(N) per precision, the saturation point marked, measured points on top.
  Writes a PNG to `path`; returns it."""
  import matplotlib  # pylint: disable=g-import-not-at-top (only when plotting)
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  fig, axes = plt.subplots(1, len(panels), figsize=(6.2 * len(panels), 4.4), squeeze=False)
  colours = {"fp32": "tab:blue", "int8": "tab:orange", "fp16": "tab:green",
             "bf16": "tab:purple"}
  styles = {"fp32": "-", "int8": "--"}
  for ax, panel in zip(axes[0], panels):
    costs, n_max = panel["costs"], panel["max_actors"]
    for k, (p, rows) in enumerate(curves(costs, n_max).items()):
      colour = colours.get(p)
      ax.plot([r["num_actors"] for r in rows], [r["steps_per_s"] for r in rows],
              styles.get(p, ":"), color=colour, label=f"{p} (model)")
      sat = saturation_point(costs, p)
      where = (f"from N={sat['num_actors']:.1f}" if sat["num_actors"] >= 1 else
               f"at every N (saturates at N={sat['num_actors']:.2f})")
      if 1 <= sat["num_actors"] <= n_max:
        ax.axvline(sat["num_actors"], color=colour, ls=":", lw=1)
      ax.text(0.02, 0.97 - 0.07 * k, f"{p}: {sat['bound']}-bound {where}, "
              f"{sat['steps_per_s']:,.{0 if sat['steps_per_s'] >= 100 else 1}f} steps/s",
              transform=ax.transAxes, fontsize=8,
              color=colour, va="top")
    for n, p, value in panel.get("measured", ()):
      ax.plot([n], [value], "o", color=colours.get(p), mfc="none", ms=8)
    ax.set_title(panel["title"], fontsize=9)
    ax.set_xlabel("actors N")
    ax.set_ylabel("actor steps/s (end to end)")
    ax.set_ylim(0, 1.25 * ax.get_ylim()[1])
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
  fig.tight_layout()
  with atomic.atomic_write(path, "wb") as f:
    fig.savefig(f, dpi=110, format="png")
  plt.close(fig)
  return path


def parse_us(text: Optional[str], default: Dict[str, float]) -> Dict[str, float]:
  """``"fp32=1873,int8=958"`` (microseconds) as {precision: seconds} for the precisions of
  `default` (None: `default`).

  Raises:
    ValueError: not P=US pairs with US > 0, or not exactly `default`'s precisions.
  """
  if text is None:
    return dict(default)
  out = {}
  for part in text.split(","):
    name, _, value = part.partition("=")
    try:
      out[name.strip()] = float(value) / 1e6
    except ValueError:
      raise ValueError(f"{part!r} is not P=US (e.g. fp32=1873)") from None
  if set(out) != set(default) or not all(v > 0 for v in out.values()):
    raise ValueError(f"give each of {', '.join(sorted(default))} a time > 0 us, got {text!r}")
  return out


def load_runs(directory: str) -> List[Dict[str, Any]]:
  path = os.path.join(directory, "bench_distributed.json")
  if not os.path.exists(path):
    raise FileNotFoundError(f"no bench_distributed.json in {directory}")
  with open(path, encoding="utf-8") as f:
    return json.load(f)["runs"]


if __name__ == "__main__":
  from actorq.cli.benchmarks import scaling as command_line  # its flags: cli/
  sys.exit(command_line.main())
