"""`actorq quantize --sweep` and `--search`: load checkpoints, run the study
(`actorq.studies.compression`, `actorq.quantization.precision_search`), write its
files (`actorq.studies.quantize_report`).

Sweep files (in `--out`, default `RUN/quantize-sweep`):
  runs/<run>.json  one checkpoint's rows and episodes with what made them (checkpoint path
                and learner step, settings, evaluation seeds, latency options): a later
                sweep into the same `--out` with the same options reuses it, so a long sweep
                that stopped (or, with --overwrite, one a checkpoint is added to)
                computes only what is missing. A folder holding a finished report
                (`REPORT_FILES`) is refused without --overwrite
  sweep.csv     one row per (run, setting): `compression_study.ROW_COLUMNS` + latency_ratio
  episodes.csv  one row per (run, setting, evaluation seed): return, length, a digest of the
                first observation (equal across settings: the seeds are paired)
  summary.csv   one row per setting over the runs (training seeds), Pareto flags
  table.md      the summary table with the definitions; also printed
  sweep.png     return vs stored bytes and vs latency, Pareto fronts, simulated hollow
  sweep.json    settings, seeds, checkpoints (with their qat_bits), machine, every row

Search files (in `--out`, default `RUN/precision-search`):
  precision_policy.json  the chosen per-layer policy (format: docs/precision_policy.md),
                         each layer's choice explained, the budgets and measured figures
  search_trials.csv      every evaluated policy (`precision_search.TRIAL_COLUMNS`)
  search_latency.csv     the LiteRT latency of every float/int8 layer pattern
  search_eval.csv        fp32, the chosen policy (LiteRT mixed and simulated), uniform int8
                         and uniform PTQ at the policy's integer widths, on the evaluation
                         seeds (`ROW_COLUMNS`)
  search.md              the same as a report
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
import platform
import re
import sys
import time
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from actorq import core
from actorq.components import atomic
from actorq.components.envs import environments
from actorq.components import run_dir
from actorq.studies import checks
from actorq.agents import registry
from actorq.launch import spec as spec_lib
from actorq.quantization import mixed
from actorq.quantization import execution as qx
from actorq.quantization import fidelity as qf
from actorq.studies import compression as cs
from actorq.quantization import precision_search as ps
from actorq.studies import quantize_report


# ----------------------------------------------------------------------------------------
# Parsing (every check runs before anything is loaded or written).


def parse_bits(text: str) -> List[Any]:
  """`bits=8,6,4` -> [8, 6, 4] (ints 2..8 and fp32/fp16/bf16, order kept, no repeats).

  Raises:
    core.UsageError: one line naming what is wrong and what is allowed.
  """
  m = re.fullmatch(r"\s*bits\s*=\s*(.+)", str(text))
  if not m:
    raise core.UsageError(f"--sweep {text!r} not understood; allowed: bits=B,B,... with B an "
                         "int 2..8 or fp32/fp16/bf16, e.g. --sweep bits=8,6,4,3,2")
  out: List[Any] = []
  for token in m.group(1).split(","):
    token = token.strip()
    if token in mixed.FLOAT_KINDS:
      value: Any = token
    elif re.fullmatch(r"[0-9]+", token) and 2 <= int(token) <= 8:
      value = int(token)
    else:
      raise core.UsageError(f"--sweep bit width {token!r} is not supported; allowed: ints 2..8 "
                           "and fp32, fp16, bf16")
    if value not in out:
      out.append(value)
  return out


def parse_granularities(text: str) -> List[str]:
  out = []
  for token in str(text).split(","):
    token = token.strip()
    if token not in mixed.GRANULARITIES:
      raise core.UsageError(f"--granularity {token!r} unknown; allowed: per-channel, per-tensor")
    if token not in out:
      out.append(token)
  return out


def parse_fractions(text: str, flag: str) -> List[float]:
  """`0,0.5,0.9` -> floats in [0, 1), order kept, no repeats."""
  out = []
  for token in str(text).split(","):
    try:
      value = float(token)
    except ValueError:
      raise core.UsageError(f"{flag} {token!r} is not a number; allowed: values in [0, 1) "
                           "such as 0,0.5,0.9") from None
    if not 0.0 <= value < 1.0:
      raise core.UsageError(f"{flag} {token!r} is outside [0, 1)")
    if value not in out:
      out.append(value)
  return out


def evaluation_seeds(study: "StudySettings") -> List[int]:
  """The study's evaluation seeds: `study.seeds`, else `seed .. seed + episodes - 1`."""
  if study.seeds:
    return [int(s) for s in study.seeds]
  return list(range(study.seed, study.seed + study.episodes))


