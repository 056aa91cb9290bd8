"""`actorq quantize`: how a trained policy fares compressed.

    actorq quantize --checkpoint RUN [--precision int8] [--per-tensor] [--episodes 20]
        fp32 against one lower precision: return, greedy-action agreement, bytes
    actorq quantize --checkpoint RUN [RUN ...] --sweep bits=8,6,4,3,2
        [--granularity per-channel,per-tensor] [--sparsity 0,0.5,0.9] [--episodes 20 |
        --seeds 100-119] [--low-bit-runtime simulated|litert] [--out DIR]
        the bit-width x granularity x sparsity study (`studies/quantize.py`)
    actorq quantize --checkpoint RUN --search --latency-budget 0.3 [--size-budget 0.1]
        [--choices fp32,fp16,int8,int6,int4,int3,int2] [--prune 0,0.5,0.9] [--out DIR]
        the per-layer mixed-precision search; writes precision_policy.json
    actorq quantize --checkpoint RUN [RUN ...] --sensitivity [--episodes 20] [--out DIR]
        which layer's int8 execution moves the policy (agreement/KL/return per layer)

Bad input (an unknown bit width, granularity or choice, a sparsity outside [0, 1), a
missing checkpoint, no budget for --search, several checkpoints for --search or the
plain comparison) prints one line and exits 2 before anything is written.
"""
from __future__ import annotations

import dataclasses

from actorq import core
from actorq.cli import main as cli
from actorq.components.envs import environments
from actorq.studies import checks
from actorq.launch import spec as spec_lib
from actorq.studies import quantize as quantize_study
from actorq.studies import reward_parity as evaluation

# Every precision a policy can be compared at against fp32.
PRECISIONS = tuple(p for p in core.PRECISIONS if p != core.FP32)
# The study's defaults are `StudySettings`' own: the flags below show and fill them.
STUDY_DEFAULTS = quantize_study.StudySettings(checkpoint=())


def add_parser(subparsers):
  p = subparsers.add_parser(
      "quantize", help="compare a checkpoint's policy at fp32 and lower precisions; "
      "bit-width/pruning sweeps (--sweep) and a per-layer precision search (--search)")
  p.add_argument("--checkpoint", required=True, nargs="+", metavar="RUN",
                 help="run directory of 'actorq train' (several, or a directory of runs such "
                      "as an 'actorq sweep' directory, for --sweep over training seeds)")
  p.add_argument("--precision", choices=PRECISIONS, default="int8")
  p.add_argument("--per-tensor", action="store_true",
                 help="one scale per weight tensor (default: per output channel)")
  p.add_argument("--episodes", type=cli.positive_int("--episodes"),
                 default=STUDY_DEFAULTS.episodes,
                 help="evaluation episodes per setting (default 20)")
  p.add_argument("--seed", type=cli.seed("--seed"), default=STUDY_DEFAULTS.seed,
                 help="evaluation environment seed (the same for every precision); with "
                      "--sweep/--search the episodes use seeds SEED, SEED+1, ...")
  study = p.add_argument_group("sweep and search (see actorq/studies/quantize.py)")
  study.add_argument("--sweep", default=None, metavar="bits=B,B,...",
                     help="bit widths to sweep: ints 2..8 and fp32/fp16/bf16, e.g. bits=8,6,4,3,2")
  study.add_argument("--granularity", default=STUDY_DEFAULTS.granularity, metavar="G[,G]",
                     help="per-channel and/or per-tensor integer scales (default per-channel)")
  study.add_argument("--sparsity", default=STUDY_DEFAULTS.sparsity, metavar="S[,S,...]",
                     help="magnitude-pruning levels in [0, 1) (default 0)")
  study.add_argument("--seeds", nargs="+", default=None, metavar="SEEDS",
                     help="evaluation environment seeds, as 100-119, 1,2,3 or 1 2 3 "
                          "(overrides --episodes/--seed)")
  study.add_argument("--low-bit-runtime", choices=("simulated", "litert"),
                     default=STUDY_DEFAULTS.low_bit_runtime,
                     help="run sub-8-bit settings simulated (dequantized, fp32 JAX kernels; the "
                          "QAT forward's arithmetic; default) or on LiteRT int8 kernels (b-bit "
                          "values held in int8)")
  study.add_argument("--temperature", type=cli.positive_float("--temperature"),
                     default=STUDY_DEFAULTS.temperature,
                     help="T of softmax(Q / T) for the KL of Q-value policies (default 1)")
  study.add_argument("--latency-repeats", type=cli.positive_int("--latency-repeats"),
                     default=STUDY_DEFAULTS.latency_repeats,
                     help="batch-1 calls per latency median (default 200)")
  study.add_argument("--latency-clock", choices=("wall", "cpu"),
                     default=STUDY_DEFAULTS.latency_clock,
                     help="latency as the median wall time per call (default) or process CPU "
                          "time per call (robust on a shared, oversubscribed machine); both "
                          "are reported, this one is used for ratios, fronts and budgets")
  study.add_argument("--max-reference-obs", type=cli.positive_int("--max-reference-obs"),
                     default=STUDY_DEFAULTS.max_reference_obs,
                     help="fp32-visited observations that agreement/KL use")
  study.add_argument("--out", default=None, metavar="DIR",
                     help="output directory (default: RUN/quantize-sweep or "
                          "RUN/precision-search; required with several checkpoints)")
  study.add_argument("--overwrite", action="store_true",
                     help="write over an earlier study's report in --out (sweep.json, table.md, "
                          "sensitivity.md, precision_policy.json, search.md; without it such a "
                          "folder is refused; the per-checkpoint rows in runs/ are reused when "
                          "their options match)")
  study.add_argument("--sensitivity", action="store_true",
                     help="per-layer int8 sensitivity: agreement, KL and return when each "
                          "layer alone is int8, when each alone stays fp32 (the first: the "
                          "input kept in float), and int8 weights without activation "
                          "quantization; writes sensitivity.md (median agreement over runs)")
  study.add_argument("--search", action="store_true",
                     help="per-layer mixed-precision search under the budgets below")
  study.add_argument("--latency-budget", type=cli.positive_float("--latency-budget"),
                     default=None, metavar="FRACTION",
                     help="latency budget as a fraction of the fp32 JAX batch-1 latency, "
                          "measured on LiteRT (e.g. 0.3)")
  study.add_argument("--size-budget", type=cli.positive_float("--size-budget"), default=None,
                     metavar="FRACTION",
                     help="stored-bytes budget as a fraction of the fp32 bytes (e.g. 0.1)")
  study.add_argument("--choices", default=STUDY_DEFAULTS.choices,
                     help="per-layer choices (labels as in quantization/mixed.py: fp32, fp16, "
                          "bf16, int2..int8, /tensor, +p<sparsity>)")
  study.add_argument("--prune", default=STUDY_DEFAULTS.prune, metavar="S[,S,...]",
                     help="pruning levels crossed with every integer choice (default 0)")
  study.add_argument("--objective", choices=("agreement", "kl", "return"),
                     default=STUDY_DEFAULTS.objective,
                     help="search score: greedy-action agreement with fp32 on calibration "
                          "observations (default), minus the mean KL to fp32 there (kl), or "
                          "the mean return of the calibration episodes (return)")
  study.add_argument("--calibration-episodes", type=cli.positive_int("--calibration-episodes"),
                     default=STUDY_DEFAULTS.calibration_episodes,
                     help="fp32 episodes whose observations calibrate the search")
  study.add_argument("--calibration-seed", type=cli.nonnegative_int("--calibration-seed"),
                     default=STUDY_DEFAULTS.calibration_seed,
                     help="first calibration environment seed (default 54321; evaluation "
                          "seeds stay separate)")
  study.add_argument("--search-runtime", choices=("litert", "simulated"),
                     default=STUDY_DEFAULTS.search_runtime,
                     help="runtime that scores candidates (default litert: what will execute)")
  study.add_argument("--max-trials", type=cli.positive_int("--max-trials"),
                     default=STUDY_DEFAULTS.max_trials,
                     help="evaluations the search may spend (default 2000)")
  return p


