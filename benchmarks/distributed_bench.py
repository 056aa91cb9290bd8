"""The distributed ActorQ benchmark: one agent trained as a Launchpad program (replay,
counter, learner, N actors, evaluator, limiter) at each actor precision, measured end to
end and per node.

    actorq bench --preset actorq --launch local_mp --num-actors 2 --steps 10000

Every (seed, precision) run makes the program with
`actorq.launch.distributed.make_program` and runs it with `distributed.launch` (the seam
`actorq train --launch ...` uses), the builder wrapped by
`components.profiling.InstrumentedBuilder` so that every node times its own objects.
Under `local_mp` the bench process is the launcher (every node has its own process
anyway); a `local_mt` program, whose nodes are threads of the launcher's process, runs
in a fresh child process (`python -m actorq.benchmarks.distributed_bench --child
JOB.json --out RUN.json`), so that runs do not share a process.
Runs are interleaved as in the single-process bench (`actorq_bench.jobs_for`: per seed
every precision, the order rotated by one from seed to seed), with the same seeds.

While the program runs, the child polls (`Sampler`, every `period_s` and at the step
limit): the counter, each node's CPU seconds (`Supervisor.cpu_seconds`: under
`local_mp` each node process's tree, under `local_mt` the one process), the learner's
and actors' `profile()` (Courier) and Reverb's `server_info()`. Every rate below is a
difference between the first poll at which the learner has stepped and the last poll
(the *training window*, `window_s`: the steady state under the rate limiter; start-up,
imports, the actors filling replay to `min_replay_size` unthrottled and the final
checkpoint are outside it):

  actor_steps_per_s     sum over actor nodes of their own steps in the window / window_s
  run_actor_steps_per_s all actor steps / seconds from the launch to the last poll
  learner_steps_per_s   learner steps in the window / window_s
  bytes_sent_per_s      the learner's PolicyServer: sum over precisions of payload bytes x
                        pulls served in the window / window_s (actors and evaluator pull)
  time_to_target_s      seconds from the launch until the actors had taken the steps of
                        the first evaluation whose return reached the target
                        (interpolated on the polls' (time, actor steps)); NaN: not reached
  final_return          the last evaluation's mean greedy return
  cpu_seconds[node]     CPU seconds of the node up to the last poll (start-up included);
                        cpu_cores[node]: its CPU seconds in the window / window_s
  inserts_blocked_s     Reverb's table worker: time with inserts pending and blocked by
                        the rate limiter (`waiting_for_sampling_ms`): actors wait
  samples_blocked_s     the same for samples (`waiting_for_inserts_ms`): the learner waits
  waiting_side          the side with the larger blocked time (measured, not inferred)

Per actor node, microseconds per actor step in the window (`actor_us`): env_step,
inference, adder (the n-step adder's Reverb writes, including any wait on the rate
limiter), load (a pulled version loaded into the runtime), update_other (the rest of
update()), other (the node's window / its steps, minus the above: counting, logging,
resets), and cpu (its process CPU seconds per step, every thread); pulls (payload
fetches in the window) and version_checks (pulls of an on-policy client that found its
version current and fetched no payload, `VariableClient.check_version`); pulls_total and
pull_s_total: the node's pulls, version checks included, and their fetch + load seconds
over the whole run (a window may hold few pulls: one every `variable_update_period`
steps). Per learner step
(`learner_us`): sample (dataset next(): sampling and any wait on the rate limiter), update
(step minus sample), publish (conversions of new versions for the pulled precisions),
idle (window minus step time: the learner waiting outside step), cpu.
"""
from __future__ import annotations

import bisect
import json
import math
import os
import subprocess
import sys
import time
from typing import Any, Callable, Dict, List, Optional, Sequence

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# pylint: disable=wrong-import-position (TF's log level is set first)
from actorq.components import atomic
from actorq import core
from actorq.benchmarks import actorq_bench as ab
from actorq.benchmarks import learner_step
from actorq.components import processes
from actorq.components import stops
from actorq.launch import distributed, experiment
from actorq.launch import distributed_nodes as nodes
from actorq.components import placement, provenance
from actorq.components import profiling
from actorq.launch import supervisors
from actorq.launch import spec as spec_lib
from actorq.studies import tables



