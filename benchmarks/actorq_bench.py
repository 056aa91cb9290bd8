"""The ActorQ benchmark: one agent configuration trained several times, changing only
the actors' precision, measured side by side.

    actorq bench --preset small              # DQN, gym:CartPole-v1, default network
    actorq bench --preset actorq --env dmc:cartpole-balance   # D4PG, policy 3x2048

Every (seed, precision) run is a fresh child process (`python -m
actorq.benchmarks.actorq_bench --child JOB.json`) running `actorq.launch.local.run`
with the agent's builder wrapped by `actorq.components.profiling.InstrumentedBuilder`.
Runs of one seed are consecutive and their precision order rotates from seed to seed
(interleaved: slow drifts of a shared machine hit every precision alike). The same
seed gives every precision the same environment, network initialisation and replay
sampling seeds; only the actors' (and evaluator's) precision differs.

Per run (`runs.csv`): training wall-clock (the acting loop, evaluations taken out),
the training time at which the greedy evaluation return first reached the target
(the median over seeds counts a run that never reached it as +inf: "not reached"),
final greedy return (mean over `eval_episodes` episodes), the late return (mean of the
last 3 evaluations), actor and learner steps/s,
payload bytes per pull, process CPU seconds and an energy estimate.

Per-actor-step breakdown (`breakdown.csv`, microseconds per actor step):
  env_step      env.step (interval between select_action's end and observe's start)
  inference     select_action: the policy runtime + action selection
  adder         observe/observe_first: the n-step adder inserting into Reverb
  load          loading a pulled parameter version into the runtime (actor thread)
  waiting       the actor blocked: the learner's steps run inline in the
                single-process loop, plus update()'s own bookkeeping
  other         the rest of the loop (counters, episode logging, env.reset)
  pull_transfer the asynchronous pull (background thread; conversions excluded) - it
                shares the cores but is not on the actor's critical path
  deserialise   ESTIMATE: pickle.loads of the run's final payload (median of 5) x
                pulls / actor steps. In-process pulls pass a reference; this is what
                decoding the payload would cost across a process boundary.
The first six add up to the training wall-clock per actor step.
Per learner step (microseconds): sample (dataset next()), update (step - sample),
publish (the learner-side conversion/quantization of new versions, all precisions'
publishers of the run; it runs on the pulling thread).
`learner_first_step_s` (runs.csv): the first learner step alone, in seconds (its jit
compilation included; it is also inside the means above).

Acting-only throughput (`acting.csv`): the trained policy at each precision stepping
the environment with no adder and no learner (the actor's own speed), and the peer:
Acme 0.4.0's TF `acme.agents.tf.actors.FeedForwardActor` with a sonnet MLP of the same
layer sizes, random weights, in the same loop. Without dm-sonnet/trfl the peer prints
"unavailable: <reason>".

Energy (assumption, printed with the table): energy = process CPU seconds (user +
system, all threads) x `watts_per_core`; GPU seconds (the learner's step time when JAX
runs on a GPU) x `watts_per_gpu`. Idle power, DRAM, uncore and cooling are not counted.
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
import pickle
import statistics
import subprocess
import sys
import time
from typing import Any, Dict, List, Optional, Sequence

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# pylint: disable=g-import-not-at-top,wrong-import-position (TF's log level is set first)
import jax
from acme import specs

from actorq.components import atomic
from actorq import core
from actorq.components.acting import actors
from actorq.components.acting import loop as loop_lib
from actorq.components.acting import variable_client as vc
from actorq.components.envs import environments
from actorq.components import processes
from actorq.components import stops
from actorq.launch import experiment, local
from actorq.components import profiling, provenance
from actorq.launch import spec as spec_lib
from actorq.quantization import network_spec as ns
from actorq.components import aggregate as ag
from actorq.studies.tables import PRECISION_COLORS, markdown_table, write_csv

ACTOR_COMPONENTS = ("env_step", "inference", "adder", "load", "waiting", "other")
ASYNC_COMPONENTS = ("pull_transfer", "deserialise")
LEARNER_COMPONENTS = ("sample", "update", "publish")
PRECISIONS = core.ACTOR_PRECISIONS


@dataclasses.dataclass
class Preset:
  """A benchmark configuration. `targets`: target greedy return per environment id."""
  agent: str
  env: str
  steps: int
  eval_every: int
  targets: Dict[str, float]
  precisions: Sequence[str]
  seeds: Sequence[int]
  overrides: Dict[str, Any]
  acting_steps: int


PRESETS = {
    # The agent's default network and config (DQN: 2x256) but a shorter exploration
    # schedule, so that a run takes a few minutes; target 200 (CartPole-v0's "solved"
    # mark: 475 is rarely reached within 20k steps).
    "small": Preset(agent="dqn", env="gym:CartPole-v1", steps=20_000, eval_every=2_000,
                    targets={"gym:CartPole-v1": 200.0}, precisions=("fp32", "fp16", "int8"),
                    seeds=(0,), overrides={"epsilon_decay_steps": 5_000},
                    acting_steps=2_000),
    # ActorQ's setting: D4PG with a 3x2048 policy (the critic keeps Acme D4PG's
    # 512-512-256), on dmc:cartpole-balance (or --env dmc:walker-stand). Replay ratio,
    # parameter-pull period and dQ/da clipping are Acme 0.4.0's D4PG defaults
    # (samples_per_insert 32: one learner step per 8 actor steps at batch 256; actors
    # pull every 1,000 steps as acme.agents.tf.d4pg does; dqda clipped to norm 1).
    # The networks follow Acme's D4PG control-suite networks where our int8 policy
    # runtime allows: a LayerNorm critic torso and a near-zero-initialised policy head
    # (Acme's NearZeroInitializedLinear; the policy itself stays a ReLU MLP, which the
    # int8 runtime executes). The policy learning rate is 3e-5: at 3x2048, Adam at 3e-4
    # or 1e-4 drove the tanh output into saturation (pre-tanh -120..-9) within a few
    # hundred learner steps and the return stayed at 136 (random actions: ~331) for 40k
    # steps; a 2048-wide layer moves its output ~8x more per Adam step than a 256-wide
    # one; 1e-5 learned, but slowly (measured, 2026-11-29).
    # 100k actor steps: at 50k, runs of this policy were still climbing (seed 0 with these
    # settings: fp32 949, int8 886 and rising), too early for a return-parity figure; at
    # 100k, 5 of the 6 runs of seeds 0-2 ended at 987-1000 (docs/results/bench_actorq).
    # On a 2-core CPU the fp32 learner takes ~115 ms per step, one run ~30 min, the
    # preset's 2 precisions x 3 seeds ~3 h: run seeds separately (--seeds 0, --seeds 1,
    # --seeds 2) and combine them with --merge. fp16 is left out by default (3x slower
    # than fp32 on CPUs without fp16 kernels; see the small preset): add it with
    # --precisions fp32,fp16,int8.
    "actorq": Preset(agent="d4pg", env="dmc:cartpole-balance", steps=100_000, eval_every=5_000,
                     targets={"dmc:cartpole-balance": 900.0, "dmc:walker-stand": 900.0},
                     precisions=("fp32", "int8"), seeds=(0, 1, 2),
                     overrides={"policy_hidden_sizes": [2048, 2048, 2048],
                                "critic_hidden_sizes": [512, 512, 256],
                                "samples_per_insert": 32.0, "variable_update_period": 1_000,
                                "dqda_clipping": 1.0, "policy_learning_rate": 3e-5,
                                "critic_layer_norm": True, "policy_output_init_scale": 1e-4},
                     acting_steps=2_000),
}


# ---------------------------------------------------------------------------------
# Child process: one training run, or the peer's acting throughput.
# ---------------------------------------------------------------------------------
def _cpu_seconds() -> float:
  import psutil
  t = psutil.Process().cpu_times()
  return float(t.user + t.system)


def acting_steps_per_second(env, actor, steps: int) -> float:
  """Steps/s of `actor.select_action` + `env.step` for `steps` steps (resets included),
  in the one actor loop with nothing observed or pulled."""
  loop = loop_lib.ActorLoop(env, actor, learn=False)
  start = time.perf_counter()
  loop.run(num_steps=steps)
  return steps / (time.perf_counter() - start)


def _deserialise_seconds(payload, repeats: int = 5) -> float:
  blob = pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL)
  times = []
  for _ in range(repeats):
    start = time.perf_counter()
    pickle.loads(blob)
    times.append(time.perf_counter() - start)
  return float(statistics.median(times))


def run_training(job: Dict[str, Any]) -> Dict[str, Any]:
  """One instrumented training run (see the module docstring for every figure)."""
  cpu0, wall0 = _cpu_seconds(), time.perf_counter()
  overrides = dict(job["overrides"], actor_precision=job["precision"])
  builder = profiling.InstrumentedBuilder(spec_lib.make_builder(job["agent"], overrides=overrides))
  eval_rows: Dict[int, float] = {}  # actor step -> training seconds at that evaluation
  last = {"t": None}

  def progress(c):
    now = time.perf_counter()
    last["t"] = now
    n_before = len(builder.eval_intervals)
    builder.end_evaluation(now)
    if len(builder.eval_intervals) > n_before:
      eval_rows[c["actor_steps"]] = now - builder.actor.first_time - builder.eval_seconds

  result = local.run(experiment.ExperimentConfig(
      builder=builder, env_id=job["env"], num_steps=job["steps"], seed=job["seed"],
      eval_every=job["eval_every"], eval_episodes=job["eval_episodes"], logdir=None,
      checkpoint_every=None), progress=progress)
  cpu_train = _cpu_seconds() - cpu0
  actor, learner, dataset, source = builder.actor, builder.learner, builder.dataset, builder.source
  train_s = last["t"] - actor.first_time - builder.eval_seconds
  steps = actor.steps
  client = profiling.actor_client_stats(actor)
  # Loads while acting only: the builder's initial pull (in make_actor, before the first
  # observe_first) lies outside train_s, so counting it would make the components add up
  # to more than the wall-clock they divide.
  load_s = float(client.get("load_seconds", 0.0)) - float(
      actor.client_at_start.get("load_seconds", 0.0))
  publisher_stats = dict(getattr(source, "stats", {}) or {})
  payload = source.last_payload
  deser_s = _deserialise_seconds(payload) * source.pulls
  waiting_s = learner.step_seconds + max(actor.update_s - load_s, 0.0)
  own = {"env_step": actor.env_s, "inference": actor.inference_s, "adder": actor.adder_s,
         "load": load_s, "waiting": waiting_s}
  per_step = {k: 1e6 * v / steps for k, v in own.items()}
  per_step["other"] = 1e6 * max(train_s - sum(own.values()), 0.0) / steps
  per_step["pull_transfer"] = 1e6 * max(source.fetch_seconds - source.convert_seconds, 0.0) / steps
  per_step["deserialise"] = 1e6 * deser_s / steps
  lsteps = max(learner.steps, 1)
  learner_us = {"sample": 1e6 * dataset.seconds / lsteps,
                "update": 1e6 * max(learner.step_seconds - dataset.seconds, 0.0) / lsteps,
                "publish": 1e6 * float(publisher_stats.get("convert_seconds", 0.0)) / lsteps}

  curve = []
  for row in result.evaluations:
    curve.append({"actor_steps": row["actor_steps"], "learner_steps": row["learner_steps"],
                  "train_seconds": eval_rows.get(row["actor_steps"], float("nan")),
                  "episode_return": row["episode_return"],
                  "episode_return_std": row["episode_return_std"]})
  target = job["target"]
  reached = [r for r in curve if r["episode_return"] >= target]
  time_to_target = reached[0]["train_seconds"] if reached else float("nan")

  # Acting-only throughput of the trained policy at this precision.
  env = environments.make_environment(job["env"], seed=job["seed"] + 20_000)
  env_spec = environments.environment_spec(env)
  networks = builder.make_networks(env_spec)
  policy = builder.make_policy(networks, env_spec, evaluation=True)
  runtime = vc.make_runtime(job["precision"], policy.spec)
  runtime.load(payload)
  probe = actors.FeedForwardActor(runtime, policy.selector, seed=job["seed"])
  acting_steps_per_second(env, probe, 50)  # compiles (jax) / creates the interpreter first
  acting_sps = acting_steps_per_second(env, probe, job["acting_steps"])

  backend = jax.default_backend()
  gpu_s = learner.step_seconds if backend == "gpu" else 0.0
  return {
      "kind": "train", "precision": job["precision"], "seed": job["seed"],
      "agent": job["agent"], "env": job["env"], "target": target,
      "actor_steps": steps, "learner_steps": learner.steps, "episodes": result.episodes,
      "train_seconds": train_s, "eval_seconds": builder.eval_seconds,
      "setup_seconds": actor.first_time - wall0,
      "time_to_target_s": time_to_target,
      "final_return": result.final_eval_return, "best_return": result.best_eval_return,
      "actor_steps_per_s": steps / train_s,
      "actor_only_steps_per_s": steps / (actor.env_s + actor.inference_s + actor.adder_s + load_s),
      "acting_steps_per_s": acting_sps,
      "learner_steps_per_s": learner.steps / train_s,
      "learner_only_steps_per_s": learner.steps / max(learner.step_seconds, 1e-12),
      "learner_first_step_s": learner.first_step_seconds,
      "payload_bytes": int(payload.nbytes), "pulls": source.pulls,
      "bytes_per_pull": int(payload.nbytes),
      "versions_pulled": len(source.versions),
      "conversions": int(publisher_stats.get("conversions", 0)),
      "cpu_seconds": cpu_train, "gpu_seconds": gpu_s, "jax_backend": backend,
      "actor_us": per_step, "learner_us": learner_us, "curve": curve,
  }


def peer_acting(job: Dict[str, Any]) -> Dict[str, Any]:
  """Acme 0.4.0's TF FeedForwardActor (sonnet MLP of the agent's policy layer sizes,
  random weights) stepping the same environment: {"acting_steps_per_s"} or
  {"unavailable": reason}."""
  out = {"kind": "peer", "seed": job["seed"], "env": job["env"]}
  env = environments.make_environment(job["env"], seed=job["seed"] + 20_000)
  env_spec = environments.environment_spec(env)
  builder = spec_lib.make_builder(job["agent"], overrides=job["overrides"])
  spec = builder.make_policy(builder.make_networks(env_spec), env_spec, evaluation=True).spec
  if not all(isinstance(l, ns.Dense) for l in spec.layers):
    out["unavailable"] = "the peer is built for MLP policies only; this policy has conv layers"
    return out
  try:
    import sonnet as snt  # pylint: disable=g-import-not-at-top
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    from acme.agents.tf import actors as tf_actors  # pylint: disable=g-import-not-at-top
    from acme.tf import utils as tf2_utils  # pylint: disable=g-import-not-at-top
  except ImportError as e:
    out["unavailable"] = (f"{e} (Acme's TF actors need dm-sonnet==2.0.0 and trfl==1.2.0: "
                          "pip install 'actorq[peer]')")
    return out
  sizes = [l.units for l in spec.layers]
  actions = env_spec.actions
  if isinstance(actions, specs.DiscreteArray) and sizes[-1] == actions.num_values + 1:
    # A dueling head [V, A_1..A_n]: argmax of Q = V + A - mean(A) is argmax of A.
    head = lambda q: tf.argmax(q[..., 1:], axis=-1, output_type=tf.int32)
  elif isinstance(actions, specs.DiscreteArray):
    head = lambda q: tf.argmax(q, axis=-1, output_type=tf.int32)
  else:
    lo = tf.constant(actions.minimum, tf.float32)
    hi = tf.constant(actions.maximum, tf.float32)
    head = lambda x: lo + (tf.tanh(x) + 1.0) * 0.5 * (hi - lo)
  net = snt.Sequential([snt.nets.MLP(sizes, activation=tf.nn.relu), head])
  tf2_utils.create_variables(net, [env_spec.observations])
  actor = tf_actors.FeedForwardActor(net)
  acting_steps_per_second(env, actor, 50)  # traces the tf.function
  out["acting_steps_per_s"] = acting_steps_per_second(env, actor, job["acting_steps"])
  out["policy_sizes"] = sizes
  return out


def child_main(job_path: str, out_path: str) -> int:
  with open(job_path, encoding="utf-8") as f:
    job = json.load(f)
  cpu0 = _cpu_seconds()
  result = run_training(job) if job["kind"] == "train" else peer_acting(job)
  result.setdefault("cpu_seconds", _cpu_seconds() - cpu0)
  atomic.write_json(out_path, result)
  return 0


# ---------------------------------------------------------------------------------
# Parent: jobs, files, plots, table.
# ---------------------------------------------------------------------------------
def jobs_for(agent, env, precisions, seeds, steps, eval_every, eval_episodes, target,
             overrides, acting_steps) -> List[Dict[str, Any]]:
  """Interleaved jobs: per seed, every precision (order rotated by one per seed), then
  the peer's acting measurement."""
  out = []
  base = {"agent": agent, "env": env, "steps": steps, "eval_every": eval_every,
          "eval_episodes": eval_episodes, "target": target, "overrides": dict(overrides),
          "acting_steps": acting_steps}
  for i, seed in enumerate(seeds):
    k = i % len(precisions)
    for precision in list(precisions[k:]) + list(precisions[:k]):
      out.append(dict(base, kind="train", precision=precision, seed=seed))
    out.append(dict(base, kind="peer", seed=seed))
  return out


