"""A trained run's final policy evaluated at fp32 and at the precision its actors trained
with: the 2x2 of (actors during training) x (precision at evaluation) that tells a
training effect (what int8 actors did to the parameters the learner ended with:
evaluate them at fp32) from a deployment effect (what int8 inference of those parameters
loses: evaluate them at int8), issue 53.

    python -m actorq.studies.cross_eval RUN_DIR [--episodes 20] [--seed 12345]

writes RUN_DIR/final_eval.json:

    {"actor_precision": "int8", "checkpoint": ..., "learner_steps": ..., "actor_steps": ...,
     "episodes": 20, "seed": 12345,
     "returns": {"fp32": [..20..], "int8": [..20..]}, "mean": {"fp32": ..., "int8": ...}}

Both precisions run the same greedy episodes (environment seed `seed`, the same for
every run and precision), as `actorq eval --precision P --episodes N --seed S` does
(an integer payload's biases corrected on fp32 episodes of `reward_parity.CALIBRATION_SEED`,
as a training run's actors execute it). A float actor precision (fp32) is evaluated once.
"""
from __future__ import annotations

import json
import os
import sys
from typing import Any, Dict, Sequence

import numpy as np

from actorq import core
from actorq.components import atomic
from actorq.components.acting import loop as loop_lib
from actorq.components.envs import environments
from actorq.launch import spec as spec_lib
from actorq.studies import reward_parity

FINAL_EVAL_JSON = "final_eval.json"
EPISODES = 20
SEED = 12345


def evaluate(run_path: str, precisions: Sequence[str], episodes: int = EPISODES,
             seed: int = SEED) -> Dict[str, Any]:
  """The newest checkpoint of `run_path` evaluated greedily at each of `precisions`
  (`episodes` episodes from environment seed `seed` each); the dict of the module
  docstring.

  Raises:
    core.UsageError: not a run directory or no readable checkpoint (`spec.load_run`).
  """
  run, state, path = spec_lib.load_run(run_path)
  builder = run.make_builder()
  env_fn = lambda s: environments.make_environment(run.env, seed=s)
  env = env_fn(seed)
  env_spec = environments.environment_spec(env)
  env.close()
  networks = builder.make_networks(env_spec)
  policy = builder.make_policy(networks, env_spec, evaluation=True)
  params = state["policy_params"]
  returns = {}
  for precision in dict.fromkeys(precisions):
    calibration = reward_parity.calibration_for(params, networks.spec, policy.selector, env_fn,
                                                precision)
    actor = reward_parity.fixed_policy_actor(params, networks.spec, precision,
                                             policy.selector, seed=seed,
                                             calibration=calibration)
    env = env_fn(seed)
    try:
      finished = loop_lib.ActorLoop(env, actor, learn=False).run(num_episodes=episodes)
    finally:
      env.close()
    returns[precision] = [float(e.episode_return) for e in finished]
  return {"actor_precision": run.config.get("actor_precision"), "checkpoint": path,
          "learner_steps": int(state["learner_steps"]),
          "actor_steps": int(state.get("actor_steps", -1)), "episodes": int(episodes),
          "seed": int(seed), "returns": returns,
          "mean": {p: float(np.mean(r)) for p, r in returns.items()}}


def precisions_for(actor_precision: str) -> list:
  """fp32 and the run's own actor precision (fp32 alone for an fp32 run)."""
  return list(dict.fromkeys([core.FP32, actor_precision]))


def write(run_path: str, result: Dict[str, Any]) -> str:
  path = os.path.join(run_path, FINAL_EVAL_JSON)
  atomic.write_json(path, result)
  return path


def read(run_path: str):
  """RUN_DIR/final_eval.json, or None without one."""
  path = os.path.join(run_path, FINAL_EVAL_JSON)
  if not os.path.isfile(path):
    return None
  with open(path, encoding="utf-8") as f:
    return json.load(f)


if __name__ == "__main__":  # its flags live in cli/
  from actorq.cli.studies import cross_eval as command_line
  sys.exit(command_line.main())
