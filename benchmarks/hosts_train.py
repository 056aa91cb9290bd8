"""Training across two hosts: `actorq train --launch hosts` with its nodes in two network
namespaces (`testing/netns.py`: 10.231.0.1 runs replay, counter, learner and limiter, and
the launcher; 10.231.0.2 the actors and the evaluator), over a veth link that `tc` may limit,
at each actor precision and seed, side by side in one run.

    sudo .venv/bin/python benchmarks/hosts_train.py --preset dqn --seeds 0,1,2 \\
        --json docs/results/network/train_dqn.json
    sudo .venv/bin/python benchmarks/hosts_train.py --preset actorq --rate 100mbit \\
        --seeds 0,1 --json docs/results/network/e2e_actorq_100mbit.json

Each (seed, precision) run is one `actorq train --launch hosts` process, started in the first
namespace exactly as a user starts it on the first host (`--start 'ip netns exec ...{index}'`
stands for ssh); the precision order rotates by one per seed (`sweep.plan`). Per run, from the
run directory's own files and the link's counters:

  exit            the launcher's exit status (0: the step limit was reached)
  actor_sps       actor steps per second summed over actors, from `counter.csv` (written every
                  5 s by the limiter node): between its first row with actor steps and its last
  learner_sps     learner steps per second over the same rows
  train_*         the same two from the first row with learner steps: the training window,
                  without the unthrottled filling of replay
  first_target    the first evaluation (`eval.csv`) whose greedy return reached `--target`:
                  its actor steps and the run's wall seconds then (None: never)
  final, best     the last and the best evaluation return
  link_rx_Bps     bytes per second the actor host received on its veth end (parameter pulls,
  link_tx_Bps     Reverb and Courier replies) and sent (transitions to Reverb, counter calls)
  wall_s          the launcher's wall time, start-up included

Presets:
  dqn     the default DQN on gym:CartPole-v1, 100k actor steps, 2 actors, evaluation every
          5k steps (10 greedy episodes), target 475: the README's learning criterion.
  actorq  `actorq bench --preset actorq`'s D4PG (3x2048 policy, Acme's replay settings) on
          dmc:cartpole-balance, 1 actor, 6k actor steps, one evaluation episode at the end:
          end-to-end throughput across the link, not learning (too few steps).

`--busy N` runs N CPU-bound processes (Python busy loops, `busy_load`) beside every run, from
before the first run to after the last, standing in for the other jobs of a shared machine:
the program's nodes then get a smaller, varying share of the cores, as they did when this
benchmark first ran on a loaded machine.

Needs root (namespaces, tc); the namespaces are removed on every exit path. All nodes share this
machine's cores, so the figures measure a program split over a link, not two machines' worth
of CPU.
"""
from __future__ import annotations

import contextlib
import csv
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any, Dict, List, Optional

from actorq.benchmarks import actorq_bench as ab
from actorq.components import aggregate as ag
from actorq.testing import netns

PRESETS = {
    "dqn": dict(agent="dqn", env="gym:CartPole-v1", steps=100_000, num_actors=2,
                eval_every=5_000, eval_episodes=10, target=475.0, overrides={}),
    "actorq": dict(agent="d4pg", env="dmc:cartpole-balance", steps=6_000, num_actors=1,
                   eval_every=6_000, eval_episodes=1, target=900.0,
                   overrides=dict(ab.PRESETS["actorq"].overrides)),
}


def _rows(path: str) -> List[Dict[str, str]]:
  if not os.path.exists(path):
    return []
  with open(path, encoding="utf-8") as f:
    return list(csv.DictReader(f))


def _window(rows: List[Dict[str, str]], prefix: str) -> Dict[str, Optional[float]]:
  keys = {f"{prefix}actor_sps": None, f"{prefix}learner_sps": None}
  if len(rows) < 2:
    return keys
  first, last = rows[0], rows[-1]
  dt = float(last["wall_seconds"]) - float(first["wall_seconds"])
  if dt <= 0:
    return keys
  return {f"{prefix}actor_sps": (float(last["actor_steps"]) - float(first["actor_steps"])) / dt,
          f"{prefix}learner_sps": (float(last["learner_steps"]) -
                                   float(first["learner_steps"])) / dt}


