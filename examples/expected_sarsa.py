"""Composing a new agent from actorq's components: n-step Expected SARSA.

Everything but the loss is reused:
  network    a `NetworkSpec` MLP -> Haiku for the learner, a policy runtime on actors
  builder    `components.builders.TransitionReplayBuilder` supplies the Reverb transition
             table and dataset (`components.replay`), the n-step adder
             (`components.adders`) and a `FeedForwardActor` with a `VariableClient`
  actor      an epsilon-greedy selector (`components.actors`)
  variables  the launch layer wraps the learner in a `PolicyPublisher`; actors pull
             payloads at any precision (fp32, or the int8 runtime)
  learner    the only new piece: Expected SARSA (van Seijen et al. 2009) on n-step
             transitions, `rlax.expected_sarsa`, target = r_t + discount_t * E_pi[Q(s_t, .)]
             under the epsilon-greedy behaviour policy.

Run it single-process and as a Launchpad program (threads) with:

    .venv/bin/python examples/expected_sarsa.py --steps 20000
"""
from __future__ import annotations

import argparse
import dataclasses
from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np
import optax
import rlax
from acme import core
from acme.utils import counting

from actorq.components import actors, builders, networks
from actorq.quantization import network_spec as ns


@dataclasses.dataclass
class Config:
  hidden_sizes: tuple = (64, 64)
  learning_rate: float = 1e-3
  discount: float = 0.99
  n_step: int = 3
  batch_size: int = 64
  min_replay_size: int = 500
  max_replay_size: int = 50_000
  samples_per_insert: float = 16.0   # sampled per inserted transition
  epsilon: float = 0.1               # behaviour = target policy (on-policy expectation)
  target_update_period: int = 200    # learner steps
  variable_update_period: int = 10   # actor steps
  actor_precision: str = "fp32"
  replay_table_name: str = "priority_table"


class ExpectedSarsaLearner(core.Learner):
  """Serves `get_variables(["policy", "version"])` like every actorq learner."""

  def __init__(self, spec, dataset, key, config: Config, counter=None):
    self._counter = counter or counting.Counter()
    net = networks.haiku_network(spec)
    opt = optax.adam(config.learning_rate)
    num_actions = spec.output_size

    def probs(q):  # epsilon-greedy probabilities, [B, A]
      greedy = jax.nn.one_hot(jnp.argmax(q, -1), num_actions)
      return (1 - config.epsilon) * greedy + config.epsilon / num_actions

    def loss(params, target, t):
      q_tm1 = net.apply(params, t.observation)
      q_t = net.apply(target, t.next_observation)
      td = jax.vmap(rlax.expected_sarsa)(q_tm1, t.action.astype(jnp.int32), t.reward,
                                         config.discount * t.discount, q_t, probs(q_t))
      return jnp.mean(rlax.l2_loss(td))

    @jax.jit
    def update(params, target, opt_state, steps, t):
      grads = jax.grad(loss)(params, target, t)
      updates, opt_state = opt.update(grads, opt_state)
      params = optax.apply_updates(params, updates)
      target = jax.lax.cond((steps + 1) % config.target_update_period == 0,
                            lambda: params, lambda: target)
      return params, target, opt_state

    self._update, self._dataset = update, dataset
    self._params = networks.init_params(spec, key)
    self._target, self._opt_state, self.step_count = self._params, opt.init(self._params), 0

  def step(self):
    t = next(self._dataset).data
    self._params, self._target, self._opt_state = self._update(
        self._params, self._target, self._opt_state, self.step_count, t)
    self.step_count += 1
    self._counter.increment(steps=1)  # "learner_steps" in the run's counter

  def get_variables(self, names):
    return [{"policy": self._params, "version": self.step_count}[n] for n in names]

  def save(self):
    return jax.device_get((self._params, self._target, self._opt_state, self.step_count))

  def restore(self, state):
    self._params, self._target, self._opt_state, self.step_count = state


@dataclasses.dataclass
class Networks:
  spec: ns.NetworkSpec  # the launch layers publish the policy named by `networks.spec`


@dataclasses.dataclass
class Policy:
  spec: ns.NetworkSpec
  precision: str
  selector: actors.Selector


class ExpectedSarsaBuilder(builders.TransitionReplayBuilder):
  """The replay table, dataset, n-step adder and actor come from the shared
  `TransitionReplayBuilder`; an agent adds its networks, policies and learner."""

  def __init__(self, config: Optional[Config] = None):
    super().__init__(config or Config())

  def make_networks(self, env_spec):
    return Networks(ns.mlp(env_spec.observations.shape[0], self.config.hidden_sizes,
                           env_spec.actions.num_values))

  def make_policy(self, nets, env_spec, evaluation=False):
    eps = 0.0 if evaluation else self.config.epsilon
    return Policy(nets.spec, self.config.actor_precision, actors.epsilon_greedy(lambda step: eps))

  def make_learner(self, key, nets, dataset, logger_fn, env_spec, replay_client=None,
                   counter=None):
    return ExpectedSarsaLearner(nets.spec, dataset, key, self.config, counter)


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--steps", type=int, default=20_000)
  parser.add_argument("--actor-precision", default="fp32", choices=("fp32", "int8"))
  args = parser.parse_args()
  from actorq.launch import distributed, local
  builder = ExpectedSarsaBuilder(Config(actor_precision=args.actor_precision))
  result = local.run(builder, "gym:CartPole-v1", args.steps, seed=0, eval_every=args.steps,
                     eval_episodes=5)
  print(f"single-process: {result.learner_steps} learner steps, "
        f"greedy return {result.final_eval_return:.1f}")
  program = distributed.make_program(builder, distributed.DistributedConfig(
      env_id="gym:CartPole-v1", num_actors=2, num_steps=args.steps, eval_every=10 ** 9))
  outcome = distributed.launch(program, "local_mt", echo=False)
  print(f"distributed (local_mt, 2 actors): exit {outcome.exit_code} ({outcome.reason}), "
        f"counts {outcome.counts}")


if __name__ == "__main__":
  main()