def in_process(launch: str) -> bool:
  """Whether `launch`'s nodes run in the launcher's process (`Supervisor.in_process`):
  such a run is measured in a child process, the others from this one."""
  return supervisors.supervisor_for(launch).in_process


# The launch types of `supervisors.SUPERVISORS` but hosts (its runs need host lists), those
# with a process per node first.
LAUNCHES = tuple(sorted((t for t in supervisors.launch_types() if t != "hosts"),
                        key=in_process))
ACTOR_PARTS = ("env_step", "inference", "adder", "load", "update_other", "other")
LEARNER_PARTS = ("sample", "update", "publish", "idle")
JSON_NAME = "bench_distributed.json"


def _table_info(client, table: str) -> Dict[str, float]:
  info = client.server_info(timeout=10)[table]
  worker = info.table_worker_time
  return {"current_size": int(info.current_size),
          "inserts": int(info.rate_limiter_info.insert_stats.completed),
          "samples": int(info.rate_limiter_info.sample_stats.completed),
          "inserts_blocked_ms": int(worker.waiting_for_sampling_ms),
          "samples_blocked_ms": int(worker.waiting_for_inserts_ms),
          "sleeping_ms": int(worker.sleeping_ms), "running_ms": int(worker.running_ms)}


class Sampler:
  """The launcher-side polls of a running program (`launch(on_poll=..., on_cpu=...)`).

  Keeps `trace` [(time.time(), actor steps)] of every poll, `first`: the snapshot at the
  first poll at which the learner has stepped, and `last`: the newest snapshot (taken
  every `period_s` seconds and at the poll that sees the step limit). A snapshot is
  {"t", "counts", "cpu", "learner", "actors", "replay"}; a poll whose Courier or Reverb
  call fails keeps the previous snapshot.
  """

  def __init__(self, dp: distributed.DistributedProgram, table: str, period_s: float = 2.0):
    self._dp = dp
    self._table = table
    self._period_s = float(period_s)
    self._cpu: Dict[str, float] = {}
    self._clients = None
    self.trace: List[tuple] = []
    self.first: Optional[Dict[str, Any]] = None
    self.last: Optional[Dict[str, Any]] = None
    self.errors = 0

  def on_cpu(self, cpu: Dict[str, float]) -> None:
    self._cpu = dict(cpu)

  def _snapshot(self, counts) -> Optional[Dict[str, Any]]:
    try:
      if self._clients is None:
        self._clients = (self._dp.learner.dereference(),
                         [a.dereference() for a in self._dp.actors],
                         self._dp.replay.dereference())
      learner, actors, replay = self._clients
      return {"t": time.time(), "counts": dict(counts), "cpu": dict(self._cpu),
              "learner": learner.profile(), "actors": [a.profile() for a in actors],
              "replay": _table_info(replay, self._table)}
    except Exception:  # pylint: disable=broad-except
      self.errors += 1
      return None

  def on_poll(self, counts: Dict[str, float]) -> None:
    now = time.time()
    steps = float(counts.get(nodes.ACTOR_STEPS, 0))
    self.trace.append((now, steps))
    finished = counts.get(nodes.LIMIT_REACHED, 0) >= 1
    if self.first is None:
      if counts.get(nodes.LEARNER_STEPS, 0) > 0:
        self.first = self._snapshot(counts)
        self.last = self.first
      return
    if finished or now - self.last["t"] >= self._period_s:
      snap = self._snapshot(counts)
      if snap is not None:
        self.last = snap


def _delta(last: Dict, first: Dict, *keys) -> float:
  a, b = last, first
  for k in keys:
    a, b = a.get(k, {}) if isinstance(a, dict) else {}, b.get(k, {}) if isinstance(b, dict) else {}
  return float(a or 0.0) - float(b or 0.0)