def rates(counter_rows: List[Dict[str, str]]) -> Dict[str, Optional[float]]:
  """Actor and learner steps per second from `counter.csv` rows: ``actor_sps`` and
  ``learner_sps`` between the first row with actor steps and the last row; ``train_*`` the
  same from the first row with learner steps (the training window: the unthrottled filling
  of replay left out). None with fewer than two such rows."""
  acting = [r for r in counter_rows if float(r["actor_steps"]) > 0]
  training = [r for r in counter_rows if float(r["learner_steps"]) > 0]
  return {**_window(acting, ""), **_window(training, "train_")}


def evaluations(eval_rows: List[Dict[str, str]], target: float) -> Dict[str, Any]:
  """Final and best greedy return, and the first evaluation at or above `target`."""
  returns = [(float(r["actor_steps"]), float(r["episode_return"]), float(r["wall_seconds"]))
             for r in eval_rows]
  hit = next((r for r in returns if r[1] >= target), None)
  return {"evals": [[s, g] for s, g, _ in returns],
          "final": returns[-1][1] if returns else None,
          "best": max(g for _, g, _ in returns) if returns else None,
          "first_target_steps": None if hit is None else hit[0],
          "first_target_wall_s": None if hit is None else hit[2]}


def train_argv(pair: netns.HostPair, settings: Dict[str, Any], precision: str, seed: int,
               logdir: str) -> List[str]:
  """The launcher's command line, run in the first namespace."""
  argv = pair.exec_argv(0) + [
      sys.executable, "-m", "actorq.cli.main", "train", "--launch", "hosts",
      "--hosts", ",".join(pair.addresses),
      "--start", f"ip netns exec {pair.names[0][:-1]}{{index}}",
      "--num-actors", str(settings["num_actors"]), "--agent", settings["agent"],
      "--env", settings["env"], "--steps", str(settings["steps"]), "--seed", str(seed),
      "--actor-precision", precision, "--eval-every", str(settings["eval_every"]),
      "--eval-episodes", str(settings["eval_episodes"]), "--logdir", logdir, "--no-progress"]
  for key, value in settings["overrides"].items():
    argv += ["--set", f"{key}={json.dumps(value)}"]
  return argv


