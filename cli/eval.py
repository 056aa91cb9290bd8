"""`actorq eval`: greedy evaluation of a trained run's newest readable checkpoint.

    actorq eval --checkpoint RUN_DIR [--episodes N] [--precision int8] [--video FILE.gif|.mp4]

Prints the mean and standard deviation of the undiscounted episode return and the
episode lengths. `--video` records the first episode: Gymnasium and Atari envs render
`rgb_array` frames (Gymnasium's classic-control envs such as CartPole need pygame
for that), dm_control renders offscreen through MuJoCo (MUJOCO_GL=egl unless set). GIFs are written with Pillow; MP4 needs
imageio (with imageio-ffmpeg). When a video cannot be made (no offscreen rendering on
this machine, or no MP4 writer installed), one line says why and the evaluation still
runs and prints: the exit status is 0. A bad --video suffix is a usage error (exit 2)
before anything runs.
"""
from __future__ import annotations

import os
import time

import numpy as np

from actorq import core
from actorq.cli import main as cli
from actorq.cli import precision_arg
from actorq.components.acting import loop as loop_lib
from actorq.components.acting import video
from actorq.components.envs import environments
from actorq.components.envs import multi_agent
from actorq.launch import spec as spec_lib
from actorq.studies import multi_agent_eval
from actorq.studies import reward_parity as evaluation



def add_parser(subparsers):
  p = subparsers.add_parser("eval", help="evaluate a run's newest checkpoint (greedy)")
  p.add_argument("--checkpoint", required=True,
                 help="run directory of 'actorq train' (or its checkpoints/ folder)")
  p.add_argument("--episodes", type=cli.positive_int("--episodes"), default=10)
  p.add_argument("--precision", default=None, metavar="PRECISION",
                 help="precision the policy runs at (default: the run's evaluation "
                      f"precision): {precision_arg.PRECISION_HELP}")
  p.add_argument("--seed", type=cli.seed("--seed"), default=12345,
                 help="evaluation environment seed")
  p.add_argument("--max-episode-steps", type=cli.positive_int("--max-episode-steps"),
                 default=None, help="end an episode after this many steps (default: the "
                 f"environment's own limit, at most {loop_lib.DEFAULT_MAX_EPISODE_STEPS})")
  p.add_argument("--video", default=None, metavar="FILE",
                 help="record the first episode to FILE.gif (Pillow) or FILE.mp4 (imageio); "
                      "skipped with a message where the machine cannot render offscreen")
  p.add_argument("--fps", type=cli.positive_int("--fps"), default=30, help="video frame rate")
  return p


def _env_kwargs(env_id: str, video: bool) -> dict:
  if video and env_id.startswith(("gym:", "atari:")):
    return {"render_mode": "rgb_array"}
  return {}


