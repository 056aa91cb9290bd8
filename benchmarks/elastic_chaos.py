"""Chaos benchmark of elastic actors (issue 56): a `local_mp` DQN program with 3 actors in
which a random actor node process is SIGKILLed every `--every` seconds, beside the same run
without faults, per seed, side by side in one run.

    nice -n 10 .venv/bin/python benchmarks/elastic_chaos.py --seeds 0,1,2 --steps 6000 \\
        --json docs/results/elastic/chaos.json

Per seed, two runs of the default DQN on gym:CartPole-v1 (`--launch local_mp`, 3 actors,
`--max-actor-restarts` large enough for every kill): ``none`` (no fault) and ``chaos``.
In ``chaos`` the first kill comes once the learner steps, then one every `--every` seconds
(the actor drawn at random, seeded by the run's seed, among those whose process runs and
has stepped since its (re)start), until `--kill-until` of the steps are done (a restart
takes seconds: a kill near the end would not be seen through). The launcher is this process: the program runs under
`ChaosProcesses`, the `local_mp` supervisor that also does the killing (registered as the
unlisted launch type ``local_mp_chaos``), and the counter's totals are read about twice a
second (`distributed.launch`'s `on_poll`). Per run:

  exit, reason     the launcher's (0, finished: the step limit was reached)
  restarts         restarts counted by the supervisor (must equal the kills)
  per kill:
    restart_s      from the SIGKILL to the first poll at which the killed actor's own step
                   count (`actor_<i>_steps`) has grown past its value 1 s after the kill
                   (the first backoff; the dead process's last counter calls land before):
                   its restart (backoff, process start, imports, re-attaching to replay,
                   learner and counter)
    learner_stall_s  the longest time, between the kill and that first step, over which the
                   counter's `learner_steps` did not change (the learner's counter reports
                   every 0.5 s, so ~0.5-1 s is a learner that never stopped)
  longest_stall_s  the same over the whole run from the learner's first step (no-fault runs
                   give the measurement's floor)
  final_return     the evaluation at the step limit (`--eval-episodes` greedy episodes)
  left_running     node processes still alive after `launch` returned (must be 0)

The summary compares the chaos runs' final returns with the no-fault runs' over the seeds;
the verdict declared before the run: the chaos runs' median final return lies within the
no-fault runs' [min, max], every run finishes, every kill is restarted (counted by the
supervisor), no process is left, and each restart's learner stall is shorter than the
restart itself (a restart whose actor had not stepped again when the run ended is reported
as unfinished, its stall measured to the end).
"""
from __future__ import annotations

import dataclasses
import json
import os
import random
import signal
import statistics
import sys
import time
from typing import Any, Dict, List, Optional

import psutil

from actorq.launch import distributed, elastic, spec as spec_lib, supervisors


class Chaos:
  """When and whom to kill: every `every_s` seconds from the learner's first step, a random
  actor among those that run and have stepped since their (re)start."""

  def __init__(self, every_s: float, seed: int, num_actors: int, last_step: float):
    self.every_s = float(every_s)
    self.last_step = float(last_step)
    self.rng = random.Random(seed)
    self.num_actors = num_actors
    self.kills: List[Dict[str, Any]] = []
    self.polls: List[tuple] = []  # (time.monotonic(), counts)
    self._last_kill: Optional[float] = None

  def on_poll(self, counts: Dict[str, float]) -> None:
    now = time.monotonic()
    self.polls.append((now, dict(counts)))
    for kill in self.kills:  # the killed process's last counter calls have landed by now
      if kill.get("settled") is None and now >= kill["t"] + elastic.BACKOFF_BASE_S:
        kill["settled"] = counts.get(f"actor_{kill['actor']}_steps", 0)

  def _latest(self) -> Dict[str, float]:
    return self.polls[-1][1] if self.polls else {}

  def _up(self, i: int, counts: Dict[str, float]) -> bool:
    """Actor i has stepped since its last (re)start: past its count once its last kill
    settled (or at all, if never killed)."""
    kills = [k for k in self.kills if k["actor"] == i]
    if not kills:
      return counts.get(f"actor_{i}_steps", 0) > 0
    settled = kills[-1].get("settled")
    return settled is not None and counts.get(f"actor_{i}_steps", 0) > settled

  def pick(self, running: List[int]) -> Optional[int]:
    """The actor to kill now (None: not now)."""
    counts, now = self._latest(), time.monotonic()
    if counts.get("learner_steps", 0) <= 0 or counts.get("actor_steps", 0) >= self.last_step:
      return None
    if self._last_kill is not None and now - self._last_kill < self.every_s:
      return None
    up = [i for i in running if self._up(i, counts)]
    if not up:
      return None
    return self.rng.choice(up)

  def killed(self, i: int, pid: int) -> None:
    self._last_kill = time.monotonic()
    self.kills.append({"t": self._last_kill, "actor": i, "pid": pid, "settled": None})


