"""Composing a new agent from actorq's components: n-step Expected SARSA.

Everything but the loss is reused:
  network    a `NetworkSpec` MLP -> Haiku for the learner, a policy runtime on actors
  builder    `components.builders.TransitionReplayBuilder` supplies the Reverb transition
             table and dataset (`components.replay`), the n-step adder
             (`components.adders`) and a `FeedForwardActor` with a `VariableClient`
  actor      an epsilon-greedy selector (`components.actors`)
  variables  the launch layer wraps the learner in a `PolicyServer`; actors pull
             payloads at their runtime's precision (fp32, or the int8 runtime)
  learner    the only new piece: Expected SARSA (van Seijen et al. 2009) on n-step
             transitions, `rlax.expected_sarsa`, target = r_t + discount_t * E_pi[Q(s_t, .)]
             under the epsilon-greedy behaviour policy.

One `ExperimentConfig` runs it single-process and as a Launchpad program (threads); the
launch layer needs nothing from this file but the builder. Run both with:

    .venv/bin/python examples/expected_sarsa.py --steps 20000
"""
from __future__ import annotations

import dataclasses
from typing import Optional, Tuple

import jax
import jax.numpy as jnp
import optax
import rlax
from acme import core as acme_core
from acme.utils import counting

from actorq import core
from actorq.cli import main as cli
from actorq.components import builders, networks
from actorq.components import config_checks as checks
from actorq.components.acting import actors
from actorq.launch import distributed, experiment, local
from actorq.quantization import network_spec as ns


@dataclasses.dataclass
class Config:
  """Every field is checked at construction (`actorq.components.config_checks`)."""
  hidden_sizes: Tuple[int, ...] = checks.field((64, 64), ge=1)
  learning_rate: float = checks.field(1e-3, gt=0.0)
  discount: float = checks.field(0.99, ge=0.0, le=1.0)
  n_step: int = checks.field(3, ge=1)
  batch_size: int = checks.field(64, ge=1)
  min_replay_size: int = checks.field(500, ge=1)
  max_replay_size: int = checks.field(50_000, ge=1)
  # Sampled per inserted transition.
  samples_per_insert: float = checks.field(16.0, gt=0.0)
  # Behaviour = target policy (on-policy expectation).
  epsilon: float = checks.field(0.1, ge=0.0, le=1.0)
  target_update_period: int = checks.field(200, ge=1)    # learner steps
  variable_update_period: int = checks.field(10, ge=1)   # actor steps
  actor_precision: str = checks.field("fp32", choices=core.ACTOR_PRECISIONS)
  replay_table_name: str = checks.field("priority_table", nonempty=True)

  RULES = (checks.Rule("need min_replay_size <= max_replay_size",
                       lambda c: c.min_replay_size <= c.max_replay_size),)

  def __post_init__(self):
    checks.validate(self)


class ExpectedSarsaLearner(acme_core.Learner):
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
    return core.ActorPolicy(nets.spec, self.config.actor_precision,
                            actors.epsilon_greedy(lambda step: eps), evaluation)

  def make_learner(self, key, nets, dataset, logger_fn, env_spec, replay_client=None,
                   counter=None):
    return ExpectedSarsaLearner(nets.spec, dataset, key, self.config, counter)


def make_experiment(steps: int, actor_precision: str = "fp32") -> experiment.ExperimentConfig:
  """The experiment both launchers run: the builder, the environment and the budget."""
  return experiment.ExperimentConfig(
      builder=ExpectedSarsaBuilder(Config(actor_precision=actor_precision)),
      env_id="gym:CartPole-v1", num_steps=steps, seed=0, eval_every=steps, eval_episodes=5)


def main():
  parser = cli.Parser(description=__doc__.splitlines()[0])  # actorq's one-line errors
  parser.add_argument("--steps", type=int, default=20_000)
  parser.add_argument("--actor-precision", default="fp32", choices=("fp32", "int8"))
  args = parser.parse_args()
  config = make_experiment(args.steps, args.actor_precision)
  result = local.run(config)
  print(f"single-process: {result.learner_steps} learner steps, "
        f"greedy return {result.final_eval_return:.1f}")
  outcome = distributed.launch(distributed.make_program(config, num_actors=2), "local_mt",
                               echo=False)
  print(f"distributed (local_mt, 2 actors): exit {outcome.exit_code} ({outcome.reason}), "
        f"counts {outcome.counts}")


if __name__ == "__main__":
  main()