def expand_checkpoints(paths: Sequence[str]) -> List[str]:
  """Run directories: each path is a run directory (or its checkpoints/ folder), or a
  directory whose sub-directories are runs (e.g. an `actorq sweep` directory).

  Raises:
    core.UsageError: a path that is neither.
  """
  out = []
  for path in paths:
    try:
      found = [run_dir.resolve(path)[0]]
    except core.UsageError:
      found = []
      if os.path.isdir(path):
        for name in sorted(os.listdir(path)):
          sub = os.path.join(path, name)
          if os.path.isfile(os.path.join(sub, run_dir.RUN_INFO)):
            found.append(os.path.abspath(sub))
      if not found:
        raise core.UsageError(f"--checkpoint {path} is neither a run directory of 'actorq train' "
                             f"nor a directory of runs (no {run_dir.RUN_INFO} in it, its parent "
                             "or its sub-directories)") from None
    for f in found:
      if f not in out:
        out.append(f)
  return out


# ----------------------------------------------------------------------------------------
# Loading a run.


@dataclasses.dataclass
class LoadedRun:
  """A checkpoint with what the study needs."""
  name: str
  path: str
  info: Dict[str, Any]
  learner_steps: int
  params: Any
  spec: Any
  semantics: qf.OutputSemantics
  env_fn: Any

  @property
  def qat_bits(self) -> Optional[int]:
    return self.info["config"].get("qat_bits")


def output_semantics(builder, networks, env_spec, selector,
                     temperature: float) -> qf.OutputSemantics:
  """What the policy's outputs are, as the builder declares them
  (`registry.policy_outputs`): Q-values (with their `to_values`: dueling combination,
  QR-DQN's quantile means), logits, or a continuous (tanh) policy.

  Raises:
    core.UsageError: the builder declares nothing usable (one line naming it).
  """
  try:
    return qf.OutputSemantics.declared(registry.policy_outputs(builder, networks, env_spec),
                                       selector, env_spec.actions, temperature)
  except ValueError as e:
    raise core.UsageError(f"actorq quantize: {e}") from None


def load_run(path: str, temperature: float) -> LoadedRun:
  """Raises core.UsageError for an unreadable run or checkpoint."""
  run, state, ckpt = spec_lib.load_run(path)
  checks.check_single_agent(run.env, run.logdir, "quantize")
  builder = run.make_builder()
  info, env_id = run.to_json(), run.env
  env_fn = lambda seed: environments.make_environment(env_id, seed=seed)
  env = env_fn(0)
  env_spec = environments.environment_spec(env)
  env.close()
  networks = builder.make_networks(env_spec)
  checks.check_feed_forward(networks, run.agent, "quantize")
  policy = builder.make_policy(networks, env_spec, evaluation=True)
  semantics = output_semantics(builder, networks, env_spec, policy.selector, temperature)
  del ckpt
  return LoadedRun(os.path.basename(os.path.normpath(path)), path, info,
                   int(state.get("learner_steps", -1)), state["policy_params"], networks.spec,
                   semantics, env_fn)


def _machine() -> Dict[str, Any]:
  return {"platform": platform.platform(), "python": sys.version.split()[0],
          "cpus": os.cpu_count(), "xla_flags": os.environ.get("XLA_FLAGS", ""),
          "litert_threads": 1}


def _qat_line(runs: Sequence[LoadedRun]) -> Optional[str]:
  bits = sorted({r.qat_bits for r in runs if r.qat_bits is not None})
  if not bits:
    return None
  return (f"trained with QAT at {', '.join(map(str, bits))} bits (qat.fake_quant_params: "
          "symmetric, per-channel, min-max); the setting int<b> executed simulated reproduces "
          "that training forward bit for bit")


# The files by which a folder holds an earlier report of `actorq quantize` (a finished
# sweep, sensitivity study or search; a stopped sweep leaves only its runs/ caches).
REPORT_FILES = ("sweep.json", "table.md", "sensitivity.md", "precision_policy.json",
                "search.md")