def run(args) -> int:
  if args.sweep is not None or args.search or args.sensitivity:
    fields = {f.name: getattr(args, f.name)
              for f in dataclasses.fields(quantize_study.StudySettings)}
    if args.seeds is not None:  # typed here, once: the study takes integers
      try:
        fields["seeds"] = list(cli.parse_seeds(args.seeds))
      except ValueError as e:
        raise cli.UsageError(f"--seeds {' '.join(args.seeds)}: {e}") from None
    return quantize_study.run(quantize_study.StudySettings(**fields))
  if len(args.checkpoint) != 1:
    raise cli.UsageError("--checkpoint takes one run directory unless --sweep is given")
  run, state, path = spec_lib.load_run(args.checkpoint[0])
  checks.check_single_agent(run.env, run.logdir, "quantize")
  builder = run.make_builder()
  env_fn = lambda: environments.make_environment(run.env, seed=args.seed)
  env = env_fn()
  env_spec = environments.environment_spec(env)
  networks = builder.make_networks(env_spec)
  checks.check_feed_forward(networks, run.agent, "quantize")
  policy = builder.make_policy(networks, env_spec, evaluation=True)
  actions = env_spec.actions
  action_range = float(max((actions.maximum - actions.minimum).max(), 1e-9)) \
      if hasattr(actions, "maximum") and not hasattr(actions, "num_values") else 1.0
  print(f"actorq: {run.agent} on {run.env}, checkpoint {path} "
        f"(learner step {state['learner_steps']}); {args.episodes} greedy episodes per precision, "
        f"{'per-tensor' if args.per_tensor else 'per-channel'} scales", flush=True)
  try:
    rows = evaluation.reward_parity(env_fn, state["policy_params"], networks.spec,
                                    policy.selector, ("fp32", args.precision), args.episodes,
                                    per_channel=not args.per_tensor, action_range=action_range)
  except core.EnvironmentFailure as e:
    raise core.EnvironmentFailure(f"{run.env}: {e}") from e
  ref = rows[0]
  print(f"{'precision':<16}{'mean return':>12}{'std':>9}{'action agreement':>18}{'model bytes':>13}")
  for r in rows:
    print(f"{r.precision:<16}{r.episode_return:>12.1f}{r.episode_return_std:>9.1f}"
          f"{r.action_agreement:>18.3f}{r.model_bytes:>13d}")
  q = rows[1]
  ratio = q.episode_return / ref.episode_return if ref.episode_return else float("nan")
  print(f"{args.precision}/fp32: return ratio {ratio:.3f}, model bytes ratio "
        f"{q.model_bytes / ref.model_bytes:.3f}, greedy-action agreement {q.action_agreement:.3f}")
  return 0
