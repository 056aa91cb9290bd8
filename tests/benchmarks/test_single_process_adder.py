"""benchmarks/single_process_adder.py: its "before" builder is the one-env adder of
before (acme's behind ValidatingAdder), its "now" builder SingleEnvAdder."""
from acme import specs

from actorq.agents.dqn import config as dqn_config
from actorq.benchmarks import single_process_adder as spa
from actorq.components.replay import adders, local_replay, reverb_replay as replay
from actorq.testing import fakes


def test_the_two_builders_make_the_two_adders():
  spec = specs.make_environment_spec(fakes.ScriptedEnvironment(episode_length=3))
  client = local_replay.LocalReplayClient(
      [replay.transition_table("priority_table", spec, max_size=10, min_size=1)], seed=0)
  config = dqn_config.DQNConfig()
  before = spa.AcmeAdderDQNBuilder(config).make_adder(client, spec)
  now = spa.dqn_builder.DQNBuilder(config).make_adder(client, spec)
  assert isinstance(before, replay.ValidatingAdder)
  assert isinstance(now, adders.SingleEnvAdder)