def run_job(job: Dict[str, Any], workdir: str, log=print) -> Dict[str, Any]:
  """Runs one job in a fresh child process; its stderr goes to `workdir/<name>.log`.

  SIGINT/SIGTERM meanwhile is forwarded to the child (`processes.run_child`), which is
  waited for; then `stops.Preempted` is raised.

  Raises:
    RuntimeError: the child failed (with the log's last lines).
    stops.Preempted: the benchmark was signalled (the child has ended).
  """
  name = (f"{job['precision']}-s{job['seed']}" if job["kind"] == "train"
          else f"peer-s{job['seed']}")
  job_path = os.path.join(workdir, f"{name}.job.json")
  out_path = os.path.join(workdir, f"{name}.json")
  log_path = os.path.join(workdir, f"{name}.log")
  atomic.write_json(job_path, job)
  start = time.time()
  with open(log_path, "w", encoding="utf-8") as logf:
    returncode, stopped = processes.run_child(
        [sys.executable, "-m", "actorq.benchmarks.actorq_bench", "--child", job_path, "--out",
         out_path], stdout=logf, stderr=subprocess.STDOUT,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
  if stopped is not None:  # forwarded to the job, which has ended: stop the benchmark too
    raise stops.Preempted(stopped)
  if returncode != 0:
    with open(log_path, encoding="utf-8") as f:
      tail = "".join(f.readlines()[-15:])
    raise RuntimeError(f"benchmark job {name} failed (exit {returncode}); {log_path}:\n{tail}")
  with open(out_path, encoding="utf-8") as f:
    result = json.load(f)
  result["process_wall_seconds"] = time.time() - start
  log(f"  {name}: done in {result['process_wall_seconds']:.0f} s")
  return result



def _median(values):
  vals = [v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
  return float(statistics.median(vals)) if vals else float("nan")


RUN_FIELDS = ("precision", "seed", "agent", "env", "target", "actor_steps", "learner_steps",
              "episodes", "train_seconds", "eval_seconds", "setup_seconds", "time_to_target_s",
              "final_return", "late_return", "best_return", "actor_steps_per_s",
              "actor_only_steps_per_s", "acting_steps_per_s", "learner_steps_per_s", "learner_only_steps_per_s",
              "payload_bytes", "pulls", "bytes_per_pull", "versions_pulled", "conversions",
              "cpu_seconds", "gpu_seconds", "energy_j", "energy_j_per_1k_actor_steps",
              "jax_backend", "process_wall_seconds")
SUMMARY_FIELDS = ("time_to_target_s", "final_return", "late_return", "actor_steps_per_s",
                  "actor_only_steps_per_s", "acting_steps_per_s", "learner_steps_per_s",
                  "bytes_per_pull", "energy_j", "train_seconds")


def late_return(run: Dict[str, Any], evals: Optional[int] = None) -> float:
  """Mean greedy return over the run's last `evals` evaluations (default:
  `aggregate.LAST_EVALS`, 3; each itself a mean over `eval_episodes` episodes): a less noisy
  end-of-training figure than the final one for agents whose return oscillates between
  evaluations (D4PG at 3x2048 does)."""
  # aggregate (NumPy, SciPy) is imported here, not with this module: the CLI imports this
  # module to build its parser.
  evals = ag.LAST_EVALS if evals is None else evals
  return ag.mean_of_last([c["episode_return"] for c in run["curve"]], evals)


def summarize(runs: List[Dict[str, Any]], precisions: Sequence[str]) -> Dict[str, Dict[str, float]]:
  """Medians over seeds per precision, of SUMMARY_FIELDS and the breakdown components."""
  out = {}
  for p in precisions:
    rs = [r for r in runs if r["precision"] == p]
    if not rs:
      continue
    row = {f: _median([r[f] for r in rs]) for f in SUMMARY_FIELDS
           if f not in ("time_to_target_s", "late_return")}
    # A run that never reached the target counts as +inf (censored), not as missing: the
    # median over seeds is then "not reached" unless more than half of the runs got there.
    row["time_to_target_s"] = ag.censored_median(r["time_to_target_s"] for r in rs)
    row["late_return"] = _median([late_return(r) for r in rs])
    for c in ACTOR_COMPONENTS + ASYNC_COMPONENTS:
      row[f"actor_{c}_us"] = _median([r["actor_us"][c] for r in rs])
    for c in LEARNER_COMPONENTS:
      row[f"learner_{c}_us"] = _median([r["learner_us"][c] for r in rs])
    row["runs"] = len(rs)
    row["reached_target"] = sum(not math.isnan(r["time_to_target_s"]) for r in rs)
    out[p] = row
  return out


def write_files(outdir, runs, peers, summary, meta):
  """runs.csv, breakdown.csv, curves.csv, acting.csv, summary.csv, bench.json."""
  write_csv(os.path.join(outdir, "runs.csv"), RUN_FIELDS,
            [dict(r, late_return=late_return(r)) for r in runs])
  rows = []
  for r in runs:
    for c in ACTOR_COMPONENTS + ASYNC_COMPONENTS:
      rows.append({"precision": r["precision"], "seed": r["seed"], "side": "actor",
                   "component": c, "us_per_step": r["actor_us"][c],
                   "on_critical_path": c in ACTOR_COMPONENTS})
    for c in LEARNER_COMPONENTS:
      rows.append({"precision": r["precision"], "seed": r["seed"], "side": "learner",
                   "component": c, "us_per_step": r["learner_us"][c], "on_critical_path": True})
  write_csv(os.path.join(outdir, "breakdown.csv"),
            ("precision", "seed", "side", "component", "us_per_step", "on_critical_path"), rows)
  rows = [dict(c, precision=r["precision"], seed=r["seed"]) for r in runs for c in r["curve"]]
  write_csv(os.path.join(outdir, "curves.csv"),
            ("precision", "seed", "actor_steps", "learner_steps", "train_seconds",
             "episode_return", "episode_return_std"), rows)
  rows = [{"who": f"actorq-{r['precision']}", "seed": r["seed"],
           "acting_steps_per_s": r["acting_steps_per_s"], "note": ""} for r in runs]
  rows += [{"who": "acme-tf-peer", "seed": p["seed"],
            "acting_steps_per_s": p.get("acting_steps_per_s", ""),
            "note": ("unavailable: " + p["unavailable"]) if "unavailable" in p else ""}
           for p in peers]
  write_csv(os.path.join(outdir, "acting.csv"), ("who", "seed", "acting_steps_per_s", "note"), rows)
  fields = ["precision", "runs", "reached_target"] + list(SUMMARY_FIELDS) + [
      f"actor_{c}_us" for c in ACTOR_COMPONENTS + ASYNC_COMPONENTS] + [
      f"learner_{c}_us" for c in LEARNER_COMPONENTS]
  write_csv(os.path.join(outdir, "summary.csv"), fields,
            [dict(v, precision=k) for k, v in summary.items()])
  atomic.write_json(os.path.join(outdir, "bench.json"),
                    {"meta": meta, "summary": summary, "runs": runs, "peers": peers})


def plot(outdir, runs, peers, summary, meta) -> List[str]:
  """returns_vs_wallclock.png, breakdown.png, throughput.png (matplotlib Agg)."""
  import matplotlib
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  title = f"{meta['agent']} on {meta['env']} ({meta['machine']['nproc']} cores)"
  paths = []

  fig, ax = plt.subplots(figsize=(7, 4.2))
  labelled = set()
  for r in runs:
    xs = [c["train_seconds"] for c in r["curve"]]
    ys = [c["episode_return"] for c in r["curve"]]
    p = r["precision"]
    ax.plot(xs, ys, marker="o", ms=3, color=PRECISION_COLORS.get(p), alpha=0.85,
            label=None if p in labelled else p)
    labelled.add(p)
  ax.axhline(meta["target"], color="grey", ls="--", lw=1, label=f"target {meta['target']:g}")
  ax.set_xlabel("training wall-clock (s, evaluations excluded)")
  ax.set_ylabel(f"greedy return (mean of {meta['eval_episodes']} episodes)")
  ax.set_title(f"Return vs wall-clock: {title}", fontsize=10)
  ax.legend(fontsize=8)
  fig.tight_layout()
  paths.append(os.path.join(outdir, "returns_vs_wallclock.png"))
  with atomic.atomic_write(paths[-1], "wb") as f:
    fig.savefig(f, dpi=110, format="png")
  plt.close(fig)

  precs = list(summary)
  fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4.2))
  cmap = plt.get_cmap("tab10")
  bottoms = [0.0] * len(precs)
  for i, c in enumerate(ACTOR_COMPONENTS + ASYNC_COMPONENTS):
    vals = [summary[p][f"actor_{c}_us"] for p in precs]
    hatch = "//" if c in ASYNC_COMPONENTS else None
    label = c + (" (async/est.)" if c in ASYNC_COMPONENTS else "")
    ax1.bar(precs, vals, bottom=bottoms, color=cmap(i), hatch=hatch, label=label,
            edgecolor="white")
    bottoms = [b + v for b, v in zip(bottoms, vals)]
  ax1.set_ylabel("microseconds per actor step (median over seeds)")
  ax1.set_title("Actor step breakdown", fontsize=10)
  ax1.legend(fontsize=7)
  bottoms = [0.0] * len(precs)
  for i, c in enumerate(LEARNER_COMPONENTS):
    vals = [summary[p][f"learner_{c}_us"] for p in precs]
    ax2.bar(precs, vals, bottom=bottoms, color=cmap(i + 7), label=c, edgecolor="white")
    bottoms = [b + v for b, v in zip(bottoms, vals)]
  ax2.set_ylabel("microseconds per learner step")
  ax2.set_title("Learner step breakdown", fontsize=10)
  ax2.legend(fontsize=7)
  fig.suptitle(title, fontsize=10)
  fig.tight_layout()
  paths.append(os.path.join(outdir, "breakdown.png"))
  with atomic.atomic_write(paths[-1], "wb") as f:
    fig.savefig(f, dpi=110, format="png")
  plt.close(fig)

  fig, ax = plt.subplots(figsize=(8, 4.2))
  names, vals, colors = [], [], []
  for p in precs:
    for field, lab in (("actor_steps_per_s", "end-to-end"), ("actor_only_steps_per_s", "actor own"),
                       ("acting_steps_per_s", "acting only")):
      names.append(f"{p}\n{lab}")
      vals.append(summary[p][field])
      colors.append(PRECISION_COLORS.get(p, "grey"))
  peer_vals = [p["acting_steps_per_s"] for p in peers if "acting_steps_per_s" in p]
  if peer_vals:
    names.append("Acme TF\nacting only")
    vals.append(_median(peer_vals))
    colors.append("tab:red")
  ax.bar(names, vals, color=colors)
  for x, v in enumerate(vals):
    ax.text(x, v, f"{v:,.0f}", ha="center", va="bottom", fontsize=7)
  if not peer_vals and peers:
    ax.text(0.99, 0.97, "Acme TF peer: unavailable", transform=ax.transAxes, ha="right",
            va="top", fontsize=8, color="tab:red")
  ax.set_ylabel("actor steps / s")
  ax.set_title(f"Actor throughput: {title}", fontsize=10)
  ax.tick_params(axis="x", labelsize=7)
  fig.tight_layout()
  paths.append(os.path.join(outdir, "throughput.png"))
  with atomic.atomic_write(paths[-1], "wb") as f:
    fig.savefig(f, dpi=110, format="png")
  plt.close(fig)
  return paths