def time_at_steps(trace: Sequence[tuple], steps: float) -> float:
  """The time (as in `trace`) at which the actor-step count first reached `steps`,
  linearly interpolated between the two polls around it; NaN if never.

  Args:
    trace: [(time s, actor steps)] in time order, steps non-decreasing.
  """
  counts = [s for _, s in trace]
  i = bisect.bisect_left(counts, steps)
  if i >= len(trace):
    return float("nan")
  if i == 0:
    return float(trace[0][0])
  (t0, s0), (t1, s1) = trace[i - 1], trace[i]
  return float(t0 + (t1 - t0) * (steps - s0) / max(s1 - s0, 1e-12))


def actor_breakdown(first: Dict, last: Dict, cpu_s: float) -> Dict[str, float]:
  """Microseconds per actor step of one actor node between two of its `profile()`s
  (`ACTOR_PARTS` and cpu; see the module docstring). `cpu_s`: its CPU seconds between
  them. Raises ValueError when the node took no step in between."""
  d = lambda *k: _delta(last, first, "timings", "actor", *k)
  steps = d("steps")
  if steps <= 0:
    raise ValueError("the actor node took no step in the window")
  wall = float(last["time"]) - float(first["time"])
  load = d("client", "load_seconds")
  own = {"env_step": d("env_s"), "inference": d("inference_s"), "adder": d("adder_s"),
         "load": load, "update_other": max(d("update_s") - load, 0.0)}
  out = {k: 1e6 * v / steps for k, v in own.items()}
  out["other"] = 1e6 * max(wall - sum(own.values()), 0.0) / steps
  out["cpu"] = 1e6 * cpu_s / steps
  out["steps"] = steps
  out["version_checks"] = d("client", "unchanged")
  out["pulls"] = d("client", "pulls") - out["version_checks"]
  out["pull_fetch_s"] = d("client", "fetch_seconds")
  client = last.get("timings", {}).get("actor", {}).get("client", {})
  out["pulls_total"] = float(client.get("pulls", 0))
  out["pull_s_total"] = float(client.get("fetch_seconds", 0.0) + client.get("load_seconds", 0.0))
  return out


def learner_breakdown(first: Dict, last: Dict, window_s: float, cpu_s: float) -> Dict[str, float]:
  """Microseconds per learner step of the learner node between two `profile()`s
  (`LEARNER_PARTS` and cpu); all NaN when it took no step in between."""
  steps = _delta(last, first, "timings", "learner", "steps")
  if steps <= 0:
    return {k: float("nan") for k in LEARNER_PARTS + ("cpu",)}
  step_s = _delta(last, first, "timings", "learner", "step_s")
  sample_s = _delta(last, first, "timings", "dataset", "next_s")
  publish_s = sum(_delta(last, first, "served", p, "convert_seconds") for p in last["served"])
  return {"sample": 1e6 * sample_s / steps, "update": 1e6 * max(step_s - sample_s, 0.0) / steps,
          "publish": 1e6 * publish_s / steps,
          "idle": 1e6 * max(window_s - step_s, 0.0) / steps, "cpu": 1e6 * cpu_s / steps}


