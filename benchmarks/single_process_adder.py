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

import sys
import warnings

from actorq.agents.dqn import builder as dqn_builder
from actorq.agents.dqn import config as dqn_config
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


if __name__ == "__main__":
  from actorq.cli.benchmarks import single_process_adder as command_line  # its flags: cli/
  sys.exit(command_line.main())