def _default_out(runs: Sequence[str], out: Optional[str], name: str,
                 overwrite: bool = False) -> str:
  """`--out` (else `<run>/<name>` for one checkpoint), which must be no train run's
  directory and, without `overwrite`, hold no earlier report of `actorq quantize`.

  Raises:
    core.UsageError: one line naming the folder, what it holds and the ways on.
  """
  if out:
    run_dir.refuse_run_directory(out, "--out")  # issue 42: not into a run's own folder
  elif len(runs) != 1:
    raise core.UsageError("--out DIR is needed with several checkpoints")
  else:
    out = os.path.join(runs[0], name)
  run_dir.refuse_earlier_report(out, REPORT_FILES, "--out", "actorq quantize", overwrite)
  return out


@dataclasses.dataclass(frozen=True)
class StudySettings:
  """What a study of `run` does (`actorq quantize --sweep/--search/--sensitivity` fills it
  from its flags, `cli/quantize.py`; the defaults are the flags' defaults).

  Attributes:
    checkpoint: run directories of `actorq train`, or directories of runs.
    sweep: ``"bits=B,B,..."`` (ints 2..8 and fp32/fp16/bf16): the bit-width sweep; None:
      no sweep.
    search: the per-layer mixed-precision search under the budgets.
    sensitivity: the per-layer int8 sensitivity study.
    episodes, seed: evaluation episodes per setting, with environment seeds seed, seed+1, ...
    seeds: evaluation seeds (integers >= 0, `cli.parse_seeds` reads `--seeds`; overrides
      episodes/seed), or None.
    granularity: ``"per-channel"`` and/or ``"per-tensor"``, comma separated.
    sparsity: magnitude-pruning levels in [0, 1), comma separated.
    low_bit_runtime: ``"simulated"`` or ``"litert"`` for sub-8-bit settings.
    temperature: T of softmax(Q / T) for the KL of Q-value policies (> 0).
    latency_repeats: batch-1 calls per latency median (>= 1).
    latency_clock: ``"wall"`` or ``"cpu"``.
    max_reference_obs: fp32-visited observations that agreement/KL use (>= 1).
    out: output directory; None: next to the checkpoint (one checkpoint only).
    latency_budget, size_budget: the search's budgets as fractions of fp32's (or None).
    choices: the search's per-layer choices (`mixed` labels), comma separated.
    prune: pruning levels crossed with every integer choice, comma separated.
    objective: ``"agreement"``, ``"kl"`` or ``"return"``.
    calibration_episodes, calibration_seed: the fp32 calibration episodes and first seed.
    search_runtime: ``"litert"`` or ``"simulated"``: what scores the search's candidates.
    max_trials: evaluations the search may spend (>= 1).
    overwrite: replace an earlier report of `actorq quantize` in `out` (else refused).
  """
  checkpoint: Sequence[str]
  sweep: Optional[str] = None
  search: bool = False
  sensitivity: bool = False
  episodes: int = 20
  seed: int = 12345
  seeds: Optional[Sequence[int]] = None
  granularity: str = "per-channel"
  sparsity: str = "0"
  low_bit_runtime: str = "simulated"
  temperature: float = 1.0
  latency_repeats: int = 200
  latency_clock: str = "wall"
  max_reference_obs: int = 5000
  out: Optional[str] = None
  latency_budget: Optional[float] = None
  size_budget: Optional[float] = None
  choices: str = "fp32,fp16,int8,int6,int4,int3,int2"
  prune: str = "0"
  objective: str = "agreement"
  calibration_episodes: int = 5
  calibration_seed: int = 54321
  search_runtime: str = "litert"
  max_trials: int = 2000
  overwrite: bool = False


# ----------------------------------------------------------------------------------------
# The sweep.


def run(study: StudySettings) -> int:
  studies = [flag for flag, given in (("--sweep", study.sweep is not None),
                                      ("--search", study.search),
                                      ("--sensitivity", study.sensitivity))
             if given]
  if len(studies) > 1:
    raise core.UsageError(f"{' and '.join(studies)} are separate studies; give one of them")
  if study.search:
    return run_search(study)
  return run_sweep(study)


def _episodes_rows(run_name: str, row: Dict[str, Any]) -> List[Dict[str, Any]]:
  return [{"run": run_name, "setting": row["setting"], "execution": row["execution"],
           "seed": e.seed, "episode_return": e.episode_return, "length": e.length,
           "first_observation": e.first_observation} for e in row["_episodes"]]