def figures(first: Dict, last: Dict, trace: Sequence[tuple], evaluations: List[Dict],
            target: float, start: float) -> Dict[str, Any]:
  """The run's figures (module docstring) from the window's first and last snapshots;
  `start`: the launch's `time.time()`.

  Raises:
    ValueError: the window is empty (the run ended before a second snapshot).
  """
  window = float(last["t"]) - float(first["t"])
  if window <= 0:
    raise ValueError("no acting window: the run ended before a second snapshot")
  cpu_delta = {k: last["cpu"][k] - first["cpu"].get(k, 0.0) for k in last["cpu"]}
  actors = []
  for i, (a0, a1) in enumerate(zip(first["actors"], last["actors"])):
    actors.append(actor_breakdown(a0, a1, cpu_delta.get(f"actor/{i}", float("nan"))))
  served = {}
  for p, s in last["learner"]["served"].items():
    pulls = _delta(last, first, "learner", "served", p, "pulls")
    sent = _delta(last, first, "learner", "served", p, "bytes_sent")
    served[p] = {"payload_bytes": int(s["payload_bytes"]), "pulls": int(pulls),
                 "bytes_sent": int(sent)}
  learner_steps = _delta(last, first, "learner", "learner_steps")
  replay = {k: _delta(last, first, "replay", k) for k in last["replay"]}
  inserts_blocked = replay["inserts_blocked_ms"] / 1e3
  samples_blocked = replay["samples_blocked_ms"] / 1e3
  side = ("actors (blocked on insert)" if inserts_blocked > samples_blocked else
          "learner (blocked on sample)" if samples_blocked > inserts_blocked else "neither")
  reached = [r for r in evaluations if float(r["episode_return"]) >= target]
  ttt = (time_at_steps(trace, float(reached[0]["actor_steps"])) - start
         if reached else float("nan"))
  actor_steps = sum(a["steps"] for a in actors)
  return {
      "window_s": window, "actor_steps_window": actor_steps,
      "actor_steps_per_s": actor_steps / window,
      "run_actor_steps_per_s": (float(last["counts"].get(nodes.ACTOR_STEPS, 0))
                                / (float(last["t"]) - start)),
      "learner_steps_window": learner_steps, "learner_steps_per_s": learner_steps / window,
      "bytes_sent_per_s": sum(s["bytes_sent"] for s in served.values()) / window,
      "served": served, "time_to_target_s": ttt,
      "final_return": (float(evaluations[-1]["episode_return"]) if evaluations
                       else float("nan")),
      "evaluations": len(evaluations),
      "cpu_seconds": dict(last["cpu"]),
      "cpu_cores": {k: v / window for k, v in cpu_delta.items()},
      "actor_us": actors,
      "learner_us": learner_breakdown(first["learner"], last["learner"], window,
                                      cpu_delta.get("learner/0", float("nan"))),
      "inserts_blocked_s": inserts_blocked, "samples_blocked_s": samples_blocked,
      "inserts_blocked_frac": inserts_blocked / window,
      "samples_blocked_frac": samples_blocked / window, "waiting_side": side,
      "replay": replay,
  }


# ---------------------------------------------------------------------------------
# Child process: one program.
# ---------------------------------------------------------------------------------
def run_program(job: Dict[str, Any]) -> Dict[str, Any]:
  """One distributed run of `job` (a dict from `jobs_for`); its figures and settings.

  Raises:
    core.RunFailure: the program did not finish cleanly (its one-line reason).
  """
  overrides = dict(job["overrides"], actor_precision=job["precision"])
  builder = profiling.InstrumentedBuilder(spec_lib.make_builder(job["agent"], overrides=overrides))
  config = experiment.ExperimentConfig(
      builder=builder, env_id=job["env"], num_steps=job["steps"], seed=job["seed"],
      eval_every=job["eval_every"], eval_episodes=job["eval_episodes"], logdir=job["logdir"],
      checkpoint_every=None, learner_device=job["learner_device"])
  dp = distributed.make_program(config, job["num_actors"], name=f"bench-{job['precision']}")
  sampler = Sampler(dp, builder.replay_table_name())
  start = time.time()
  result = distributed.launch(dp, job["launch"], echo=False, on_poll=sampler.on_poll,
                              on_cpu=sampler.on_cpu)
  if result.exit_code != 0:
    raise core.RunFailure(f"{job['precision']} seed {job['seed']}: {result.reason}: "
                          f"{result.detail}")
  if sampler.first is None or sampler.last is sampler.first:
    raise core.RunFailure(f"{job['precision']} seed {job['seed']}: the run ended before two "
                          f"snapshots were taken ({sampler.errors} failed polls)")
  out = figures(sampler.first, sampler.last, sampler.trace, result.evaluations, job["target"],
                start)
  out.update(precision=job["precision"], seed=job["seed"], num_actors=job["num_actors"],
             launch=job["launch"], wall_s=result.wall_seconds,
             setup_s=float(sampler.first["t"]) - start, failed_polls=sampler.errors,
             batch_size=int(getattr(builder.config, "batch_size", 0) or 0),
             samples_per_insert=float(getattr(builder.config, "samples_per_insert", 0) or 0),
             variable_update_period=int(getattr(builder.config, "variable_update_period", 0)
                                        or 0),
             learner_threads=placement.learner_threads(job["num_actors"]),
             loadavg_end=list(os.getloadavg()))
  return out