def _fmt(v, digits=0):
  if v is None or (isinstance(v, float) and math.isnan(v)):
    return "n/a"
  if v == math.inf:
    return "not reached"
  return f"{v:,.{digits}f}"


def _ratio(a, b):
  if any(x is None or (isinstance(x, float) and math.isnan(x)) for x in (a, b)) or b == 0:
    return "n/a"
  if math.inf in (a, b):  # a median time to target that was not reached (censored)
    return "n/a" if a == b else ("< 1x (fp32 not reached)" if b == math.inf
                                 else "> 1x (not reached)")
  return f"{a / b:.2f}x"


def _load(loadavg) -> str:
  return f"{loadavg[0]:.2f}" if loadavg else "unknown"


def format_table(summary, peers, meta) -> str:
  """The terminal/README table: medians per precision, then ratios vs fp32."""
  cols = [("time_to_target_s", "time to target (s)", 1), ("final_return", "final return", 1),
          ("late_return", f"last-{ag.LAST_EVALS}-eval return", 1),
          ("actor_steps_per_s", "actor steps/s", 0),
          ("actor_only_steps_per_s", "actor own steps/s", 0),
          ("acting_steps_per_s", "acting-only steps/s", 0),
          ("learner_steps_per_s", "learner steps/s", 1), ("bytes_per_pull", "bytes/pull", 0),
          ("energy_j", "energy (J, est.)", 0)]
  peer_vals = [p["acting_steps_per_s"] for p in peers if "acting_steps_per_s" in p]
  reasons = sorted({p["unavailable"] for p in peers if "unavailable" in p})
  peer_cell = _fmt(_median(peer_vals)) if peer_vals else "unavailable"
  header = ["precision"] + [c[1] for c in cols] + ["peer Acme TF acting steps/s"]
  rows = []
  for p, s in summary.items():
    tt = _fmt(s["time_to_target_s"], 1)
    if s["reached_target"] < s["runs"]:
      tt += f" ({s['reached_target']}/{s['runs']} reached)"
    rows.append([p, tt] + [_fmt(s[k], d) for k, _, d in cols[1:]] + [peer_cell])
  for num in ("int8", "fp16", "bf16"):
    if num in summary and "fp32" in summary and num != "fp32":
      rows.append([f"{num}/fp32"] + [_ratio(summary[num][k], summary["fp32"][k]) for k, _, _ in cols]
                  + ["" if not peer_vals else _ratio(summary[num]["acting_steps_per_s"],
                                                     _median(peer_vals)) + " (acting vs peer)"])
  out = [markdown_table(header, rows), ""]
  out.append("Breakdown, microseconds per actor step (median): " + "; ".join(
      f"{p}: " + ", ".join(f"{c} {s[f'actor_{c}_us']:.0f}" for c in ACTOR_COMPONENTS + ASYNC_COMPONENTS)
      for p, s in summary.items()))
  out.append("Learner, microseconds per learner step (median): " + "; ".join(
      f"{p}: " + ", ".join(f"{c} {s[f'learner_{c}_us']:.0f}" for c in LEARNER_COMPONENTS)
      for p, s in summary.items()))
  if not peer_vals:
    out.append("peer (Acme 0.4.0 TF FeedForwardActor): unavailable: " + "; ".join(reasons))
  m = meta["machine"]
  out.append(f"Machine: {m['nproc']} cores, {m['cpu_model']}, load average at start "
             f"{_load(m.get('loadavg_1_5_15'))}; {meta['agent']} on {meta['env']}, "
             f"{meta['steps']} actor steps, target return {meta['target']:g}, seeds {meta['seeds']}")
  if meta.get("merged_from"):  # actorq bench --merge
    out.append(f"Merged from {len(meta['merged_from'])} benchmarks: " + "; ".join(
        f"{s['dir']} (seeds {s['seeds']}, started {s['started']}, load average "
        f"{_load(s.get('loadavg_1_5_15'))})" for s in meta["merged_from"]))
  out.append(f"Energy assumption: {meta['watts_per_core']:g} W per busy core x process CPU seconds "
             f"(user+system, all threads)" + (f" + {meta['watts_per_gpu']:g} W x GPU seconds"
                                               " (learner step time when JAX runs on a GPU)")
             + "; idle, DRAM, uncore and cooling not counted.")
  out.append("time to target and steps/s: training wall-clock with evaluations taken out. "
             "actor steps/s: end to end (the learner's inline steps included); actor own "
             "steps/s: the actor's own work per step (env step + inference + adder + parameter "
             "load), what an actor in its own process would sustain unthrottled; acting-only: "
             "env step + inference of the trained policy, no adder, no learner. deserialise is "
             "an estimate (pickle of the run's payload), pull_transfer is asynchronous.")
  return "\n".join(out)