class ChaosProcesses(supervisors.Processes):
  """`local_mp` that also SIGKILLs an actor node process when `chaos` says so."""
  chaos: Optional[Chaos] = None

  def check(self) -> Optional[str]:
    chaos = type(self).chaos
    if chaos is not None:
      running = [i for i in range(chaos.num_actors)
                 if self.procs.exit_codes()[f"actor/{i}"] is None]
      i = chaos.pick(running)
      if i is not None:
        pid = self.procs.procs[self.procs.titles.index(f"actor/{i}")].pid
        os.kill(pid, signal.SIGKILL)
        chaos.killed(i, pid)
    return super().check()


def longest_stall(polls: List[tuple], start: float, end: float) -> float:
  """The longest time within [start, end] over which `learner_steps` did not change
  (from the poll series: the time between the last poll of an unchanged value's first
  sighting and the poll that saw it change)."""
  longest, since, value = 0.0, None, None
  for t, counts in polls:
    steps = counts.get("learner_steps", 0)
    if steps != value:
      if since is not None and t >= start:
        longest = max(longest, min(t, end) - max(since, start))
      since, value = t, steps
    if t > end:
      break
  else:
    if since is not None:
      longest = max(longest, min(polls[-1][0], end) - max(since, start))
  return max(0.0, longest)


def measure(chaos: Chaos) -> Dict[str, Any]:
  polls = chaos.polls
  first = next((t for t, c in polls if c.get("learner_steps", 0) > 0), None)
  out: Dict[str, Any] = {"longest_stall_s": None if first is None else round(
      longest_stall(polls, first, polls[-1][0]), 2), "kills": []}
  for kill in chaos.kills:
    key = f"actor_{kill['actor']}_steps"
    # The killed process's last counter calls may land after the kill; its successor starts
    # no sooner than the first backoff (1 s): its steps are those past the count then.
    settled = kill.get("settled")
    back = None if settled is None else next(
        (t for t, c in polls if t > kill["t"] + elastic.BACKOFF_BASE_S and c.get(key, 0) > settled),
        None)
    restart_s = None if back is None else back - kill["t"]
    stall = longest_stall(polls, kill["t"], back if back is not None else polls[-1][0])
    out["kills"].append({"actor": kill["actor"], "at_s": round(kill["t"] - polls[0][0], 1),
                         "restart_s": None if restart_s is None else round(restart_s, 2),
                         "learner_stall_s": round(stall, 2)})
  return out


@dataclasses.dataclass(frozen=True)
class ChaosSettings:
  """One benchmark's settings (the flags of `python -m actorq.benchmarks.elastic_chaos`).

  Attributes:
    steps: actor steps of each run.
    eval_every, eval_episodes: actor steps between greedy evaluations, episodes of each.
    num_actors: actor nodes of each `local_mp` run.
    every: seconds between kills.
    max_restarts: restarts allowed per node (`DistributedOptions.max_actor_restarts`).
    kill_until: no kill once this fraction of `steps` is done.
    logdir: the runs' parent directory (one `s<seed>-<mode>` folder per run).
  """
  steps: int = 6000
  eval_every: int = 10**9
  eval_episodes: int = 10
  num_actors: int = 3
  every: float = 15.0
  max_restarts: int = 100
  kill_until: float = 0.5
  logdir: str = "/tmp/actorq-elastic-chaos"