def child_main(job_path: str, out_path: str) -> int:
  with open(job_path, encoding="utf-8") as f:
    job = json.load(f)
  if not in_process(job["launch"]):
    placement.restrict_to_cpu()  # the launcher computes nothing (the learner has a process)
  else:
    placement.cpu_unless_gpu()
  result = run_program(job)
  atomic.write_json(out_path, result)
  return 0


# ---------------------------------------------------------------------------------
# Parent: jobs, files, table.
# ---------------------------------------------------------------------------------
def jobs_for(settings: Dict[str, Any], launch: str, num_actors: int, learner_device: str,
             outdir: str) -> List[Dict[str, Any]]:
  """The interleaved runs (`actorq_bench.jobs_for`'s order, no peer), each with its own
  run directory `<outdir>/<precision>-s<seed>`."""
  base = ab.jobs_for(settings["agent"], settings["env"], settings["precisions"],
                     settings["seeds"], settings["steps"], settings["eval_every"],
                     settings["eval_episodes"], settings["target"], settings["overrides"],
                     settings["acting_steps"])
  out = []
  for job in base:
    if job["kind"] != "train":
      continue
    out.append(dict(job, launch=launch, num_actors=int(num_actors),
                    learner_device=learner_device,
                    logdir=os.path.join(outdir, f"{job['precision']}-s{job['seed']}")))
  return out


