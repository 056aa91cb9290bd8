"""The evaluation precision is resolved in one place (issue 52): `ActorSettings.
policy_precision`, which every builder's `make_policy` asks."""
import pytest

from actorq.components.envs import environments
from actorq.agents import registry


@pytest.mark.parametrize("agent,env_id", [("dqn", "gym:CartPole-v1"), ("ppo", "gym:CartPole-v1"),
                                          ("td3", "gym:Pendulum-v1"), ("sac", "gym:Pendulum-v1")])
def test_builders_act_at_the_resolved_precision(agent, env_id):
  config_cls, builder_cls = registry.get(agent)
  env = environments.make_environment(env_id, seed=0)
  env_spec = environments.environment_spec(env)
  env.close()
  for evaluation_precision, want in ((None, "fp16"), ("int8", "int8")):
    config = config_cls(actor_precision="fp16", evaluation_precision=evaluation_precision)
    assert config.policy_precision(True) == want
    assert config.policy_precision(False) == "fp16"
    builder = builder_cls(config)
    networks = builder.make_networks(env_spec)
    assert builder.make_policy(networks, env_spec, evaluation=True).precision == want
    assert builder.make_policy(networks, env_spec, evaluation=False).precision == "fp16"