def _print_row(run_name: str, row: Dict[str, Any]) -> None:
  sim = " SIMULATED" if row["simulated"] else ""
  print(f"  {run_name} {row['setting']:<16} {row['execution']}{sim}: return "
        f"{row['return_mean']:.1f} (paired diff {row['paired_diff_mean']:+.1f}), agreement "
        f"{row['agreement']:.3f}, {row['stored_bytes']} B, {row['latency_us']:.1f} us",
        flush=True)


def _run_cache_key(run: LoadedRun, settings: Sequence[qx.Setting], seeds: Sequence[int],
                   study: StudySettings) -> Dict[str, Any]:
  """What one checkpoint's rows depend on; a cached file is reused only when it matches."""
  return {"path": os.path.abspath(run.path), "learner_steps": run.learner_steps,
          "settings": [[s.name, s.execution, repr(s.policy), s.bias_corrected]
                       for s in settings],
          "calibration_seeds": _calibration_seeds(study),
          "seeds": [int(x) for x in seeds], "temperature": study.temperature,
          "latency_repeats": study.latency_repeats, "latency_clock": study.latency_clock,
          "max_reference_obs": study.max_reference_obs}


def _load_cached_rows(path: str, key: Dict[str, Any]) -> Optional[List[Dict[str, Any]]]:
  """The rows in `path` if it holds them for `key` (else None: absent, unreadable or made
  with other options), with their episodes as `cs.Episode`s again."""
  try:
    with open(path, encoding="utf-8") as f:
      cached = json.load(f)
  except (OSError, ValueError):
    return None
  if cached.get("key") != json.loads(json.dumps(key, default=_json_default)):
    return None
  return [{**row, "_episodes": [cs.Episode(**e) for e in row["_episodes"]]}
          for row in cached["rows"]]


def _save_cached_rows(path: str, key: Dict[str, Any], rows: Sequence[Dict[str, Any]]) -> None:
  """Writes one checkpoint's rows atomically (a stopped sweep leaves no half file)."""
  payload = {"key": key, "rows": [
      dict(row, _episodes=[dataclasses.asdict(e) for e in row["_episodes"]]) for row in rows]}
  atomic.write_json(path, payload, indent=None, default=_json_default)