def run_one(seed: int, mode: str, args: ChaosSettings) -> Dict[str, Any]:
  logdir = os.path.join(args.logdir, f"s{seed}-{mode}")
  spec = spec_lib.RunSpec(seed=seed, steps=args.steps, eval_every=args.eval_every,
                          eval_episodes=args.eval_episodes, launch="local_mp",
                          num_actors=args.num_actors, logdir=logdir, checkpoint_every=None)
  config = spec.build()
  options = distributed.DistributedOptions(max_actor_restarts=args.max_restarts)
  dp = distributed.make_program(config, args.num_actors, options=options,
                                name=f"chaos-{mode}-s{seed}")
  chaos = Chaos(args.every, seed, args.num_actors, args.kill_until * args.steps)
  ChaosProcesses.chaos = chaos if mode == "chaos" else None
  seen = set()

  def on_poll(counts):
    seen.update(psutil.Process().children(recursive=True))
    chaos.on_poll(counts)

  started = time.time()
  result = distributed.launch(dp, "local_mp_chaos", echo=False, on_poll=on_poll)
  time.sleep(1.0)
  left = [p.pid for p in seen if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
  row = {"seed": seed, "mode": mode, "exit": result.exit_code, "reason": result.reason,
         "detail": result.detail, "wall_s": round(time.time() - started, 1),
         "actor_steps": int(result.counts.get("actor_steps", 0)),
         "learner_steps": int(result.counts.get("learner_steps", 0)),
         "restarts": sum(result.restarts.values()), "final_return": result.final_eval_return,
         "left_running": len(left), **measure(chaos)}
  print(json.dumps(row), flush=True)
  return row


def summarize(rows: List[Dict[str, Any]]) -> Dict[str, Any]:
  none = [r["final_return"] for r in rows if r["mode"] == "none"]
  chaos = [r["final_return"] for r in rows if r["mode"] == "chaos"]
  kills = [k for r in rows if r["mode"] == "chaos" for k in r["kills"]]
  restarts = [k["restart_s"] for k in kills if k["restart_s"] is not None]
  stalls = [k["learner_stall_s"] for k in kills]
  ok = (all(r["exit"] == 0 for r in rows) and all(r["left_running"] == 0 for r in rows)
        and all(r["restarts"] == len(r["kills"]) for r in rows)
        and all(k["restart_s"] is None or k["learner_stall_s"] < k["restart_s"] for k in kills)
        and bool(none) and bool(chaos) and min(none) <= statistics.median(chaos) <= max(none))
  return {"kills": len(kills), "restarts": sum(r["restarts"] for r in rows),
          "restarts_unfinished_at_the_end": sum(k["restart_s"] is None for k in kills),
          "restart_s_median": statistics.median(restarts) if restarts else None,
          "restart_s_max": max(restarts) if restarts else None,
          "learner_stall_s_median": statistics.median(stalls) if stalls else None,
          "learner_stall_s_max": max(stalls) if stalls else None,
          "no_fault_longest_stall_s_max": max(
              (r["longest_stall_s"] or 0.0) for r in rows if r["mode"] == "none"),
          "final_return_none": none, "final_return_chaos": chaos,
          "final_return_none_median": statistics.median(none) if none else None,
          "final_return_chaos_median": statistics.median(chaos) if chaos else None,
          "verdict": "pass" if ok else "fail"}


def render(report: Dict[str, Any]) -> str:
  """The report as markdown: per run, then per kill, then the summary."""
  rows, summary = report["rows"], report["summary"]
  lines = [f"Command: `{report['command']}` ({report['date']}, {report['machine']}).", "",
           "| seed | run | exit | actor steps | learner steps | kills | restarts | restart s "
           "(each) | learner stall s (each) | longest stall s (run) | final return | left "
           "running |", "|" + "---|" * 12]
  for r in rows:
    kills = r["kills"]
    each = lambda key: ", ".join("-" if k[key] is None else f"{k[key]:.1f}" for k in kills) or "-"
    lines.append(f"| {r['seed']} | {r['mode']} | {r['exit']} | {r['actor_steps']} | "
                 f"{r['learner_steps']} | {len(kills)} | {r['restarts']} | {each('restart_s')} | "
                 f"{each('learner_stall_s')} | {r['longest_stall_s']} | {r['final_return']:.1f} | "
                 f"{r['left_running']} |")
  fmt = lambda v: "-" if v is None else (f"{v:.1f}" if isinstance(v, float) else str(v))
  lines += ["", f"Kills {summary['kills']}, restarts {summary['restarts']} ("
            f"{summary['restarts_unfinished_at_the_end']} not seen stepping before the run "
            "ended, '-' above); restart "
            f"{fmt(summary['restart_s_median'])} s median (max {fmt(summary['restart_s_max'])}); "
            f"the learner's longest stall during a restart {fmt(summary['learner_stall_s_median'])} s "
            f"median (max {fmt(summary['learner_stall_s_max'])}; the no-fault runs' longest stall "
            f"anywhere: {fmt(summary['no_fault_longest_stall_s_max'])} s). Final return, no fault "
            f"{', '.join(fmt(v) for v in summary['final_return_none'])} (median "
            f"{fmt(summary['final_return_none_median'])}); chaos "
            f"{', '.join(fmt(v) for v in summary['final_return_chaos'])} (median "
            f"{fmt(summary['final_return_chaos_median'])}). Verdict: {summary['verdict']}."]
  return "\n".join(lines) + "\n"


if __name__ == "__main__":  # its flags live in cli/
  from actorq.cli.benchmarks import elastic_chaos as command_line
  sys.exit(command_line.main())
