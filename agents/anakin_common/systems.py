"""Anakin systems (Hessel et al. 2021, "Podracer architectures for scalable Reinforcement
Learning", sec. 3: acting, replay and learning of one agent in one jitted program):
each agent's OWN networks, losses and pure update functions driven by an in-graph
acting loop, as functions of one seed that the launcher vmaps over seeds.

    system = make_system(builder, env)                   # builder: the agent's, env: JAX
    carry = system.init(jax.random.PRNGKey(seed))        # everything the run holds
    carry = system.train(carry, target_actor_steps)      # acts and learns, in-graph
    returns, lengths = system.evaluate(carry, key)       # greedy episodes

The table `SYSTEMS` maps a builder class to its system: a new agent whose learner step
is a pure function is one class and one entry. What reuses what:

  * `OnPolicySystem` (PPO; A2C shares its builder's contract): the builder's
    `learning_lib.make_update(networks, builder.make_optimizer(), config)`, i.e. the pure
    learner step `OnPolicyLearner` jits, on rollouts `[B, T + 1]` in Acme's step layout
    (terminal steps included, `onpolicy_common.learning`), B = the config's batch_size
    environments per seed, T = rollout_length: one learner step per B rollouts, as the
    local launch's `learner_steps_owed`.
  * `DQNSystem`: `DQNPopulation.member_step` (the population learner's pure DQN update:
    double-Q n-step TD, Huber, importance weights, decayed learning rate, target copies)
    on n-step transitions read from the in-graph `ring_buffer` (uniform or prioritized
    as the config says); samples_per_insert sets the learner steps per actor step, as
    the local launch's `learner_steps_owed` does.

The actors act with the learner's newest parameters (no `variable_update_period` lag:
in one program the pull is free) at fp32 or emulated int8 (`acting.PolicyNetwork`).
"""
from __future__ import annotations

import fractions
from typing import Any, Callable, Dict, NamedTuple, Tuple

import jax
import jax.numpy as jnp
import numpy as np
from acme import specs
from acme.adders.reverb import base as adders_base

from actorq import core
from actorq.agents.dqn import population
from actorq.agents.onpolicy_common import learning as onpolicy_learning
from actorq.components import networks as networks_lib
from actorq.components.anakin import acting
from actorq.components.anakin import layers as anakin_layers
from actorq.components.replay import ring_buffer as rb


def environment_spec(env) -> specs.EnvironmentSpec:
  """acme's spec of a `FunctionalEnvironment` (what the builders make networks from)."""
  return specs.EnvironmentSpec(
      observations=env.observation_spec(), actions=env.action_spec(),
      rewards=specs.Array((), np.float32, "reward"),
      discounts=specs.BoundedArray((), np.float32, 0.0, 1.0, "discount"))


def _actor_precisions(config) -> Tuple[str, str]:
  acting.check_precision(config.actor_precision)
  evaluation = getattr(config, "evaluation_precision", None) or config.actor_precision
  acting.check_precision(evaluation, "evaluation_precision")
  return config.actor_precision, evaluation


def _zeros_like_shape(tree):
  return jax.tree_util.tree_map(lambda s: jnp.zeros(s.shape, s.dtype), tree)


# ---------------------------------------------------------------------------------
# On-policy: PPO (the builder's pure `make_update`).
# ---------------------------------------------------------------------------------


class OnPolicyCarry(NamedTuple):
  learner: Any  # onpolicy_common.TrainingState
  env_state: Any  # [E, ...]
  observation: jnp.ndarray  # [E, ...]
  start: jnp.ndarray  # bool [E]: the observation starts an episode
  pending: jnp.ndarray  # bool [E]: the observation ended an episode (terminal step next)
  previous: Any  # the rollout's first step: the last step of the previous rollout, [E]
  key: jax.Array
  actor_steps: jnp.ndarray  # int32: environment steps taken (terminal steps not counted)
  episodes: acting.Episodes
  calibration: acting.Calibration
  metrics: Dict[str, jnp.ndarray]  # the newest learner step's