def run_bench(agent, env, precisions, seeds, steps, eval_every, eval_episodes, target, overrides,
              acting_steps, outdir, watts_per_core=5.0, watts_per_gpu=300.0, log=print):
  """Runs all jobs, writes CSVs/plots/table into `outdir`; returns (summary, table)."""
  os.makedirs(outdir, exist_ok=True)
  workdir = os.path.join(outdir, "jobs")
  os.makedirs(workdir, exist_ok=True)
  meta = {"agent": agent, "env": env, "precisions": list(precisions), "seeds": list(seeds),
          "steps": steps, "eval_every": eval_every, "eval_episodes": eval_episodes,
          "target": target, "overrides": overrides, "acting_steps": acting_steps,
          "watts_per_core": watts_per_core, "watts_per_gpu": watts_per_gpu,
          "machine": provenance.machine_info(), "started": time.strftime("%Y-%m-%d %H:%M:%S")}
  runs, peers = [], []
  jobs = jobs_for(agent, env, precisions, seeds, steps, eval_every, eval_episodes, target,
                  overrides, acting_steps)
  for i, job in enumerate(jobs):
    what = f"{job['precision']} seed {job['seed']}" if job["kind"] == "train" else "Acme TF peer"
    log(f"[{i + 1}/{len(jobs)}] {what}")
    res = run_job(job, workdir, log)
    if res["kind"] == "train":
      res["energy_j"] = res["cpu_seconds"] * watts_per_core + res["gpu_seconds"] * watts_per_gpu
      res["energy_j_per_1k_actor_steps"] = 1e3 * res["energy_j"] / res["actor_steps"]
      runs.append(res)
    else:
      peers.append(res)
  return report(outdir, runs, peers, meta)


