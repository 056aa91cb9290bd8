"""QDagger's learner: DQN's n-step double-Q TD loss (reused from `agents/dqn/learning.py`)
plus the distillation term of Agarwal et al. 2022 (sec. 4.1, eq. 2), an offline phase on
the teacher's replay, and the distillation weight from the student's measured return."""
from __future__ import annotations

from typing import Any, Callable, Iterator, NamedTuple, Optional

import chex
import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np
import optax
from acme import types
from acme.utils import counting, loggers

from actorq.agents.dqn import learning as dqn_learning
from actorq.components import learners


def distillation_loss(q_student: jnp.ndarray, q_teacher: jnp.ndarray,
                      temperature: float = 1.0) -> jnp.ndarray:
  """Mean cross-entropy from the teacher's softmax policy to the student's (QDagger's
  distillation loss; Agarwal et al. 2022, eq. 2; Rusu et al. 2016's policy distillation):

      L = mean_b sum_a -softmax(q_teacher[b] / tau)_a * log_softmax(q_student[b] / tau)_a

  The teacher side is a constant (no gradient flows into it).

  Args:
    q_student: float32 [B, A] the student's Q-values.
    q_teacher: float32 [B, A] the teacher's Q-values at the same observations.
    temperature: tau > 0.

  Returns:
    float32 scalar.

  Raises:
    AssertionError (chex): ranks other than 2, or different shapes.
  """
  chex.assert_rank([q_student, q_teacher], 2)
  chex.assert_equal_shape([q_student, q_teacher])
  teacher_probs = jax.nn.softmax(jax.lax.stop_gradient(q_teacher) / temperature, axis=-1)
  log_student = jax.nn.log_softmax(q_student / temperature, axis=-1)
  return jnp.mean(-jnp.sum(teacher_probs * log_student, axis=-1))


def distillation_coefficient(student_return: float, teacher_return: float) -> float:
  """QDagger's distillation weight max(1 - student_return / teacher_return, 0) (Agarwal et
  al. 2022, sec. 4.1; CleanRL's qdagger_dqn): 1 for a student at 0, 0 once it matches
  the teacher. `teacher_return` > 0.

  Raises:
    ValueError: `teacher_return` <= 0.
  """
  if not teacher_return > 0:
    raise ValueError(f"teacher_return must be > 0, got {teacher_return}")
  return float(max(1.0 - float(student_return) / float(teacher_return), 0.0))