class OnPolicySystem:
  """An on-policy builder's agent (`onpolicy_common.OnPolicyBuilder`) compiled."""

  def __init__(self, builder, env):
    self.builder, self.env, self.config = builder, env, builder.config
    self.environment_spec = environment_spec(env)
    self.networks = builder.make_networks(self.environment_spec)
    if not self.networks.head.discrete:
      raise core.UsageError("--launch anakin runs on-policy agents on discrete actions only")
    self.num_envs = int(self.config.batch_size)
    self.rollout_length = int(self.config.rollout_length)
    self.optimizer = builder.make_optimizer()
    self.update = builder.learning_lib.make_update(self.networks, self.optimizer, self.config)
    precision, evaluation = _actor_precisions(self.config)
    self.policy = acting.PolicyNetwork(self.networks.spec, precision)
    self.eval_policy = acting.PolicyNetwork(self.networks.spec, evaluation)
    self._state_cls = onpolicy_learning.TrainingState
    self._step_cls = adders_base.Step
    self.env_steps_per_iteration = self.num_envs * self.rollout_length

  # -- one seed ---------------------------------------------------------------------------
  def _act(self, prepared, env_state, obs, start, pending, key):
    """One step of every environment in Acme's step layout: `(carry parts, record,
    counted [E], reward [E], last [E])`."""
    e, a = self.num_envs, self.networks.head.action_size
    k_act, k_step, k_reset = jax.random.split(key, 3)
    logits = self.policy.apply(prepared, obs)
    log_p = jax.nn.log_softmax(logits)
    action = jnp.argmax(log_p + jax.random.gumbel(k_act, log_p.shape), axis=-1)
    action = action.astype(jnp.int32)
    chosen = jnp.take_along_axis(log_p, action[:, None], axis=-1)[:, 0]
    state2, obs2, reward, discount, last = jax.vmap(self.env.step)(
        jax.random.split(k_step, e), env_state, action)
    state0, obs0 = jax.vmap(self.env.reset)(jax.random.split(k_reset, e))
    live = ~pending  # False: this step is the terminal step of an ended episode
    record = self._step_cls(
        observation=obs,
        action=jnp.where(live, action, 0),
        reward=jnp.where(live, reward, 0.0),
        discount=jnp.where(live, discount, 0.0),
        start_of_episode=start & live,
        extras={"logits": jnp.where(live[:, None], logits, 0.0).reshape(e, a),
                "log_prob": jnp.where(live, chosen, 0.0)})
    env_state = acting.tree_where(live, state2, state0)
    obs = jnp.where(live.reshape((-1,) + (1,) * (obs.ndim - 1)), obs2, obs0)
    return (env_state, obs, ~live, live & last), record, live, reward, last

  def init(self, key: jax.Array) -> OnPolicyCarry:
    k_learner, k_env, k_first, k_run = jax.random.split(key, 4)
    k_init, k_learn = jax.random.split(k_learner)
    dummy = jnp.zeros(self.environment_spec.observations.shape, jnp.float32)
    params = self.networks.init(k_init, dummy)
    learner = self._state_cls(params, self.optimizer.init(params), k_learn,
                              jnp.zeros((), jnp.int32))
    env_state, obs = jax.vmap(self.env.reset)(jax.random.split(k_env, self.num_envs))
    calibration = acting.empty_calibration(self.environment_spec.observations.shape)
    prepared = self.policy.prepare(params["policy"], calibration)
    start = jnp.ones((self.num_envs,), bool)
    pending = jnp.zeros((self.num_envs,), bool)
    (env_state, obs, start, pending), first, live, reward, last = self._act(
        prepared, env_state, obs, start, pending, k_first)
    episodes = acting.record_steps(acting.new_episodes(self.num_envs), reward, last, live)
    traj = jax.tree_util.tree_map(lambda x: jnp.stack([x, x], axis=1), first)
    metrics = _zeros_like_shape(jax.eval_shape(self.update, learner, traj)[1])
    return OnPolicyCarry(learner, env_state, obs, start, pending, first, k_run,
                         jnp.sum(live).astype(jnp.int32), episodes, calibration, metrics)

  def _iteration(self, carry: OnPolicyCarry) -> OnPolicyCarry:
    """T steps of every environment, then one learner step on the B rollouts."""
    key, k_steps = jax.random.split(carry.key)
    prepared = self.policy.prepare(carry.learner.params["policy"], carry.calibration)

    def step(c, k):
      env_state, obs, start, pending, episodes, steps = c
      (env_state, obs, start, pending), record, live, reward, last = self._act(
          prepared, env_state, obs, start, pending, k)
      episodes = acting.record_steps(episodes, reward, last, live)
      return (env_state, obs, start, pending, episodes,
              steps + jnp.sum(live).astype(jnp.int32)), record

    (env_state, obs, start, pending, episodes, steps), records = jax.lax.scan(
        step, (carry.env_state, carry.observation, carry.start, carry.pending,
               carry.episodes, carry.actor_steps),
        jax.random.split(k_steps, self.rollout_length))
    # [T, E] -> rollouts [E, T + 1], the previous rollout's last step first.
    traj = jax.tree_util.tree_map(
        lambda p, r: jnp.concatenate([p[:, None], jnp.swapaxes(r, 0, 1)], axis=1),
        carry.previous, records)
    learner, metrics = self.update(carry.learner, traj)
    calibration = acting.calibrate(traj.observation, self.environment_spec.observations.shape)
    previous = jax.tree_util.tree_map(lambda x: x[-1], records)
    return OnPolicyCarry(learner, env_state, obs, start, pending, previous, key, steps,
                         episodes, calibration, metrics)

  def train(self, carry: OnPolicyCarry, target_actor_steps, actor_steps=None
            ) -> OnPolicyCarry:
    """Learner iterations until `actor_steps >= target_actor_steps` (the seed's own count:
    terminal steps are not counted, so seeds drift apart; the `actor_steps` argument of
    `DQNSystem.train` is not used)."""
    del actor_steps
    return jax.lax.while_loop(lambda c: c.actor_steps < target_actor_steps,
                              self._iteration, carry)

  def evaluate(self, carry: OnPolicyCarry, key: jax.Array, num_episodes: int):
    prepared = self.eval_policy.prepare(carry.learner.params["policy"], carry.calibration)
    return acting.evaluate(
        self.env, lambda obs: jnp.argmax(self.eval_policy.apply(prepared, obs), -1).astype(
            jnp.int32), key, num_episodes)

  @staticmethod
  def policy_params(carry: OnPolicyCarry):
    return carry.learner.params["policy"]

  @staticmethod
  def learner_steps(carry: OnPolicyCarry):
    return carry.learner.steps