def run_one(pair, settings, precision, seed, logdir, timeout_s) -> Dict[str, Any]:
  before = pair.link_bytes(1)
  start = time.time()
  with open(os.path.join(os.path.dirname(logdir), os.path.basename(logdir) + ".out"), "w",
            encoding="utf-8") as out:
    try:
      code = subprocess.run(train_argv(pair, settings, precision, seed, logdir), stdout=out,
                            stderr=subprocess.STDOUT, timeout=timeout_s,
                            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")).returncode
    except subprocess.TimeoutExpired:
      code = None
  wall = time.time() - start
  after = pair.link_bytes(1)
  result = {"precision": precision, "seed": seed, "exit": code, "wall_s": wall,
            "link_rx_Bps": (after["rx_bytes"] - before["rx_bytes"]) / wall,
            "link_tx_Bps": (after["tx_bytes"] - before["tx_bytes"]) / wall,
            "logdir": logdir}
  result.update(rates(_rows(os.path.join(logdir, "counter.csv"))))
  result.update(evaluations(_rows(os.path.join(logdir, "eval.csv")), settings["target"]))
  return result


def _median(values):
  values = [v for v in values if v is not None]
  return statistics.median(values) if values else None


def summarize(runs: List[Dict[str, Any]], precisions, target) -> Dict[str, Dict[str, Any]]:
  """Per precision: medians over seeds, how many seeds reached the target, and the final
  return's IQM over seeds with its 95% stratified bootstrap interval (``final_iqm``:
  [estimate, low, high], `benchmarks.aggregate.interval`, as `actorq sweep` reports it; None
  without a final evaluation); with fp32 and int8 both present, int8/fp32 ratios paired by
  seed (median)."""
  out = {}
  for p in precisions:
    mine = [r for r in runs if r["precision"] == p]
    out[p] = {"seeds": len(mine), "finished": sum(r["exit"] == 0 for r in mine),
              "reached_target": sum(r["first_target_steps"] is not None for r in mine),
              "final_ge_target": sum(r["final"] is not None and r["final"] >= target
                                     for r in mine),
              **{k: _median([r[k] for r in mine]) for k in (
                  "actor_sps", "learner_sps", "train_actor_sps", "train_learner_sps", "final",
                  "best", "first_target_steps",
                  "first_target_wall_s", "link_rx_Bps", "link_tx_Bps", "wall_s")}}
    finals = [r["final"] for r in mine if r["final"] is not None]
    out[p]["final_iqm"] = list(ag.interval(finals, "iqm")) if finals else None
  if "fp32" in precisions and "int8" in precisions:
    by_seed = {(r["precision"], r["seed"]): r for r in runs}
    for key in ("actor_sps", "train_actor_sps", "train_learner_sps", "link_rx_Bps"):
      ratios = [by_seed[("int8", s)][key] / by_seed[("fp32", s)][key]
                for s in sorted({r["seed"] for r in runs})
                if by_seed.get(("int8", s), {}).get(key) and by_seed.get(("fp32", s), {}).get(key)]
      out["int8/fp32"] = {**out.get("int8/fp32", {}), key: _median(ratios)}
  return out


def fmt(v, digits=0):
  return "-" if v is None else f"{v:,.{digits}f}"


def format_table(runs, summary, settings, rate) -> str:
  lines = [f"{settings['agent']} on {settings['env']}, {settings['steps']} actor steps, "
           f"{settings['num_actors']} actor(s) on the second host, link {rate or 'unlimited'}",
           "", "| precision | seed | exit | actor steps/s | training: actor / learner steps/s | "
           "first >= target (steps / s) | final | best | actor host rx kB/s | tx kB/s | wall s |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
  for r in runs:
    first = ("not reached" if r["first_target_steps"] is None else
             f"{r['first_target_steps']:,.0f} / {r['first_target_wall_s']:,.0f}")
    lines.append(f"| {r['precision']} | {r['seed']} | {r['exit']} | {fmt(r['actor_sps'], 1)} | "
                 f"{fmt(r['train_actor_sps'], 1)} / {fmt(r['train_learner_sps'], 2)} | "
                 f"{first} | {fmt(r['final'], 1)} | "
                 f"{fmt(r['best'], 1)} | {fmt(r['link_rx_Bps'] / 1e3, 1)} | "
                 f"{fmt(r['link_tx_Bps'] / 1e3, 1)} | {fmt(r['wall_s'])} |")
  lines.append("")
  for p, s in summary.items():
    if p == "int8/fp32":
      lines.append("int8/fp32 paired by seed (median): " + ", ".join(
          f"{k} {fmt(v, 2)}x" for k, v in s.items()))
      continue
    lines.append(f"{p}: {s['finished']}/{s['seeds']} finished, {s['reached_target']}/"
                 f"{s['seeds']} reached {settings['target']:g}, final >= target on "
                 f"{s['final_ge_target']}/{s['seeds']}; "
                 + (f"final IQM {s['final_iqm'][0]:.1f} [{s['final_iqm'][1]:.1f}, "
                    f"{s['final_iqm'][2]:.1f}] (95% stratified bootstrap); "
                    if s.get("final_iqm") else "") +
                 f"medians: actor steps/s "
                 f"{fmt(s['actor_sps'], 1)} (training window {fmt(s['train_actor_sps'], 1)}), "
                 f"learner steps/s {fmt(s['train_learner_sps'], 2)}, "
                 f"final {fmt(s['final'], 1)}, first >= target at {fmt(s['first_target_steps'])} "
                 f"steps")
  return "\n".join(lines)








@contextlib.contextmanager
def busy_load(n: int):
  """`n` CPU-bound child processes (each `while True: pass`) for the duration of the block;
  each is killed and reaped on exit, also on an exception. Yields their pids."""
  procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"],
                            stdin=subprocess.DEVNULL) for _ in range(n)]
  try:
    yield [p.pid for p in procs]
  finally:
    for p in procs:
      p.kill()
    for p in procs:
      p.wait()


if __name__ == "__main__":
  from actorq.cli.benchmarks import hosts_train as command_line  # its flags: cli/
  sys.exit(command_line.main())