def run_sweep(study: StudySettings) -> int:
  """The bit-width sweep (`--sweep`) or, with `study.sensitivity`, the per-layer int8
  sensitivity study (`qx.sensitivity_settings`): the same runs, files and cache,
  other settings; the sensitivity study also writes sensitivity.md (median agreement)."""
  sensitivity = bool(study.sensitivity)
  if sensitivity:
    bits, granularities, sparsities = [8], [mixed.PER_CHANNEL], [0.0]
  else:
    bits = parse_bits(study.sweep)
    granularities = parse_granularities(study.granularity)
    sparsities = parse_fractions(study.sparsity, "--sparsity")
  seeds = evaluation_seeds(study)
  paths = expand_checkpoints(study.checkpoint)
  out = _default_out(paths, study.out, "quantize-sensitivity" if sensitivity else
                     "quantize-sweep", study.overwrite)
  runs = [load_run(p, study.temperature) for p in paths]
  names = [r.name for r in runs]
  if len(set(names)) != len(names):
    for i, r in enumerate(runs):
      r.name = f"{i}-{r.name}"
  first = runs[0]
  for r in runs[1:]:
    if (r.info["agent"], r.info["env"], r.spec) != (first.info["agent"], first.info["env"],
                                                    first.spec):
      raise core.UsageError(f"checkpoints differ: {first.path} is {first.info['agent']} on "
                           f"{first.info['env']}, {r.path} is {r.info['agent']} on "
                           f"{r.info['env']} (or another network); sweep one configuration")
  try:
    settings = (qx.sensitivity_settings(first.spec) if sensitivity else
                qx.sweep_settings(first.spec, bits, granularities, sparsities,
                                  study.low_bit_runtime))
  except ValueError as e:
    raise core.UsageError(str(e)) from None
  out = atomic.ensure_writable_dir(out, "--out")
  qat = _qat_line(runs)
  print(f"actorq: quantize {'sensitivity study' if sensitivity else 'sweep'} of "
        f"{len(runs)} checkpoint(s) ({first.info['agent']} on "
        f"{first.info['env']}): {len(settings)} settings x {len(seeds)} paired evaluation "
        f"seeds ({seeds[0]}..{seeds[-1]}); sub-8-bit settings {study.low_bit_runtime}", flush=True)
  if qat:
    print(f"actorq: {qat}", flush=True)
  rows_by_run: Dict[str, List[Dict[str, Any]]] = {}
  episode_rows: List[Dict[str, Any]] = []
  start = time.time()
  for r in runs:
    cache_path = os.path.join(out, "runs", f"{r.name}.json")
    key = _run_cache_key(r, settings, seeds, study)
    rows = _load_cached_rows(cache_path, key)
    if rows is not None:
      print(f"  {r.name}: reused {len(rows)} settings from {cache_path}", flush=True)
    else:
      ctx = cs.StudyContext(r.params, r.spec, r.env_fn, r.semantics, seeds,
                            latency_repeats=study.latency_repeats,
                            latency_clock=study.latency_clock,
                            max_reference_observations=study.max_reference_obs,
                            calibration_seeds=_calibration_seeds(study))
      rows = cs.run_study(ctx, settings, progress=lambda row, n=r.name: _print_row(n, row))
      _save_cached_rows(cache_path, key, rows)
    for row in rows:
      episode_rows.extend(_episodes_rows(r.name, row))
    rows_by_run[r.name] = rows
  summary = cs.summarize(rows_by_run)
  flat = [dict({k: v for k, v in row.items() if not k.startswith("_")}, run=name)
          for name, rows in rows_by_run.items() for row in rows]
  columns = ("run",) + cs.ROW_COLUMNS + ("latency_ratio",)
  quantize_report.write_csv(os.path.join(out, "sweep.csv"), flat, columns)
  quantize_report.write_csv(os.path.join(out, "episodes.csv"), episode_rows,
                            ("run", "setting", "execution", "seed", "episode_return", "length",
                             "first_observation"))
  quantize_report.write_csv(os.path.join(out, "summary.csv"), summary, cs.SUMMARY_COLUMNS)
  title = (f"{first.info['agent']} on {first.info['env']}: {len(runs)} checkpoint(s), "
           f"{len(seeds)} paired evaluation seeds")
  extra = [f"Command: `actorq {' '.join(sys.argv[1:])}`" if sys.argv[1:] else "",
           f"Checkpoints: {', '.join(f'{r.name} (learner step {r.learner_steps})' for r in runs)}",
           f"Evaluation seeds: {', '.join(map(str, seeds))}",
           f"Latency: median {study.latency_clock} time per batch-1 call "
           f"({study.latency_repeats} calls; both clocks in sweep.csv)"]
  if qat:
    extra.append(f"Note: {qat}.")
  quantize_report.write_table(os.path.join(out, "table.md"), title, summary,
                              [e for e in extra if e])
  quantize_report.plot(os.path.join(out, "sweep.png"), summary, title, study.latency_clock)
  with atomic.atomic_write(os.path.join(out, "sweep.json")) as f:
    json.dump({"agent": first.info["agent"], "env": first.info["env"],
               "checkpoints": [{"name": r.name, "path": r.path, "learner_steps": r.learner_steps,
                                "seed": r.info.get("seed"), "qat_bits": r.qat_bits}
                               for r in runs],
               "bits": bits, "granularities": granularities, "sparsities": sparsities,
               "evaluation_seeds": seeds, "low_bit_runtime": study.low_bit_runtime,
               "temperature": study.temperature, "output_kind": first.semantics.kind,
               "latency_clock": study.latency_clock,
               "executions": qx.EXECUTIONS, "machine": _machine(),
               "seconds": time.time() - start, "summary": summary, "rows": flat},
              f, indent=1, default=_json_default)
  written = "sweep.csv, episodes.csv, summary.csv, table.md, sweep.png, sweep.json"
  if sensitivity:
    lines = quantize_report.sensitivity_lines(summary)
    with atomic.atomic_write(os.path.join(out, "sensitivity.md")) as f:
      f.write("\n".join([f"# int8 sensitivity: {title}", ""] + [e for e in extra if e] + [""]
                        + lines) + "\n\n" + SENSITIVITY_NOTE)
    written += ", sensitivity.md"
  else:
    lines = quantize_report.table_lines(summary)
  print("\n".join(lines))
  print(f"actorq: wrote {written} to {out} ({time.time() - start:.0f} s)")
  return 0