def report(outdir, runs, peers, meta):
  """Summary, CSVs, plots and table.md from finished runs; returns (summary, table)."""
  summary = summarize(runs, meta["precisions"])
  write_files(outdir, runs, peers, summary, meta)
  plot(outdir, runs, peers, summary, meta)
  table = format_table(summary, peers, meta)
  with atomic.atomic_write(os.path.join(outdir, "table.md")) as f:
    f.write(table + "\n")
  return summary, table


def load_bench(outdir) -> Dict[str, Any]:
  """The bench.json of a finished benchmark: {"meta", "summary", "runs", "peers"}.

  Raises:
    FileNotFoundError: `outdir` has no bench.json.
  """
  path = os.path.join(outdir, "bench.json")
  if not os.path.isfile(path):
    raise FileNotFoundError(f"{outdir}: no bench.json there (not the output directory of a "
                            "finished 'actorq bench')")
  with open(path, encoding="utf-8") as f:
    return json.load(f)


def render(outdir):
  """Rewrites a finished benchmark's CSVs, plots and table from its bench.json (after
  a change to the report, without rerunning anything); returns (summary, table).

  Raises:
    FileNotFoundError: `outdir` has no bench.json.
  """
  data = load_bench(outdir)
  return report(outdir, data["runs"], data["peers"], data["meta"])


if __name__ == "__main__":
  from actorq.cli.benchmarks import actorq_bench as command_line  # its flags: cli/
  sys.exit(command_line.main())
