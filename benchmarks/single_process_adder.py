"""Single-process DQN (defaults, gym:CartPole-v1) with the one-env adder of before
(acme's `NStepTransitionAdder` behind `ValidatingAdder`) against the current one
(`adders.SingleEnvAdder`), side by side: each run a child process pinned to its own core
with one thread for numpy/XLA, the cores swapped between rounds. Both runs of a round must
end with the same learner-parameter checksum (the adders write the same items).

    .venv/bin/python benchmarks/single_process_adder.py --steps 20000 --rounds 2

Prints actor steps/s per run (wall clock, evaluation included: 10 greedy episodes every
5,000 steps) and the ratio new / old per round and its median.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import warnings
from typing import List

from actorq.agents.dqn import builder as dqn_builder
from actorq.agents.dqn import config as dqn_config
from actorq.benchmarks import peer_sb3
from actorq.components.replay import adders, reverb_replay as replay
from actorq.launch import experiment, local

ADDERS = ("acme", "single_env")


class AcmeAdderDQNBuilder(dqn_builder.DQNBuilder):
  """DQN's builder with the adder single-process runs used before `SingleEnvAdder`."""

  def make_adder(self, replay_client, environment_spec, policy=None):
    del policy
    c = self.config
    return replay.ValidatingAdder(adders.NStepTransitionAdder(
        replay_client, n_step=c.n_step, discount=c.discount,
        priority_fns={c.replay_table_name: None}), environment_spec)


def run_child(adder: str, steps: int, seed: int) -> dict:
  """One training run in this process; returns its figures as a dict."""
  warnings.simplefilter("ignore")
  cls = AcmeAdderDQNBuilder if adder == "acme" else dqn_builder.DQNBuilder
  config = experiment.ExperimentConfig(cls(dqn_config.DQNConfig()), "gym:CartPole-v1", steps,
                                       seed=seed, eval_every=5_000, eval_episodes=10,
                                       checkpoint_every=None)
  r = local.run(config)
  return {"adder": adder, "actor_steps": r.actor_steps, "learner_steps": r.learner_steps,
          "wall_seconds": r.wall_seconds, "steps_per_s": r.actor_steps / r.wall_seconds,
          "final_return": r.final_eval_return, "checksum": r.params_checksum}


def main(argv: List[str] = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--steps", type=int, default=20_000)
  parser.add_argument("--rounds", type=int, default=2)
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--cores", default="0,1", help="two cores to pin the two runs to")
  parser.add_argument("--json", default=None, help="write the rows here")
  parser.add_argument("--child", choices=ADDERS, help=argparse.SUPPRESS)
  args = parser.parse_args(argv)
  if args.child:
    print(json.dumps(run_child(args.child, args.steps, args.seed)))
    return 0
  cores = args.cores.split(",")
  env = dict(os.environ, **peer_sb3.ONE_THREAD_ENV)
  rows, ratios = [], []
  for k in range(args.rounds):
    procs = {}
    for i, adder in enumerate(ADDERS):
      core = cores[(i + k) % 2]
      procs[adder] = (core, subprocess.Popen(
          ["taskset", "-c", core, sys.executable, "-m", "actorq.benchmarks.single_process_adder",
           "--child", adder, "--steps", str(args.steps), "--seed", str(args.seed)],
          stdout=subprocess.PIPE, text=True, env=env))
    got = {}
    for adder, (core, proc) in procs.items():
      out, _ = proc.communicate()
      if proc.returncode != 0:
        print(f"round {k + 1}: the {adder} run exited {proc.returncode}", file=sys.stderr)
        return 1
      got[adder] = dict(json.loads(out.strip().splitlines()[-1]), core=int(core), round=k + 1)
      rows.append(got[adder])
      print(f"round {k + 1}: {adder:10s} core {core}: {got[adder]['steps_per_s']:.1f} actor "
            f"steps/s, checksum {got[adder]['checksum']}", flush=True)
    if got["acme"]["checksum"] != got["single_env"]["checksum"]:
      print(f"round {k + 1}: the checksums differ", file=sys.stderr)
      return 1
    ratios.append(got["single_env"]["steps_per_s"] / got["acme"]["steps_per_s"])
    print(f"round {k + 1}: single_env / acme = {ratios[-1]:.2f}x")
  print(f"median single_env / acme over {len(ratios)} rounds: {statistics.median(ratios):.2f}x "
        f"(same checksum in every round)")
  if args.json:
    with open(args.json, "w", encoding="utf-8") as f:
      json.dump({"rows": rows, "ratios": ratios, "steps": args.steps, "seed": args.seed}, f,
                indent=1)
  return 0


if __name__ == "__main__":
  sys.exit(main())