SENSITIVITY_NOTE = """\
How to read it: `int8` runs every layer on LiteRT's dynamic-range int8 kernels, which
quantize each layer's input per batch row at run time (one scale for the whole row);
`int8 weights only` rounds the same weights but quantizes no activation, so the gap between
the two is the activations' share. `only L int8` moves one layer to int8, `int8 but L fp32`
keeps one layer in float32 (for the first layer: the network input kept in float);
`bias-corrected` rows have their biases corrected on fp32 calibration episodes (what a
training run's int8 actors execute, calibrated there on the newest replay sample); `fp16`
is the yardstick of a 16-bit float policy. Agreement is over the fp32 policy's visited
observations (see table.md's definitions); Q regret is the mean over them of
Q(s, a_fp32) - Q(s, a) under the fp32 Q-values (return units): what a choice that
disagrees gives up, by the fp32 network's own estimate.
"""


def _calibration_seeds(study: StudySettings) -> List[int]:
  """The fp32 calibration episodes' seeds: --calibration-seed, +1, ... (--calibration-
  episodes of them)."""
  return list(range(study.calibration_seed, study.calibration_seed + study.calibration_episodes))


def _json_default(value):
  if isinstance(value, (np.integer,)):
    return int(value)
  if isinstance(value, (np.floating,)):
    return float(value)
  if isinstance(value, np.bool_):
    return bool(value)
  raise TypeError(f"not JSON serialisable: {type(value).__name__}")


# ----------------------------------------------------------------------------------------
# The search.


def measure_patterns(run: LoadedRun, cache: mixed.LayerCache, layers: Sequence[str],
                     obs1: np.ndarray, repeats: int, clock: str, rounds: int = 3):
  """`(LatencyTable, fp32 JAX latency us)`: every float/int8 pattern on LiteRT and the fp32
  JAX runtime, measured in `rounds` interleaved rounds (median of the rounds' medians)."""
  fp32_policy = mixed.PrecisionPolicy.uniform(run.spec, mixed.LayerChoice("fp32"))
  pats = ps.LatencyTable.patterns(layers)
  samples: Dict[Any, List[float]] = {p: [] for p in pats}
  ref: List[float] = []
  for _ in range(rounds):
    rt = qx.make_runtime(run.params, run.spec, fp32_policy, qx.JAX_FP32, cache=cache)
    ref.append(qx.measure_latency_us(rt, obs1, repeats, clock))
    for p in pats:
      policy = mixed.PrecisionPolicy(tuple(
          (n, mixed.LayerChoice("fp32") if f else mixed.LayerChoice(mixed.INT, 8))
          for n, f in zip(layers, p)))
      rt = qx.make_runtime(run.params, run.spec, policy, qx.LITERT_MIXED, cache=cache)
      samples[p].append(qx.measure_latency_us(rt, obs1, repeats, clock))
  table = ps.LatencyTable(tuple(layers), {p: float(np.median(v)) for p, v in samples.items()},
                          {p: True for p in pats})
  return table, float(np.median(ref))


def _policy_latency(run: LoadedRun, cache, policy, obs1, repeats, clock, rounds=3) -> float:
  vals = []
  for _ in range(rounds):
    rt = qx.make_runtime(run.params, run.spec, policy, qx.LITERT_MIXED, cache=cache)
    vals.append(qx.measure_latency_us(rt, obs1, repeats, clock))
  return float(np.median(vals))