class QDaggerLearner(learners.JaxLearner):
  """The student's learner. Its training state is DQN's (`dqn_learning.TrainingState`:
  params, target_params, opt_state, steps), so checkpoints, warm starts and the actors'
  policy pulls treat it as a DQN learner's.

  Each step minimises TD(student) + c * `distillation_loss`(student, teacher) on a replay
  batch (importance-weighted TD and priority updates with prioritized replay, as
  `DQNLearner`). The first `step()` first runs the offline phase: `offline_steps` updates
  of the same loss on batches of `teacher_iterator` (the teacher's replay; uniform
  weights, no priority writes), after which the step count is 0 again (so the builder's
  samples-per-insert accounting is unchanged). c starts at 1 and is
  `distillation_coefficient(evaluate(params), teacher_return)` after the offline phase
  and every `coefficient_every` learner steps; once 0 it stays 0 (distillation is over).

  Args:
    network: the student's Q-network; `teacher_network`, `teacher_params`: the teacher's.
    evaluate: `evaluate(params) -> float` the student's mean greedy return.
    Others as `DQNLearner`.
  """

  def __init__(self, network: hk.Transformed, teacher_network: hk.Transformed,
               teacher_params: hk.Params, iterator: Iterator[Any],
               teacher_iterator: Optional[Iterator[Any]], random_key: jax.Array,
               dummy_observation: np.ndarray, optimizer: optax.GradientTransformation,
               discount: float, target_update_period: int, *, huber_delta: float = 1.0,
               double_q: bool = True, temperature: float = 1.0, offline_steps: int = 0,
               teacher_return: float = 1.0, evaluate: Callable[[Any], float],
               coefficient_every: int = 1_000, logger: Optional[loggers.Logger] = None,
               counter: Optional[counting.Counter] = None,
               td_operator: dqn_learning.TDOperator = dqn_learning.Q_LEARNING,
               prioritized: Optional[dqn_learning.PrioritizedReplay] = None):
    self._iterator, self._teacher_iterator = iterator, teacher_iterator
    self._prioritized = prioritized
    self._init_bookkeeping(counter, logger)
    self._offline_steps, self._offline_done = int(offline_steps), False
    self._teacher_return, self._evaluate = float(teacher_return), evaluate
    self._coefficient_every = int(coefficient_every)
    self.coefficient, self.student_return = 1.0, float("nan")
    period = int(target_update_period)
    teacher_params = jax.device_put(teacher_params)

    def loss_fn(params, target_params, transitions: types.Transition, weights, coefficient):
      td_loss, td = dqn_learning.weighted_transition_loss(
          network, params, target_params, transitions, weights, discount, huber_delta,
          double_q, td_operator)
      distill = distillation_loss(network.apply(params, transitions.observation),
                                  teacher_network.apply(teacher_params, transitions.observation),
                                  temperature)
      return td_loss + coefficient * distill, (td, td_loss, distill)

    def sgd_step(state: dqn_learning.TrainingState, transitions, weights, coefficient):
      (loss, (td, td_loss, distill)), grads = jax.value_and_grad(loss_fn, has_aux=True)(
          state.params, state.target_params, transitions, weights, coefficient)
      updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
      params = optax.apply_updates(state.params, updates)
      steps = state.steps + 1
      target_params = jax.lax.cond(steps % period == 0, lambda: params,
                                   lambda: state.target_params)
      return dqn_learning.TrainingState(params, target_params, opt_state, steps), td, {
          "loss": loss, "td_loss": td_loss, "distillation_loss": distill,
          "distillation_coefficient": coefficient, "gradient_norm": optax.global_norm(grads)}

    self._sgd_step = learners.jit_with_packed_metrics(sgd_step)
    params = network.init(random_key, np.asarray(dummy_observation)[None])
    self._state = dqn_learning.TrainingState(params, params, optimizer.init(params),
                                             jnp.zeros((), jnp.int32))

  def _update_coefficient(self) -> None:
    if self.coefficient > 0.0:
      self.student_return = float(self._evaluate(self._state.params))
      self.coefficient = distillation_coefficient(self.student_return, self._teacher_return)

  def _offline_phase(self) -> None:
    for _ in range(self._offline_steps):
      sample = next(self._teacher_iterator)
      ones = np.ones(np.shape(sample.data.reward)[:1], np.float32)
      state, _, metrics = self._sgd_step(self._state, sample.data, ones,
                                         np.float32(self.coefficient))
      self._check_finite(metrics, " (offline phase)")
      self._state = state
    if self._offline_steps:
      self._state = self._state._replace(steps=jnp.zeros((), jnp.int32))
    self._offline_done = True
    self._update_coefficient()

  def step(self) -> None:
    if not self._offline_done:
      self._offline_phase()
    elif self.step_count % self._coefficient_every == 0:
      self._update_coefficient()
    sample = next(self._iterator)
    coefficient = np.float32(self.coefficient)
    pr = self._prioritized
    if pr is None:
      ones = np.ones(np.shape(sample.data.reward)[:1], np.float32)
      state, _, metrics = self._sgd_step(self._state, sample.data, ones, coefficient)
      self._commit(state, metrics)
      return
    beta = dqn_learning.annealed_exponent(pr.importance_sampling_exponent, pr.annealing_steps,
                                          self.step_count)
    weights = dqn_learning.importance_sampling_weights(
        np.asarray(sample.info.probability, np.float32),
        np.asarray(sample.info.table_size, np.float32), beta)
    state, td, metrics = self._sgd_step(self._state, sample.data, np.asarray(weights),
                                        coefficient)
    priorities = np.abs(np.asarray(td, np.float64)) + pr.priority_epsilon
    self._commit_with_priorities(state, metrics, pr.client, pr.table, sample.info.key,
                                 priorities)
