"""docs/guides/compose-an-agent.md's example runs single-process and as a Launchpad program."""
import dataclasses
import importlib.util
import os
import sys

import pytest
import numpy as np

from actorq import core
from actorq.launch import distributed, local
from actorq.testing import runs

_PATH = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "expected_sarsa.py")
_spec = importlib.util.spec_from_file_location("expected_sarsa", _PATH)
example = importlib.util.module_from_spec(_spec)
sys.modules["expected_sarsa"] = example  # dataclasses look their module up
_spec.loader.exec_module(example)


def test_expected_sarsa_target_matches_hand_computation():
  """E_pi[Q] under epsilon-greedy: eps=0.1, A=2, q_t=[1, 3] -> 0.95*3 + 0.05*1 = 2.9."""
  import jax.numpy as jnp
  import rlax
  probs = jnp.array([0.05, 0.95])
  td = rlax.expected_sarsa(jnp.array([0.0, 0.0]), 0, 1.0, 0.5, jnp.array([1.0, 3.0]), probs)
  np.testing.assert_allclose(td, 1.0 + 0.5 * 2.9, rtol=1e-6)


def test_the_example_is_a_builder_by_the_contract():
  assert isinstance(example.ExpectedSarsaBuilder(), core.Builder)


@pytest.mark.slow
def test_single_process_learns():
  config = dataclasses.replace(example.make_experiment(15_000), eval_every=3_000)
  result = local.run(config)
  # One learner step per 64 / 16 = 4 actor steps once 500 transitions are in replay.
  assert abs(result.learner_steps - (15_000 - 500) // 4) <= 2
  # Random policy: ~22. Deterministic: 41.2, 106.0, 128.4, 130.8 and 140.4 at 3k..15k
  # steps (5 episodes; the project's 2-core machine); the threshold leaves room for float
  # differences on another CPU, and a second, shorter run must retrace the first.
  assert result.final_eval_return >= 100, result.evaluations
  runs.assert_prefix_reproduces(config, result)


@pytest.mark.isolated  # Launchpad nodes as threads of the test process: run in a child
@pytest.mark.slow
def test_distributed_program_runs_and_stops_cleanly():
  """The same ExperimentConfig (another replay size) as a Launchpad program."""
  config = dataclasses.replace(
      example.make_experiment(3_000),
      builder=example.ExpectedSarsaBuilder(example.Config(min_replay_size=200)),
      eval_every=10 ** 9)
  outcome = distributed.launch(distributed.make_program(config, num_actors=2), "local_mt",
                               echo=False)
  assert outcome.exit_code == 0, outcome
  assert outcome.counts.get("actor_steps", 0) >= 3_000
  assert outcome.counts.get("learner_steps", 0) > 0
