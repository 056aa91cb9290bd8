"""Population cost: wall-clock and CPU seconds of PBT populations against one agent at the
same actor steps per member, side by side in one process (issue 43; Flajolet et al. 2022
report a population of 8 at little more than one agent's cost once its updates are
vmapped).

Cases (agent on environment; default: DQN on gym:CartPole-v1 and TD3 on gym:Pendulum-v1,
the two agents with population support), each with these rows, each `--steps` actor
steps per member, `--min-replay-size` items before learning (and as many uniformly random
warm-up actions, for agents with `random_warmup_steps`, so that learning and the policy's
actions start together), one final evaluation of `--eval-episodes` episodes, no exploit
(ready once, at the end):
  * one agent, `local.run` (what `actorq train` runs), evaluation every `--steps`;
  * the population machinery (`agents.population.PopulationRun`) at N = 1 (one member, its learner and
    actor split measured the same way as the populations');
  * populations of each `--populations` size (`launch.pbt.run`, fp32 members).
Columns: wall seconds, process CPU seconds (all threads: `time.process_time`), their
ratios to the case's one agent, and for the machinery rows the split: acting (the batched
inference + action selection), environment (vector env + adders), learning, of which
replay (sampling, stacking, priorities) and update (the vmapped step), evaluation. All
cases run in one process and print as one table.

    python benchmarks/pbt_cost.py [--cases dqn:gym:CartPole-v1,td3:gym:Pendulum-v1]
                                  [--steps 1000] [--populations 8,16]
                                  [--min-replay-size 200] [--eval-episodes 1] [--seed 0]
                                  [--json FILE]
    python benchmarks/pbt_cost.py --agent dqn --env gym:CartPole-v1 ...   # one case
"""
from __future__ import annotations

import sys

import dataclasses
import os
import time
from typing import Any, Dict, List, Optional, Tuple

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from actorq.agents import population  # pylint: disable=g-import-not-at-top
from actorq.launch import experiment  # pylint: disable=g-import-not-at-top
from actorq.launch import local, pbt  # pylint: disable=g-import-not-at-top
from actorq.launch import spec as spec_lib  # pylint: disable=g-import-not-at-top

PARTS = ("act", "environment", "learn", "replay", "update", "evaluate")
DEFAULT_CASES = "dqn:gym:CartPole-v1,td3:gym:Pendulum-v1"


def _timed(fn):
  wall, cpu = time.time(), time.process_time()
  out = fn()
  return out, time.time() - wall, time.process_time() - cpu


def case_config(agent: str, min_replay_size: int) -> Dict[str, Any]:
  """The config fields every row of `agent`'s case sets: `min_replay_size`, and as many
  `random_warmup_steps` where the agent's config has that field (TD3: its default 1000
  would leave a short case no policy actions at all)."""
  config: Dict[str, Any] = {"min_replay_size": min_replay_size}
  fields = {f.name for f in dataclasses.fields(spec_lib.make_builder(agent, {}).config)}
  if "random_warmup_steps" in fields:
    config["random_warmup_steps"] = min_replay_size
  return config


def measure(agent: str, env_id: str, steps: int, populations: List[int], min_replay_size: int,
            eval_episodes: int, seed: int) -> List[Dict[str, Any]]:
  """The rows of the module docstring for one case, as dicts (case, name, members, wall_s,
  cpu_s, split)."""
  config = case_config(agent, min_replay_size)
  rows = []

  def one_agent():
    builder = spec_lib.make_builder(agent, config)
    return local.run(experiment.ExperimentConfig(
        builder=builder, env_id=env_id, num_steps=steps, seed=seed, eval_every=steps,
        eval_episodes=eval_episodes, checkpoint_every=None))

  _, wall, cpu = _timed(one_agent)
  rows.append({"name": "one agent (local.run)", "members": 1, "wall_s": wall, "cpu_s": cpu})

  def settings(n):
    return pbt.population_spec(agent, env_id, n, steps, steps, seed=seed,
                               eval_episodes=eval_episodes, config=config)

  def machinery_of_one():
    # `check` refuses N = 1 (PBT needs two members); the population's builder runs one.
    two = pbt.check(settings(2))
    one = population.PopulationBuilder(two.member, dataclasses.replace(two.config, size=1))
    run = population.PopulationRun(settings(1), one)
    run.run()
    return {**run.timings, **run.learner.timings}

  timings, wall, cpu = _timed(machinery_of_one)
  rows.append({"name": "population machinery, N = 1", "members": 1, "wall_s": wall,
               "cpu_s": cpu, **{f"{k}_s": timings[k] for k in PARTS}})
  for n in populations:
    result, wall, cpu = _timed(lambda n=n: pbt.run(settings(n)))
    rows.append({"name": f"population of {n}", "members": n, "wall_s": wall, "cpu_s": cpu,
                 **{f"{k}_s": result.timings[k] for k in PARTS}})
  base_wall, base_cpu = rows[0]["wall_s"], rows[0]["cpu_s"]
  for row in rows:
    row["wall_x"], row["cpu_x"] = row["wall_s"] / base_wall, row["cpu_s"] / base_cpu
    row["case"] = f"{agent} {env_id}"
  return rows


def table(rows: List[Dict[str, Any]]) -> str:
  lines = [f"{'case':22s} {'run':32s} {'wall s':>8s} {'x1':>6s} {'CPU s':>8s} {'x1':>6s}   "
           + " ".join(f"{p:>11s}" for p in PARTS)]
  for r in rows:
    split = " ".join(f"{r[p + '_s']:11.1f}" if p + "_s" in r else f"{'-':>11s}" for p in PARTS)
    lines.append(f"{r['case']:22s} {r['name']:32s} {r['wall_s']:8.1f} {r['wall_x']:6.2f} {r['cpu_s']:8.1f} "
                 f"{r['cpu_x']:6.2f}   {split}")
  return "\n".join(lines)


def cases_of(cases: str = DEFAULT_CASES, agent: Optional[str] = None,
             env: Optional[str] = None) -> List[Tuple[str, str]]:
  """(agent, env id) pairs to measure: `agent`/`env` (one case, defaults dqn and
  gym:CartPole-v1) when either is given, else `cases` (comma-separated agent:env)."""
  if agent is not None or env is not None:
    return [(agent or "dqn", env or "gym:CartPole-v1")]
  return [tuple(case.split(":", 1)) for case in cases.split(",")]


if __name__ == "__main__":
  from actorq.cli.benchmarks import pbt_cost as command_line  # its flags: cli/
  sys.exit(command_line.main())