# ---------------------------------------------------------------------------------
# DQN: `DQNPopulation.member_step` on an in-graph replay.
# ---------------------------------------------------------------------------------


class DQNCarry(NamedTuple):
  learner: Any  # dqn.learning.TrainingState
  hyper: Any  # MemberHyperparameters (float32 scalars)
  buffer: rb.RingBuffer
  env_state: Any
  observation: jnp.ndarray
  key: jax.Array
  actor_steps: jnp.ndarray
  episodes: acting.Episodes
  calibration: acting.Calibration
  metrics: Dict[str, jnp.ndarray]


class DQNSystem:
  """DQN (`agents.dqn`) compiled. E = `num_envs` environments per seed (default 1, the
  local launch's single actor)."""

  def __init__(self, builder, env, num_envs: int = 1):
    self.builder, self.env, self.config = builder, env, builder.config
    c = self.config
    self.environment_spec = environment_spec(env)
    self.networks = builder.make_networks(self.environment_spec)
    self.population = population.DQNPopulation(c, self.networks, self.environment_spec)
    self.num_envs = int(num_envs)
    precision, evaluation = _actor_precisions(c)
    self.policy = acting.PolicyNetwork(self.networks.spec, precision)
    self.eval_policy = acting.PolicyNetwork(self.networks.spec, evaluation)
    # Q-values from the network's outputs: dueling-combined, or the outputs themselves
    # (`PolicyOutputs.to_values` None).
    to_values = builder.policy_outputs(self.networks, self.environment_spec).to_values
    self._to_values = to_values if to_values is not None else (lambda outputs: outputs)
    # Learner steps per acting iteration: E * samples_per_insert / batch_size, as a ratio
    # of small integers (one cycle = `act_iterations` steps of E envs, `learn_steps` updates).
    ratio = fractions.Fraction(self.num_envs * c.samples_per_insert / c.batch_size
                               ).limit_denominator(64)
    if ratio <= 0:
      raise core.UsageError("samples_per_insert * num_envs / batch_size must be > 0")
    self.act_iterations, self.learn_steps = ratio.denominator, ratio.numerator
    self.env_steps_per_iteration = self.act_iterations * self.num_envs
    self.capacity = max(1, -(-int(c.max_replay_size) // self.num_envs))
    self.lookahead = int(c.n_step) - 1
    self.min_replay_size = int(builder.min_replay_size())
    self._storage = jnp.dtype(getattr(env, "storage_dtype", "float32"))

  def _q(self, network: acting.PolicyNetwork, prepared, obs):
    return self._to_values(network.apply(prepared, obs))

  def init(self, key: jax.Array) -> DQNCarry:
    k_learner, k_env, k_run = jax.random.split(key, 3)
    learner = jax.tree_util.tree_map(lambda x: x[0], self.population.init(k_learner[None]))
    hyper = jax.tree_util.tree_map(lambda x: x[0], self.population.hyperparameters(1))
    env_state, obs = jax.vmap(self.env.reset)(jax.random.split(k_env, self.num_envs))
    shape = self.environment_spec.observations.shape
    item = {"observation": jnp.zeros(shape, self._storage), "action": jnp.zeros((), jnp.int32),
            "reward": jnp.zeros((), jnp.float32), "discount": jnp.zeros((), jnp.float32),
            "next_observation": jnp.zeros(shape, self._storage), "last": jnp.zeros((), bool)}
    buffer = rb.init(item, self.capacity, self.num_envs)
    calibration = acting.empty_calibration(shape)
    carry = DQNCarry(learner, hyper, buffer, env_state, obs, k_run, jnp.zeros((), jnp.int32),
                     acting.new_episodes(self.num_envs), calibration, {})
    metrics = jax.eval_shape(lambda c: self._learn(c, jax.random.PRNGKey(0))[1], carry)
    return carry._replace(metrics=_zeros_like_shape(metrics))

  def _epsilon(self, hyper, actor_steps):
    c = self.config
    frac = (jnp.minimum(actor_steps.astype(jnp.float32) / c.epsilon_decay_steps, 1.0)
            if c.epsilon_decay_steps > 0 else jnp.float32(1.0))
    return hyper.epsilon_start + frac * (hyper.epsilon_end - hyper.epsilon_start)

  def _act(self, carry: DQNCarry, prepared, key) -> DQNCarry:
    e = self.num_envs
    k_explore, k_random, k_step, k_reset = jax.random.split(key, 4)
    q = self._q(self.policy, prepared, carry.observation)
    epsilon = self._epsilon(carry.hyper, carry.actor_steps)
    explore = jax.random.uniform(k_explore, (e,)) < epsilon
    random_action = jax.random.randint(k_random, (e,), 0, q.shape[-1])
    action = jnp.where(explore, random_action, jnp.argmax(q, -1)).astype(jnp.int32)
    state2, obs2, reward, discount, last = jax.vmap(self.env.step)(
        jax.random.split(k_step, e), carry.env_state, action)
    state0, obs0 = jax.vmap(self.env.reset)(jax.random.split(k_reset, e))
    buffer = rb.add(carry.buffer, {
        "observation": carry.observation, "action": action, "reward": reward,
        "discount": discount, "next_observation": obs2, "last": last}, self.lookahead)
    env_state = acting.tree_where(last, state0, state2)
    obs = jnp.where(last.reshape((-1,) + (1,) * (obs2.ndim - 1)), obs0, obs2)
    return carry._replace(buffer=buffer, env_state=env_state, observation=obs,
                          actor_steps=carry.actor_steps + e,
                          episodes=acting.record_steps(carry.episodes, reward, last))

  def _learn(self, carry: DQNCarry, key) -> Tuple[DQNCarry, Dict[str, jnp.ndarray]]:
    """One learner step on a batch of the buffer (`train` calls it once the buffer holds
    min_replay_size steps, so no select of the learner state between its old and new
    value is compiled in: `member_step`'s `active` is a constant True)."""
    c = self.config
    buffer = carry.buffer
    if c.prioritized_replay:
      rows, envs, prob = rb.sample_prioritized(buffer, key, c.batch_size)
    else:
      rows, envs, prob = rb.sample_uniform(buffer, key, c.batch_size, self.lookahead)
    transitions = rb.nstep_transitions(buffer, rows, envs, c.n_step, carry.hyper.discount)
    transitions = transitions._replace(
        observation=transitions.observation.astype(jnp.float32),
        next_observation=transitions.next_observation.astype(jnp.float32))
    table_size = jnp.full(prob.shape, rb.size(buffer), jnp.float32)
    # The agent's update, its network's layers computed as `anakin_layers` computes them
    # (same values up to float32 rounding; every product in oneDNN under the seeds' vmap).
    with networks_lib.layer_arithmetic(anakin_layers.pre_activation):
      learner, td, metrics = self.population.member_step(
          carry.learner, transitions, prob, table_size, carry.hyper, True)
    if c.prioritized_replay:
      buffer = rb.set_priorities(buffer, rows, envs, jnp.abs(td) + c.priority_epsilon,
                                 c.priority_exponent)
    calibration = acting.calibrate(transitions.observation,
                                   self.environment_spec.observations.shape)
    return carry._replace(learner=learner, buffer=buffer, calibration=calibration), metrics

  def _iteration(self, carry: DQNCarry, learn: bool = True) -> DQNCarry:
    """`act_iterations` acting steps of the E environments, then (`learn`) `learn_steps`
    learner steps."""
    key, k_act, k_learn = jax.random.split(carry.key, 3)
    prepared = self.policy.prepare(carry.learner.params, carry.calibration)
    carry = jax.lax.fori_loop(
        0, self.act_iterations,
        lambda i, c: self._act(c, prepared, jax.random.fold_in(k_act, i)), carry)
    if not learn:
      return carry._replace(key=key)

    def learn(c, k):
      c, metrics = self._learn(c, k)
      return c, metrics

    carry, metrics = jax.lax.scan(learn, carry, jax.random.split(k_learn, self.learn_steps))
    return carry._replace(key=key, metrics=jax.tree_util.tree_map(lambda m: m[-1], metrics))

  def iterations(self, actor_steps, target_actor_steps):
    """int32: the iterations that take `actor_steps` to at least `target_actor_steps`
    (`env_steps_per_iteration` each; 0 when there already)."""
    per = self.env_steps_per_iteration
    return jnp.maximum(target_actor_steps - actor_steps + per - 1, 0) // per

  def train(self, carry: DQNCarry, target_actor_steps, actor_steps) -> DQNCarry:
    """Iterations until `carry.actor_steps >= target_actor_steps`.

    `actor_steps` (int32 scalar) is the seeds' actor steps now, passed unbatched: DQN's
    seeds count E steps per act, so they step in lockstep and it is every seed's. The
    loop's trip count then is the same for every seed, and its predicate stays unbatched
    under `jax.vmap`. With a per-seed predicate (a `while_loop` on `carry.actor_steps`)
    vmap selects every carried array between its old and new value after each
    iteration, which copies the whole replay buffer (30 seeds x 100k steps) twice per
    iteration: that made the 30-seed sweep slower than 30 local runs (issue 54).

    Learning starts with the first iteration after which the buffer holds
    `min_replay_size` steps (its size is the actor steps, capped at the capacity, which
    is >= min_replay_size): iterations before it act only, as the local launch's learner
    waits for Reverb's rate limiter; that count is the same for every seed, too.
    """
    total = self.iterations(actor_steps, target_actor_steps)
    acting_only = jnp.minimum(jnp.maximum(
        self.iterations(actor_steps, max(self.min_replay_size, 1)) - 1, 0), total)
    carry = jax.lax.fori_loop(0, acting_only, lambda i, c: self._iteration(c, learn=False),
                              carry)
    return jax.lax.fori_loop(acting_only, total, lambda i, c: self._iteration(c), carry)

  def evaluate(self, carry: DQNCarry, key: jax.Array, num_episodes: int):
    prepared = self.eval_policy.prepare(carry.learner.params, carry.calibration)
    return acting.evaluate(
        self.env, lambda obs: jnp.argmax(self._q(self.eval_policy, prepared, obs), -1).astype(
            jnp.int32), key, num_episodes)

  @staticmethod
  def policy_params(carry: DQNCarry):
    return carry.learner.params

  @staticmethod
  def learner_steps(carry: DQNCarry):
    return carry.learner.steps


# The table: builder class name (module:qualname) -> system factory(builder, env, num_envs).
SYSTEMS: Dict[str, Callable[..., Any]] = {
    "actorq.agents.ppo.builder:PPOBuilder": lambda b, env, n: OnPolicySystem(b, env),
    "actorq.agents.dqn.builder:DQNBuilder": lambda b, env, n: DQNSystem(b, env, n),
}


def builder_key(builder) -> str:
  cls = type(builder)
  return f"{cls.__module__}:{cls.__qualname__}"


def make_system(builder, env, num_envs: int = 1):
  """The compiled system of `builder`'s agent on the JAX environment `env`.

  Raises:
    core.UsageError: an agent without a compiled system, a precision the compiled actors
      do not run, or num_envs that the agent fixes otherwise (on-policy: batch_size).
  """
  key = builder_key(builder)
  if key not in SYSTEMS:
    names = sorted(k.split(":")[1].replace("Builder", "").lower() for k in SYSTEMS)
    raise core.UsageError(f"agent {type(builder).__name__} does not run compiled yet "
                          f"(--launch anakin); allowed: {', '.join(names)}")
  system = SYSTEMS[key](builder, env, num_envs)
  if num_envs not in (1, system.num_envs):
    raise core.UsageError(
        f"--num-envs {num_envs}: this agent's compiled run steps its config's batch_size = "
        f"{system.num_envs} environments per seed; set --set batch_size={num_envs} instead")
  return system
