"""`actorq quantize`: reward parity of a trained policy, fp32 versus a lower precision."""
from __future__ import annotations

from actorq import core
from actorq.components import environments, evaluation
from actorq.launch import cli, run_dir

# Every precision a policy can be compared at against fp32.
PRECISIONS = tuple(p for p in core.PRECISIONS if p != core.FP32)


def add_parser(subparsers):
  p = subparsers.add_parser(
      "quantize", help="compare a checkpoint's policy at fp32 and a lower precision")
  p.add_argument("--checkpoint", required=True, help="run directory of 'actorq train'")
  p.add_argument("--precision", choices=PRECISIONS, default="int8")
  p.add_argument("--per-tensor", action="store_true",
                 help="one scale per weight tensor (default: per output channel)")
  p.add_argument("--episodes", type=cli.positive_int("--episodes"), default=20)
  p.add_argument("--seed", type=cli.nonnegative_int("--seed"), default=12345,
                 help="evaluation environment seed (the same for every precision)")
  return p


def run(args) -> int:
  info, state, path = run_dir.load(args.checkpoint)
  builder = run_dir.make_builder(info)
  env_fn = lambda: environments.make_environment(info["env"], seed=args.seed)
  env = env_fn()
  env_spec = environments.environment_spec(env)
  networks = builder.make_networks(env_spec)
  policy = builder.make_policy(networks, env_spec, evaluation=True)
  actions = env_spec.actions
  action_range = float(max((actions.maximum - actions.minimum).max(), 1e-9)) \
      if hasattr(actions, "maximum") and not hasattr(actions, "num_values") else 1.0
  print(f"actorq: {info['agent']} on {info['env']}, checkpoint {path} "
        f"(learner step {state['learner_steps']}); {args.episodes} greedy episodes per precision, "
        f"{'per-tensor' if args.per_tensor else 'per-channel'} scales", flush=True)
  rows = evaluation.reward_parity(env_fn, state["policy_params"], networks.spec, policy.selector,
                                  ("fp32", args.precision), args.episodes,
                                  per_channel=not args.per_tensor, action_range=action_range)
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
