"""actorq's single-process DQN against Stable-Baselines3's DQN on CartPole-v1, side by side
on one pinned core: actor steps per second (evaluation time excluded) and the wall-clock
seconds to the first greedy evaluation >= 475.

    .venv/bin/python benchmarks/peer_sb3.py --sb3-python /path/to/py311/bin/python \\
        --seeds 0 1 2 --steps 50000 --core 1 --out docs/results/peer_sb3

SB3 (with PyTorch) is not part of actorq's stack (Python 3.10, TF 2.8): give the Python of
an environment where `import stable_baselines3` works (e.g. `python3.11 -m venv V &&
V/bin/pip install torch==2.13.0 stable-baselines3==2.9.2`). Each (framework, seed) run is a
child process pinned with `taskset -c CORE` (one thread for numpy/XLA/torch), runs
interleaved seed by seed.

The settings are actorq's DQN defaults mapped onto SB3's arguments: the 2x256 ReLU
Q-network, Adam at actorq's learning rate, batch 64, replay 100k, learning from 1,000
transitions, 0.5 gradient steps per actor step (SB3: train_freq 2, gradient_steps 1),
the target copied every 1,000 actor steps (actorq: every 500 learner steps), epsilon
1 -> 0.01 over 20k steps, Huber loss, gradient norm clipped at 10, discount 0.99. What
differs is each library's algorithm: actorq's default is double DQN with 3-step returns,
prioritized replay, a dueling head and a decaying learning rate; SB3's DQN is single-step,
uniform and not double. Greedy evaluation: 10 episodes every 5,000 steps, on a separate
environment.
"""
from __future__ import annotations

import statistics
import sys
import textwrap
import time
from typing import Any, Dict, List

from actorq.components import atomic
from actorq.agents.dqn import builder as dqn_builder
from actorq.agents.dqn import config as dqn_config
from actorq.launch import experiment, local

EVAL_EVERY, EVAL_EPISODES, TARGET = 5_000, 10, 475.0
ONE_THREAD_ENV = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
                  "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false "
                               "intra_op_parallelism_threads=1",
                  "TF_CPP_MIN_LOG_LEVEL": "2", "JAX_PLATFORMS": "cpu"}

SB3_CHILD = textwrap.dedent('''
    import json, sys, time
    import gymnasium as gym, numpy as np, torch
    from stable_baselines3 import DQN
    from stable_baselines3.common.callbacks import BaseCallback
    torch.set_num_threads(1)
    seed, steps, every, episodes, out = (int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]),
                                         int(sys.argv[4]), sys.argv[5])
    eval_env = gym.make("CartPole-v1")

    class Eval(BaseCallback):
      def __init__(self):
        super().__init__()
        self.rows, self.eval_s, self.start = [], 0.0, time.perf_counter()
        self.eval_env_seeded = False
      def _on_step(self):
        if self.num_timesteps % every:
          return True
        t0 = time.perf_counter()
        returns = []
        for _ in range(episodes):
          obs, _ = eval_env.reset(seed=None if self.eval_env_seeded else seed + 10_000)
          self.eval_env_seeded, total, done = True, 0.0, False
          while not done:
            action, _ = self.model.predict(obs, deterministic=True)
            obs, r, term, trunc, _ = eval_env.step(action)
            total, done = total + r, term or trunc
          returns.append(total)
        self.eval_s += time.perf_counter() - t0
        self.rows.append({"actor_steps": self.num_timesteps,
                          "train_seconds": time.perf_counter() - self.start - self.eval_s,
                          "episode_return": float(np.mean(returns))})
        return True

    model = DQN("MlpPolicy", gym.make("CartPole-v1"), learning_rate=1e-3, buffer_size=100_000,
                learning_starts=1_000, batch_size=64, gamma=0.99, train_freq=2,
                gradient_steps=1, target_update_interval=1_000, exploration_fraction=20_000 / steps,
                exploration_initial_eps=1.0, exploration_final_eps=0.01, max_grad_norm=10,
                policy_kwargs=dict(net_arch=[256, 256]), seed=seed, device="cpu", verbose=0)
    callback = Eval()
    model.learn(total_timesteps=steps, callback=callback)
    json.dump({"rows": callback.rows,
               "train_seconds": time.perf_counter() - callback.start - callback.eval_s},
              open(out, "w"))
''')


def actorq_child(seed: int, steps: int, out: str) -> List[str]:
  return [sys.executable, "-m", "actorq.benchmarks.peer_sb3", "--child-actorq", str(seed),
          str(steps), out]


def run_actorq(seed: int, steps: int, out: str) -> None:
  """One actorq DQN run (defaults) with evaluation time taken out of training time."""
  start, rows = time.perf_counter(), []
  eval_s = {"s": 0.0, "t": None}

  def progress(c):
    now = time.perf_counter()
    if eval_s["t"] is not None and c["actor_steps"] % EVAL_EVERY == 0:
      eval_s["s"] += now - eval_s["t"]
    eval_s["t"] = now

  result = local.run(experiment.ExperimentConfig(
      dqn_builder.DQNBuilder(dqn_config.DQNConfig()), "gym:CartPole-v1", num_steps=steps,
      seed=seed, eval_every=EVAL_EVERY, eval_episodes=EVAL_EPISODES, checkpoint_every=None),
      progress=progress)
  for row in result.evaluations:
    rows.append({"actor_steps": row["actor_steps"], "episode_return": row["episode_return"]})
  atomic.write_json(out, {"rows": rows, "train_seconds": time.perf_counter() - start - eval_s["s"],
                          "wall_seconds": result.wall_seconds}, indent=None)


def summarize(results: Dict[str, List[Dict[str, Any]]]) -> Dict[str, Any]:
  """Per framework: the median actor steps/s, the first step at the target per seed and the
  median training seconds to it (inf where a run never reached it); then actorq/SB3 as the
  ratio of the two medians and paired by seed (`results[who][i]` of both frameworks is
  seed i's run; each ratio is `actorq sps / SB3 sps` of one seed) with their median.

  Raises:
    ValueError: the two frameworks' runs are not of the same seeds in the same order.
  """
  seeds = [[r["seed"] for r in results[who]] for who in ("actorq", "sb3")]
  if seeds[0] != seeds[1] or not seeds[0]:
    raise ValueError(f"actorq and SB3 runs must be of the same seeds, got {seeds}")
  summary: Dict[str, Any] = {}
  for who, runs in results.items():
    firsts = [r["first_step_at_target"] for r in runs]
    secs = [r["first_step_at_target"] / r["steps_per_second"] if r["first_step_at_target"]
            else float("inf") for r in runs]
    summary[who] = {"median_steps_per_second":
                    statistics.median(r["steps_per_second"] for r in runs),
                    "first_step_at_target": firsts,
                    "median_seconds_to_target": statistics.median(secs)}
  summary["ratio_of_medians"] = (summary["actorq"]["median_steps_per_second"] /
                                 summary["sb3"]["median_steps_per_second"])
  summary["paired_ratios"] = [a["steps_per_second"] / b["steps_per_second"]
                              for a, b in zip(results["actorq"], results["sb3"])]
  summary["median_paired_ratio"] = statistics.median(summary["paired_ratios"])
  return summary


if __name__ == "__main__":
  from actorq.cli.benchmarks import peer_sb3 as command_line  # its flags: cli/
  sys.exit(command_line.main())
