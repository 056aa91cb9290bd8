"""Builders declare what their policy outputs mean (`core.PolicyOutputs`); export's action
rule and the quantization study's semantics follow the declaration, not agent names, and
give the built-in agents what the name-based code gave."""
import numpy as np
import pytest

from actorq import core
from actorq.agents.dqn import networks as dqn_networks
from actorq.studies import export as export_lib
from actorq.components.acting import actors
from actorq.components.envs import environments
from actorq.agents import registry
from actorq.quantization import fidelity as qf
from actorq.studies import quantize as quantize_study

CARTPOLE, PENDULUM = "gym:CartPole-v1", "gym:Pendulum-v1"


def _declared(agent, env_id, **overrides):
  config_cls, builder_cls = registry.get(agent)
  builder = builder_cls(config_cls(**overrides))
  env = environments.make_environment(env_id, seed=0)
  spec = environments.environment_spec(env)
  env.close()
  networks = builder.make_networks(spec)
  return builder, networks, spec, registry.policy_outputs(builder, networks, spec)


@pytest.mark.parametrize("agent,env_id,overrides,kind", [
    ("dqn", CARTPOLE, {}, "q_values"),
    ("r2d2", CARTPOLE, {}, "q_values"),
    ("ppo", CARTPOLE, {}, "logits"),
    ("a2c", CARTPOLE, {}, "logits"),
    ("impala", CARTPOLE, {}, "logits"),
    ("ppo", PENDULUM, {}, "tanh_gaussian"),
    ("sac", PENDULUM, {}, "tanh_gaussian"),
    ("ddpg", PENDULUM, {}, "tanh_deterministic"),
    ("d4pg", PENDULUM, {}, "tanh_deterministic"),
    ("td3", PENDULUM, {}, "tanh_deterministic"),
])
def test_every_built_in_builder_declares_its_outputs(agent, env_id, overrides, kind):
  _, networks, _, outputs = _declared(agent, env_id, **overrides)
  assert isinstance(outputs, core.PolicyOutputs) and outputs.kind == kind and outputs.description
  if agent in ("dqn", "r2d2"):  # dueling heads by default: [V, A_1, A_2] -> Q
    assert outputs.to_values is dqn_networks.dueling_q
    np.testing.assert_allclose(outputs.values(np.array([[1.0, 2.0, 4.0]])), [[0.0, 2.0]])
  else:
    assert outputs.to_values is None


def test_dqn_without_dueling_declares_plain_q_values():
  _, _, _, outputs = _declared("dqn", CARTPOLE, dueling=False)
  assert (outputs.kind, outputs.to_values, outputs.description) == ("q_values", None, "argmax(y)")


@pytest.mark.parametrize("agent,env_id,overrides,expected", [
    ("dqn", CARTPOLE, {}, {"kind": "argmax", "dueling": True,
                           "rule": "argmax(y[1:]) (y = [V, A_1..A_n]; argmax Q = argmax A)"}),
    ("dqn", CARTPOLE, {"dueling": False}, {"kind": "argmax", "dueling": False,
                                           "rule": "argmax(y)"}),
    ("ddpg", PENDULUM, {}, {"kind": "bounded", "minimum": [-2.0], "maximum": [2.0],
                            "rule": "clip(minimum + (y + 1) / 2 * (maximum - minimum), "
                                    "minimum, maximum)"}),
    ("d4pg", PENDULUM, {}, {"kind": "bounded", "minimum": [-2.0], "maximum": [2.0],
                            "rule": "clip(minimum + (y + 1) / 2 * (maximum - minimum), "
                                    "minimum, maximum)"}),
    # TD3 acts with the same deterministic_bounded selector: its rule is now written out.
    ("td3", PENDULUM, {}, {"kind": "bounded", "minimum": [-2.0], "maximum": [2.0],
                           "rule": "clip(minimum + (y + 1) / 2 * (maximum - minimum), "
                                   "minimum, maximum)"}),
    ("ppo", CARTPOLE, {}, {"kind": "agent",
                           "rule": "the ppo agent's evaluation selector over y: argmax(y)"}),
])
def test_export_action_rule_follows_the_declaration(agent, env_id, overrides, expected):
  _, _, spec, outputs = _declared(agent, env_id, **overrides)
  assert export_lib.action_rule({"agent": agent}, outputs, spec) == expected


def test_quantize_semantics_follow_the_declaration():
  """Same semantics the name-and-network guess gave: DQN Q-values through the dueling
  combination at the temperature, on-policy logits at T = 1, DDPG continuous with the
  action range."""
  for agent, env_id, kind, transform, temperature in (
      ("dqn", CARTPOLE, "q_values", dqn_networks.dueling_q, 2.5),
      ("ppo", CARTPOLE, "logits", None, 1.0),
      ("ddpg", PENDULUM, "continuous", None, 1.0)):
    builder, networks, spec, _ = _declared(agent, env_id)
    selector = builder.make_policy(networks, spec, evaluation=True).selector
    sem = quantize_study.output_semantics(builder, networks, spec, selector, 2.5)
    assert (sem.kind, sem.transform, sem.temperature) == (kind, transform, temperature)
    if kind == "continuous":
      np.testing.assert_array_equal(sem.action_range, [4.0])


def test_a_builder_without_a_declaration_is_one_line():
  class Undeclared:
    pass

  with pytest.raises(ValueError, match=r"Undeclared does not declare what its policy's "
                                       r"outputs mean; allowed: a builder method "
                                       r"policy_outputs\(networks, environment_spec\)"):
    registry.policy_outputs(Undeclared(), None, None)
  bad = type("Bad", (), {"policy_outputs": lambda self, n, s: "q_values"})()
  with pytest.raises(ValueError, match="Bad.policy_outputs returned str; allowed: "
                                       "actorq.core.PolicyOutputs"):
    registry.policy_outputs(bad, None, None)


def test_declared_semantics_map_every_kind():
  env = environments.make_environment(PENDULUM, seed=0)
  spec = environments.environment_spec(env)
  env.close()
  for kind in core.POLICY_OUTPUT_KINDS:
    sem = qf.OutputSemantics.declared(core.PolicyOutputs(kind), actors.greedy, spec.actions)
    assert sem.kind == qf.DECLARED_KINDS[kind]
