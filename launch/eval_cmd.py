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
from typing import Any, List, Optional

import numpy as np

from actorq.launch import cli

PRECISIONS = ("fp32", "fp16", "bf16", "int8")
VIDEO_SUFFIXES = (".gif", ".mp4")
MAX_VIDEO_FRAMES = 5_000


def add_parser(subparsers):
  p = subparsers.add_parser("eval", help="evaluate a run's newest checkpoint (greedy)")
  p.add_argument("--checkpoint", required=True,
                 help="run directory of 'actorq train' (or its checkpoints/ folder)")
  p.add_argument("--episodes", type=cli.positive_int("--episodes"), default=10)
  p.add_argument("--precision", choices=PRECISIONS, default=None,
                 help="precision the policy runs at (default: the run's evaluation precision)")
  p.add_argument("--seed", type=cli.nonnegative_int("--seed"), default=12345,
                 help="evaluation environment seed")
  p.add_argument("--max-episode-steps", type=cli.positive_int("--max-episode-steps"),
                 default=None, help="end an episode after this many steps (default: the "
                 "environment's own limit)")
  p.add_argument("--video", default=None, metavar="FILE",
                 help="record the first episode to FILE.gif (Pillow) or FILE.mp4 (imageio); "
                      "skipped with a message where the machine cannot render offscreen")
  p.add_argument("--fps", type=cli.positive_int("--fps"), default=30, help="video frame rate")
  return p


def _env_kwargs(env_id: str, video: bool) -> dict:
  if video and env_id.startswith(("gym:", "atari:")):
    return {"render_mode": "rgb_array"}
  return {}


def run_episodes(env, actor, episodes: int, max_steps: Optional[int] = None,
                 frames: Optional[List[np.ndarray]] = None, video_error: Optional[list] = None):
  """Greedy episodes. Returns (returns, lengths) lists; fills `frames` with the first
  episode's RGB frames (uint8 [H, W, 3]) until rendering fails (message appended to
  `video_error`)."""
  returns, lengths = [], []

  def grab():
    if frames is None or (video_error and video_error[0]) or len(frames) >= MAX_VIDEO_FRAMES:
      return
    try:
      frame = env.render()
    except Exception as e:  # no offscreen GL backend, no display, ...
      video_error.append(f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
      return
    if frame is None:
      video_error.append("the environment returned no frame (no rgb_array render mode)")
      return
    frames.append(np.asarray(frame, dtype=np.uint8))

  for episode in range(episodes):
    timestep = env.reset()
    recording = episode == 0
    if recording:
      grab()
    total, length = 0.0, 0
    while not timestep.last() and (max_steps is None or length < max_steps):
      timestep = env.step(actor.select_action(timestep.observation))
      total += float(timestep.reward)
      length += 1
      if recording:
        grab()
    returns.append(total)
    lengths.append(length)
  return returns, lengths


def write_video(path: str, frames: List[np.ndarray], fps: int) -> Optional[str]:
  """Writes frames to a GIF (Pillow) or MP4 (imageio). Returns None, or why it could not."""
  if not frames:
    return "no frames were rendered"
  if path.lower().endswith(".gif"):
    from PIL import Image
    images = [Image.fromarray(f) for f in frames]
    images[0].save(path, save_all=True, append_images=images[1:],
                   duration=max(int(1000 / fps), 20), loop=0)
    return None
  try:
    import imageio
  except ImportError:
    return "writing .mp4 needs imageio (and imageio-ffmpeg), which is not installed; use a .gif path"
  try:
    imageio.mimsave(path, frames, fps=fps)
  except Exception as e:  # e.g. no ffmpeg backend
    return f"imageio could not write {path}: {e}"
  return None


def run(args) -> int:
  if args.video is not None and not args.video.lower().endswith(VIDEO_SUFFIXES):
    raise cli.UsageError(f"--video {args.video} must end in .gif or .mp4")
  if args.video is not None:
    directory = os.path.dirname(os.path.abspath(args.video))
    if not os.path.isdir(directory):
      raise cli.UsageError(f"--video {args.video}: directory {directory} does not exist")
  from actorq.components import environments, evaluation
  from actorq.launch import run_dir
  info, state, path = run_dir.load(args.checkpoint)
  if args.video is not None and info["env"].startswith("dmc:"):
    # MuJoCo's headless GL backend (EGL); set MUJOCO_GL yourself to choose another.
    os.environ.setdefault("MUJOCO_GL", "egl")
  builder = run_dir.make_builder(info)
  env = environments.make_environment(info["env"], seed=args.seed,
                                      **_env_kwargs(info["env"], args.video is not None))
  env_spec = environments.environment_spec(env)
  networks = builder.make_networks(env_spec)
  policy = builder.make_policy(networks, env_spec, evaluation=True)
  precision = args.precision or policy.precision
  actor = evaluation.fixed_policy_actor(state["policy_params"], networks.spec, precision,
                                        policy.selector, seed=args.seed)
  print(f"actorq: {info['agent']} on {info['env']}, checkpoint {path} (actor step "
        f"{state.get('actor_steps', '?')}, learner step {state['learner_steps']}); "
        f"{args.episodes} greedy episodes at {precision}", flush=True)
  frames: Optional[List[Any]] = [] if args.video else None
  video_error: List[str] = []
  start = time.time()
  returns, lengths = run_episodes(env, actor, args.episodes, args.max_episode_steps,
                                  frames, video_error)
  elapsed = time.time() - start
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
    why = video_error[0] if video_error else write_video(args.video, frames, args.fps)
    if why is None:
      print(f"video: {args.video} ({len(frames)} frames of the first episode)")
    else:
      print(f"video skipped: cannot record {info['env']} here: {why}")
  return 0
