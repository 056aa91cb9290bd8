"""Checks that a single-process run is a function of its config (issue: "a seed means a run").

A learning test runs its config once and asserts the result; `assert_prefix_reproduces`
then runs the same config again for the first part of its steps and asserts that every
evaluation up to there is identical (returns, their std, episode lengths and the learner
steps behind them): training up to step k does not depend on the budget, so a second,
shorter run must retrace the first exactly. Half the cost of a full second run.
"""
from __future__ import annotations

import dataclasses

from actorq.launch import experiment, local

_COMPARED = ("actor_steps", "learner_steps", "policy_version", "episode_return",
             "episode_return_std", "episode_length")


def assert_prefix_reproduces(config: experiment.ExperimentConfig, result: local.RunResult,
                             fraction: float = 0.5) -> None:
  """Re-runs `config` up to the last periodic evaluation within `fraction` of its steps
  and asserts its evaluations equal `result`'s up to that step.

  Raises:
    AssertionError: naming the first evaluation that differs.
    ValueError: no periodic evaluation falls within `fraction` of the run.
  """
  steps = int(config.num_steps * fraction) // config.eval_every * config.eval_every
  if steps < config.eval_every:
    raise ValueError(f"no evaluation within {fraction} of {config.num_steps} steps "
                     f"(every {config.eval_every})")
  again = local.run(dataclasses.replace(config, num_steps=steps, logdir=None))
  first = [r for r in result.evaluations if r["actor_steps"] <= steps]
  assert len(first) == len(again.evaluations), (first, again.evaluations)
  for a, b in zip(first, again.evaluations):
    assert {k: a[k] for k in _COMPARED} == {k: b[k] for k in _COMPARED}, (a, b)