def run(args) -> int:
  if args.video is not None and not args.video.lower().endswith(video.SUFFIXES):
    raise cli.UsageError(f"--video {args.video} must end in .gif or .mp4")
  if args.video is not None:
    directory = os.path.dirname(os.path.abspath(args.video))
    if not os.path.isdir(directory):
      raise cli.UsageError(f"--video {args.video}: directory {directory} does not exist")
  precision, policy_file = precision_arg.actor_precision("--precision", args.precision)
  run, state, path = spec_lib.load_run(args.checkpoint)
  if args.video is not None and run.env.startswith("dmc:"):
    # MuJoCo's headless GL backend (EGL); set MUJOCO_GL yourself to choose another.
    os.environ.setdefault("MUJOCO_GL", "egl")
  builder = run.make_builder()
  if multi_agent.is_multi_agent(run.env):
    return _run_multi_agent(args, run, builder, state, path, precision)
  env = environments.make_environment(run.env, seed=args.seed,
                                      **_env_kwargs(run.env, args.video is not None))
  env_spec = environments.environment_spec(env)
  networks = builder.make_networks(env_spec)
  policy = builder.make_policy(networks, env_spec, evaluation=True)
  precision_arg.check_policy_file("--precision", precision, policy_file, networks.spec)
  precision = precision or policy.precision
  calibration = evaluation.calibration_for(
      state["policy_params"], networks.spec, policy.selector,
      lambda seed: environments.make_environment(run.env, seed=seed), precision)
  actor = evaluation.fixed_policy_actor(state["policy_params"], networks.spec, precision,
                                        policy.selector, seed=args.seed,
                                        calibration=calibration)
  print(f"actorq: {run.agent} on {run.env}, checkpoint {path} (actor step "
        f"{state.get('actor_steps', '?')}, learner step {state['learner_steps']}); "
        f"{args.episodes} greedy episodes at {precision}", flush=True)
  recorder = video.FrameRecorder()
  start = time.time()
  try:
    episodes = loop_lib.ActorLoop(
        env, actor, learn=False, hooks=[recorder] if args.video else [],
        max_episode_steps=args.max_episode_steps or loop_lib.DEFAULT_MAX_EPISODE_STEPS,
    ).run(num_episodes=args.episodes)
  except core.EnvironmentFailure as e:
    raise core.EnvironmentFailure(f"{run.env}: {e}") from e
  elapsed = time.time() - start
  returns = [e.episode_return for e in episodes]
  lengths = [e.episode_length for e in episodes]
  env.close()
  r, n = np.asarray(returns), np.asarray(lengths)
  print(f"episode return: mean {r.mean():.2f}, std {r.std():.2f}, min {r.min():.2f}, "
        f"max {r.max():.2f}")
  print(f"episode length: mean {n.mean():.1f}, min {n.min()}, max {n.max()} steps"
        + (f" (capped at {args.max_episode_steps})" if args.max_episode_steps else ""))
  if len(returns) <= 20:
    print("returns: " + ", ".join(f"{x:.1f}" for x in returns))
  print(f"({sum(lengths)} steps in {elapsed:.1f} s)")
  if args.video:
    why = recorder.error or video.write_video(args.video, recorder.frames, args.fps)
    if why is None:
      print(f"video: {args.video} ({len(recorder.frames)} frames of the first episode)")
    else:
      print(f"video skipped: cannot record {run.env} here: {why}")
  return 0


def _run_multi_agent(args, run, builder, state, path, precision) -> int:
  """A multi-agent run (``pz:`` id): the team return (the sum of the agents' returns) and
  each agent's return (`studies.multi_agent_eval`)."""
  if args.video is not None:
    raise cli.UsageError(f"--video: {run.env} is a multi-agent environment; videos are "
                         "recorded for single-agent runs only")
  print(f"actorq: {run.agent} on {run.env}, checkpoint {path} (actor step "
        f"{state.get('actor_steps', '?')}, learner step {state['learner_steps']})", flush=True)
  start = time.time()
  try:
    precision, episodes = multi_agent_eval.evaluate_checkpoint(
        builder, run.env, state, precision, args.episodes, args.seed,
        args.max_episode_steps or loop_lib.DEFAULT_MAX_EPISODE_STEPS)
  except core.EnvironmentFailure as e:
    raise core.EnvironmentFailure(f"{run.env}: {e}") from e
  elapsed = time.time() - start
  r = np.asarray([e.episode_return for e in episodes])
  n = np.asarray([e.episode_length for e in episodes])
  print(f"{args.episodes} greedy episodes at {precision}")
  print(f"team return: mean {r.mean():.2f}, std {r.std():.2f}, min {r.min():.2f}, "
        f"max {r.max():.2f}")
  for agent in episodes[0].agent_returns:
    a = np.asarray([e.agent_returns[agent] for e in episodes])
    print(f"return of {agent}: mean {a.mean():.2f}, std {a.std():.2f}")
  print(f"episode length: mean {n.mean():.1f}, min {n.min()}, max {n.max()} steps"
        + (f" (capped at {args.max_episode_steps})" if args.max_episode_steps else ""))
  print(f"({int(n.sum())} environment steps in {elapsed:.1f} s)")
  return 0