def run_search(study: StudySettings) -> int:
  if study.latency_budget is None and study.size_budget is None:
    raise core.UsageError("--search needs --latency-budget FRACTION (of the fp32 JAX latency) "
                         "and/or --size-budget FRACTION (of the fp32 bytes)")
  try:
    prune = parse_fractions(study.prune, "--prune")
    choices = mixed.parse_choices(study.choices, prune)
  except ValueError as e:
    raise core.UsageError(f"--choices: {e}") from None
  seeds = evaluation_seeds(study)
  paths = expand_checkpoints(study.checkpoint)
  if len(paths) != 1:
    raise core.UsageError(f"--search takes one checkpoint, got {len(paths)} runs")
  out = _default_out(paths, study.out, "precision-search", study.overwrite)
  run = load_run(paths[0], study.temperature)
  out = atomic.ensure_writable_dir(out, "--out")
  start = time.time()
  layers = [l.name for l in run.spec.parameter_layers]
  calib_seeds = list(range(study.calibration_seed, study.calibration_seed +
                           study.calibration_episodes))
  overlap = sorted(set(calib_seeds) & set(seeds))
  print(f"actorq: precision search for {run.info['agent']} on {run.info['env']} "
        f"({len(layers)} layers, {len(choices)} choices each), calibration seeds "
        f"{calib_seeds[0]}..{calib_seeds[-1]}, evaluation seeds {seeds[0]}..{seeds[-1]}"
        + (f" (overlapping: {overlap})" if overlap else ""), flush=True)
  calib = cs.StudyContext(run.params, run.spec, run.env_fn, run.semantics, calib_seeds,
                          max_reference_observations=study.max_reference_obs)
  ref = cs.reference_run(calib)
  obs1 = ref["observations"][:1]
  cache = mixed.LayerCache(run.params, run.spec)
  table, fp32_us = measure_patterns(run, cache, layers, obs1, study.latency_repeats,
                                    study.latency_clock)
  fp32_bytes = mixed.storage_report(mixed.compress(
      run.params, run.spec, mixed.PrecisionPolicy.uniform(run.spec, mixed.LayerChoice("fp32"))
  ))["bytes"]
  lat_budget = None if study.latency_budget is None else study.latency_budget * fp32_us
  size_budget = None if study.size_budget is None else study.size_budget * fp32_bytes
  print(f"actorq: fp32 JAX batch-1 latency ({study.latency_clock} clock) {fp32_us:.1f} us; "
        f"LiteRT all-int8 "
        f"{table.latency_us[tuple([False] * len(layers))]:.1f} us, all-float "
        f"{table.latency_us[tuple([True] * len(layers))]:.1f} us; budgets: "
        f"{'-' if lat_budget is None else f'{lat_budget:.1f} us'} latency, "
        f"{'-' if size_budget is None else f'{size_budget:.0f} B'} stored", flush=True)
  execution = qx.LITERT_MIXED if study.search_runtime == "litert" else qx.SIMULATED

  def evaluate(policy):
    rt = qx.make_runtime(run.params, run.spec, policy, execution, cache=cache)
    fid = qf.fidelity(ref["outputs"], qx.batched(rt, ref["observations"]), run.semantics)
    if study.objective == "return":
      eps = cs.run_episodes(run.env_fn, rt, run.semantics.selector, calib_seeds)
      score = float(np.mean([e.episode_return for e in eps]))
    elif study.objective == "kl":
      score = -fid["kl"] if not math.isnan(fid["kl"]) else -fid["action_distance"]
    else:
      score = fid["agreement"]
    return ps.Score(score, fid["agreement"], fid["kl"])

  start_policy = mixed.PrecisionPolicy.uniform(run.spec, mixed.LayerChoice("fp32"))
  def progress(t):
    move = f"{t.layer} {t.from_choice} -> {t.to_choice}" if t.layer else t.policy
    print(f"  {t.phase} (trial {t.trial}): {move}: score {t.score:.4f}, {t.latency_us:.1f} us, "
          f"{t.stored_bytes} B, violation {t.violation:.3f}", flush=True)

  result = ps.greedy_search(start_policy, choices, evaluate, table,
                            ps.stored_bytes_fn(cache), lat_budget, size_budget,
                            max_trials=study.max_trials, progress=progress)
  measured_us = _policy_latency(run, cache, result.policy, obs1, study.latency_repeats,
                                study.latency_clock)
  meets = result.meets_budget and (lat_budget is None or measured_us <= lat_budget)
  # Held-out evaluation on the evaluation seeds.
  compare = [qx.Setting("fp32", start_policy, qx.JAX_FP32),
             qx.Setting("search", result.policy, qx.LITERT_MIXED),
             qx.Setting("search (simulated)", result.policy, qx.SIMULATED)]
  int8 = mixed.PrecisionPolicy.uniform(run.spec, mixed.LayerChoice(mixed.INT, 8))
  compare.append(qx.Setting("int8", int8, qx.LITERT_INT8))
  for b in sorted({c.bits for c in result.policy.choices if c.kind == mixed.INT and c.bits < 8},
                  reverse=True):
    pol = mixed.PrecisionPolicy.uniform(run.spec, mixed.LayerChoice(mixed.INT, b))
    compare.append(qx.Setting(f"int{b}", pol, qx.execution_for(pol, study.low_bit_runtime)))
  ctx = cs.StudyContext(run.params, run.spec, run.env_fn, run.semantics, seeds,
                        latency_repeats=study.latency_repeats,
                        latency_clock=study.latency_clock,
                        max_reference_observations=study.max_reference_obs)
  eval_rows = cs.run_study(ctx, compare, progress=lambda row: _print_row(run.name, row))
  search_row = eval_rows[1]
  notes = {}
  for name, choice in result.policy.layers:
    layer = mixed.compress_layer(run.params[name]["w"], run.params[name]["b"], choice, name)
    notes[name] = {"stored_bytes": layer.storage["bytes"], "storage_format":
                   layer.storage["format"], "why": result.explanations.get(name, "")}
  mixed.save(
      os.path.join(out, "precision_policy.json"), result.policy, run.spec, notes=notes,
      source={"checkpoint": run.path, "agent": run.info["agent"], "env": run.info["env"],
              "learner_steps": run.learner_steps, "qat_bits": run.qat_bits},
      search={"method": "greedy (actorq/quantization/precision_search.py; HAQ problem, "
                        "Wang et al. 2019)",
              "objective": study.objective, "search_runtime": execution,
              "choices": [c.label for c in choices], "calibration_seeds": calib_seeds,
              "trials": len(result.trials), "max_trials": study.max_trials},
      budget={"latency_fraction_of_fp32": study.latency_budget, "latency_us": lat_budget,
              "latency_clock": study.latency_clock,
              "size_fraction_of_fp32": study.size_budget, "stored_bytes": size_budget,
              "fp32_jax_latency_us": fp32_us, "fp32_stored_bytes": fp32_bytes},
      measured={"meets_budget": bool(meets), "latency_us_litert": measured_us,
                "latency_us_table": result.latency_us, "stored_bytes": result.stored_bytes,
                "calibration_score": result.score.score,
                "calibration_agreement": result.score.agreement,
                "calibration_kl": result.score.kl,
                "evaluation": {r["setting"]: {k: r[k] for k in (
                    "execution", "return_mean", "paired_diff_mean", "agreement", "kl",
                    "stored_bytes", "latency_us")} for r in eval_rows}},
      execution={"runtime": "litert-mixed", "float_layers": list(result.policy.float_layers),
                 "note": "integer layers of any width run LiteRT int8 kernels (values held in "
                         "int8); fp16/bf16 layers run float32 kernels on fp16/bf16-rounded "
                         "weights"})
  trials = [dataclasses.asdict(t) for t in result.trials]
  quantize_report.write_csv(os.path.join(out, "search_trials.csv"), trials, ps.TRIAL_COLUMNS)
  quantize_report.write_csv(
      os.path.join(out, "search_latency.csv"),
      [{"pattern": ",".join("float" if f else "int8" for f in p), "latency_us": v,
        "measured": table.measured[p]} for p, v in table.latency_us.items()],
      ("pattern", "latency_us", "measured"))
  columns = cs.ROW_COLUMNS + ("latency_ratio",)
  quantize_report.write_csv(os.path.join(out, "search_eval.csv"),
                            [{k: v for k, v in r.items() if not k.startswith("_")}
                             for r in eval_rows], columns)
  lines = [f"# Precision search: {run.info['agent']} on {run.info['env']}", "",
           f"Budgets: latency ({study.latency_clock} clock) {study.latency_budget} x fp32 JAX "
           f"({fp32_us:.1f} us) = "
           f"{'-' if lat_budget is None else f'{lat_budget:.1f} us'}; stored bytes "
           f"{study.size_budget} x fp32 ({fp32_bytes} B) = "
           f"{'-' if size_budget is None else f'{size_budget:.0f} B'}.",
           f"Result: {'meets' if meets else 'DOES NOT meet'} the budgets; LiteRT latency "
           f"{measured_us:.1f} us measured ({result.latency_us:.1f} us in the pattern table), "
           f"{result.stored_bytes} B stored; {len(result.trials)} trials.", "",
           "| layer | choice | why |", "|---|---|---|"]
  for name, choice in result.policy.layers:
    lines.append(f"| {name} | {choice.label} | {notes[name]['why']} |")
  lines += ["", "Held-out evaluation (evaluation seeds):", ""]
  summary = cs.summarize({run.name: eval_rows})
  lines += quantize_report.table_lines(summary)
  with atomic.atomic_write(os.path.join(out, "search.md")) as f:
    f.write("\n".join(lines) + "\n\n" + quantize_report.DEFINITIONS)
  print("\n".join(lines[2:]))
  print(f"actorq: wrote precision_policy.json, search_trials.csv, search_latency.csv, "
        f"search_eval.csv, search.md to {out} ({time.time() - start:.0f} s)")
  if not meets:
    print(f"actorq: the budgets were not met (search return {search_row['return_mean']:.1f}); "
          "the policy file holds the closest policy found", file=sys.stderr)
    return 1
  return 0