def run_job(job: Dict[str, Any], log: Callable[[str], None] = print) -> Dict[str, Any]:
  """Runs one job (`local_mp`: from this process; `local_mt`: in a child process whose
  output goes to `<logdir>.log`); its figures, also written to `<logdir>.json`.

  Raises:
    core.RunFailure: the run failed (for a child, the last line of its log says why).
  """
  name = os.path.basename(job["logdir"])
  os.makedirs(job["logdir"], exist_ok=True)
  job_path, out_path = job["logdir"] + ".job.json", job["logdir"] + ".json"
  log_path = job["logdir"] + ".log"
  atomic.write_json(job_path, job)
  start = time.time()
  if not in_process(job["launch"]):
    result = run_program(job)
    atomic.write_json(out_path, result)
    return _done(result, name, start, log)
  with open(log_path, "w", encoding="utf-8") as logf:
    returncode, stopped = processes.run_child(
        [sys.executable, "-m", "actorq.benchmarks.distributed_bench", "--child", job_path,
         "--out", out_path], stdout=logf, stderr=subprocess.STDOUT,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
  if stopped is not None:  # forwarded to the child, which has ended (issue 42)
    raise stops.Preempted(stopped)
  if returncode != 0:
    with open(log_path, encoding="utf-8", errors="replace") as f:
      lines = [l.strip() for l in f if l.strip()]
    raise core.RunFailure(f"run {name} failed (exit {returncode}; {log_path}): "
                          f"{lines[-1] if lines else 'no output'}")
  with open(out_path, encoding="utf-8") as f:
    result = json.load(f)
  return _done(result, name, start, log)


def _done(result: Dict[str, Any], name: str, start: float, log) -> Dict[str, Any]:
  result["process_wall_seconds"] = time.time() - start
  log(f"  {name}: {result['actor_steps_per_s']:.1f} actor steps/s, "
      f"{result['learner_steps_per_s']:.2f} learner steps/s, waiting: "
      f"{result['waiting_side']} ({result['process_wall_seconds']:.0f} s)")
  return result


RUN_FIELDS = ("precision", "seed", "num_actors", "launch", "actor_steps_per_s",
              "run_actor_steps_per_s",
              "learner_steps_per_s", "time_to_target_s", "final_return", "bytes_sent_per_s",
              "window_s", "setup_s", "wall_s", "actor_steps_window", "learner_steps_window",
              "inserts_blocked_s", "samples_blocked_s", "inserts_blocked_frac",
              "samples_blocked_frac", "waiting_side", "evaluations", "process_wall_seconds",
              "learner_step_ratio")


def breakdown_rows(runs: Sequence[Dict[str, Any]]) -> List[Dict[str, Any]]:
  """One row per (run, node): CPU seconds, cores busy in the window and the per-step
  microseconds of the node's parts (actors: per actor step, learner: per learner step)."""
  rows = []
  for r in runs:
    for node, cpu_s in sorted(r["cpu_seconds"].items()):
      row = {"precision": r["precision"], "seed": r["seed"], "node": node,
             "cpu_seconds": cpu_s, "cpu_cores": r["cpu_cores"].get(node, float("nan"))}
      group, _, index = node.partition("/")
      if group == "actor" and index.isdigit() and int(index) < len(r["actor_us"]):
        row.update({f"us_{k}": v for k, v in r["actor_us"][int(index)].items()
                    if k in ACTOR_PARTS + ("cpu",)})
        row["per"] = "actor step"
      elif group == "learner":
        row.update({f"us_{k}": v for k, v in r["learner_us"].items()})
        row["per"] = "learner step"
      rows.append(row)
  return rows


_fmt, _ratio, _load = ab._fmt, ab._ratio, ab._load  # pylint: disable=protected-access


def _write_csv(path: str, rows: Sequence[Dict[str, Any]], fields: Optional[Sequence[str]] = None):
  """`tables.write_csv` with every key of `rows` as a column unless `fields` is given."""
  tables.write_csv(path, list(fields or dict.fromkeys(k for row in rows for k in row)), rows)


def learner_step_ratio(run: Dict[str, Any], reference: Dict[str, Any]) -> float:
  """The learner node's update (step minus sampling, mean over the window) over the
  single-process learner step measured in the same invocation (`learner_step.measure`,
  mean); NaN without a reference."""
  ref = float((reference or {}).get("step_ms_mean", float("nan")))
  update_ms = float(run["learner_us"]["update"]) / 1e3
  return update_ms / ref if ref > 0 else float("nan")


def learner_step_check(data: Dict[str, Any], max_ratio: float) -> List[str]:
  """The runs of a finished `--launch` benchmark whose learner step is above `max_ratio`
  times the single-process step of the same invocation (`learner_step_ratio`), one line
  each; a run without a measured ratio (no reference, NaN) fails too. Empty: all passed.

  This is the regression check of issue 40 (a local_mp learner node at <= 1.2x the
  single-process step on a quiet machine): the ratio is read against a reference taken in
  the same invocation, so a slower machine moves both sides.
  """
  ref = data.get("single_process_learner") or {}
  failed = []
  for r in data["runs"]:
    ratio = learner_step_ratio(r, ref)
    if not ratio <= max_ratio:  # NaN fails
      what = ("not measured (no single-process reference)" if ratio != ratio
              else f"{ratio:.2f}x > {max_ratio:.2f}x")
      failed.append(f"{r['precision']} seed {r['seed']}: learner step {what}")
  return failed


def learner_step_lines(data: Dict[str, Any]) -> List[str]:
  """The learner step of each run beside the single-process one of this invocation."""
  if "single_process_learner" not in data:
    return []  # a benchmark written before the reference existed
  ref = data["single_process_learner"] or {}
  if "error" in ref:
    return [f"Single-process learner step: not measured ({ref['error']})"]
  launch = data["meta"]["launch"]
  out = [f"Learner step, {launch} node vs one process (measured in this invocation, "
         f"{ref['steps']} steps, mean {ref['step_ms_mean']:.1f} ms, median "
         f"{ref['step_ms_median']:.1f} ms, CPU {ref['cpu_ms_mean']:.0f} ms per step):"]
  for r in data["runs"]:
    lu = r["learner_us"]
    out.append(f"  {r['precision']} seed {r['seed']}: update {lu['update'] / 1e3:.1f} ms "
               f"(+ sample {lu['sample'] / 1e3:.1f} ms, CPU {lu['cpu'] / 1e3:.0f} ms) = "
               f"{learner_step_ratio(r, ref):.2f}x the single-process step")
  return out


def format_table(data: Dict[str, Any]) -> str:
  """The markdown table (one row per run, then int8/fp32 style ratios per seed) and the
  per-node breakdown lines."""
  runs, meta = data["runs"], data["meta"]
  header = ["precision", "seed", "actor steps/s", "learner steps/s", "time to target (s)",
            "final return", "bytes sent/s", "who waits (Reverb rate limiter)"]
  rows = []
  for r in runs:
    ttt = r["time_to_target_s"]
    rows.append([r["precision"], r["seed"], _fmt(r["actor_steps_per_s"], 1),
                 _fmt(r["learner_steps_per_s"], 2),
                 "not reached" if not math.isfinite(ttt) else _fmt(ttt, 1),
                 _fmt(r["final_return"], 1), _fmt(r["bytes_sent_per_s"]),
                 f"{r['waiting_side']}: inserts blocked {100 * r['inserts_blocked_frac']:.0f}%, "
                 f"samples blocked {100 * r['samples_blocked_frac']:.0f}% of the window"])
  base = meta["precisions"][0]
  for p in meta["precisions"][1:]:
    for seed in meta["seeds"]:
      a = [r for r in runs if r["precision"] == p and r["seed"] == seed]
      b = [r for r in runs if r["precision"] == base and r["seed"] == seed]
      if a and b:
        a, b = a[0], b[0]
        rows.append([f"{p}/{base}", seed, _ratio(a["actor_steps_per_s"], b["actor_steps_per_s"]),
                     _ratio(a["learner_steps_per_s"], b["learner_steps_per_s"]),
                     _ratio(a["time_to_target_s"], b["time_to_target_s"]),
                     _ratio(a["final_return"], b["final_return"]),
                     _ratio(a["bytes_sent_per_s"], b["bytes_sent_per_s"]), ""])
  lines = [tables.markdown_table(header, rows), ""]
  for r in runs:
    lines.append(f"Nodes of {r['precision']} seed {r['seed']} (CPU seconds incl. start-up; "
                 "cores busy in the window): " + ", ".join(
                     f"{n} {s:.1f} s / {r['cpu_cores'].get(n, float('nan')):.2f}"
                     for n, s in sorted(r["cpu_seconds"].items())))
    for i, a in enumerate(r["actor_us"]):
      lines.append(f"  actor/{i}, us per actor step: " + ", ".join(
          f"{k} {a[k]:.0f}" for k in ACTOR_PARTS + ("cpu",)) + f" ({int(a['pulls'])} pulls"
          + (f", {int(a['version_checks'])} version checks" if a.get("version_checks") else "")
          + ")")
    lines.append("  learner/0, us per learner step: " + ", ".join(
        f"{k} {r['learner_us'][k]:.0f}" for k in LEARNER_PARTS + ("cpu",)))
    lines.append("  served: " + "; ".join(
        f"{p} {s['pulls']} pulls x {s['payload_bytes']:,} B" for p, s in r["served"].items()))
  lines.extend(learner_step_lines(data))
  lines.append("")
  lines.append(f"Machine: {meta['machine']['nproc']} cores, {meta['machine']['cpu_model']}, "
               f"load average at start {_load(meta['machine'].get('loadavg_1_5_15'))}; "
               f"{meta['agent']} on {meta['env']}, {meta['launch']} with {meta['num_actors']} "
               f"actor(s), learner device {meta['learner_device']}, {meta['steps']} actor steps "
               f"per run, target {meta['target']:g}, seeds {list(meta['seeds'])}")
  lines.append("Rates are over the training window (first poll with a learner step to the "
               "last poll: start-up and the unthrottled filling of replay excluded); time to "
               "target counts from the launch. Who waits: Reverb's table worker time with "
               "inserts (actors) or samples (learner) blocked by the rate limiter.")
  return "\n".join(lines)


def write_files(outdir: str, data: Dict[str, Any]) -> str:
  """runs.csv, breakdown.csv, bench_distributed.json and table.md; returns the table."""
  runs = data["runs"]
  for r in runs:
    r["learner_step_ratio"] = learner_step_ratio(r, data.get("single_process_learner"))
  _write_csv(os.path.join(outdir, "runs.csv"), runs, RUN_FIELDS)
  _write_csv(os.path.join(outdir, "breakdown.csv"), breakdown_rows(runs))
  atomic.write_json(os.path.join(outdir, JSON_NAME), data)
  table = format_table(data)
  with atomic.atomic_write(os.path.join(outdir, "table.md")) as f:
    f.write(table + "\n")
  return table


def run_bench(settings: Dict[str, Any], launch: str, num_actors: int, learner_device: str,
              outdir: str, log: Callable[[str], None] = print):
  """Every job of `jobs_for`, one after another; writes the files. Returns (data, table).

  Raises:
    ValueError: an unknown launch type or num_actors < 1.
    core.RunFailure: a run failed.
  """
  if launch not in LAUNCHES:
    raise ValueError(f"launch must be one of {', '.join(LAUNCHES)}, got {launch!r}")
  if num_actors < 1:
    raise ValueError(f"num_actors must be >= 1, got {num_actors}")
  meta = {"agent": settings["agent"], "env": settings["env"],
          "precisions": list(settings["precisions"]), "seeds": list(settings["seeds"]),
          "steps": settings["steps"], "target": settings["target"],
          "overrides": settings["overrides"], "launch": launch, "num_actors": num_actors,
          "learner_device": learner_device, "machine": provenance.machine_info(),
          "started": time.strftime("%Y-%m-%d %H:%M:%S")}
  jobs = jobs_for(settings, launch, num_actors, learner_device, outdir)
  # The single-process step before and after the programs (a fresh child each): the pair
  # brackets the runs, so that a load that changes meanwhile moves both sides.
  ref_args = (settings["agent"], settings["env"],
              dict(settings["overrides"], actor_precision=settings["precisions"][0]), outdir)
  before = learner_step.measure_in_child(*ref_args, seed=settings["seeds"][0], log=log)
  runs = [run_job(job, log) for job in jobs]
  after = learner_step.measure_in_child(*ref_args, seed=settings["seeds"][0], log=log)
  reference = learner_step.combine(before, after)
  meta["loadavg_end"] = list(os.getloadavg())
  data = {"kind": "distributed", "meta": meta, "runs": runs, "single_process_learner": reference}
  return data, write_files(outdir, data)


def render(outdir: str):
  """Rewrites a finished distributed benchmark's files from its JSON; (data, table).

  Raises:
    FileNotFoundError: no bench_distributed.json in `outdir`.
  """
  path = os.path.join(outdir, JSON_NAME)
  if not os.path.exists(path):
    raise FileNotFoundError(f"no {JSON_NAME} in {outdir}")
  with open(path, encoding="utf-8") as f:
    data = json.load(f)
  return data, write_files(outdir, data)


if __name__ == "__main__":
  from actorq.cli.benchmarks import distributed_bench as command_line  # its flags: cli/
  sys.exit(command_line.main())
