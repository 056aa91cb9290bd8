"""`benchmarks/pbt_cost.py`'s cases (issue 43): by default DQN on CartPole and TD3 on
Pendulum in one invocation; `--agent`/`--env` pick one case; TD3's warm-up ends where its
learning starts."""
from actorq.benchmarks import pbt_cost


def test_cases_default_to_dqn_cartpole_and_td3_pendulum_side_by_side():
  assert pbt_cost.cases_of() == [("dqn", "gym:CartPole-v1"), ("td3", "gym:Pendulum-v1")]
  assert pbt_cost.cases_of(agent="td3", env="gym:Pendulum-v1") == [
      ("td3", "gym:Pendulum-v1")]
  assert pbt_cost.cases_of(env="gym:Acrobot-v1") == [("dqn", "gym:Acrobot-v1")]
  assert pbt_cost.cases_of(cases="td3:dmc:cartpole-swingup") == [
      ("td3", "dmc:cartpole-swingup")]


def test_case_config_sets_the_warmup_only_where_the_agent_has_one():
  assert pbt_cost.case_config("dqn", 200) == {"min_replay_size": 200}
  assert pbt_cost.case_config("td3", 200) == {"min_replay_size": 200,
                                              "random_warmup_steps": 200}
