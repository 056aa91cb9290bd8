"""Acting inside the compiled program: the actors' policy network at their precision,
episode bookkeeping and the greedy evaluation, as pure JAX functions of one seed (the
launcher vmaps them over seeds).

Precisions: "fp32" (the walk of `quantization.forward`, the reference semantics every
runtime reproduces, its layers computed by `components.anakin.layers`: the same values
up to float32 rounding, a convolution as im2col so that it stays fast under the seeds'
`jax.vmap`) and "int8" (`quantization.emulation`: the LiteRT dynamic-range int8
arithmetic emulated exactly in float32, with the payload's per-channel int8 weights made
in-graph and its biases corrected on the learner's newest sample, as the local launch's
`PolicyServer` does with `bias_correction.tap`). Other precisions run on the Python
launches only.
"""
from __future__ import annotations

from typing import Any, Callable, NamedTuple, Tuple

import jax
import jax.numpy as jnp

from actorq import core
from actorq.components.anakin import layers as anakin_layers
from actorq.quantization import bias_correction
from actorq.quantization import emulation
from actorq.quantization import forward as forward_lib
from actorq.quantization import network_spec as ns

PRECISIONS = ("fp32", "int8")
CALIBRATION_SIZE = bias_correction.DEFAULT_CALIBRATION_SIZE


def check_precision(precision: str, what: str = "actor_precision") -> str:
  """`precision` if the compiled actors run it.

  Raises:
    core.UsageError: another precision (one line naming the allowed ones).
  """
  if precision not in PRECISIONS:
    raise core.UsageError(
        f"{what} {precision!r} does not run compiled (--launch anakin); allowed: "
        f"{', '.join(PRECISIONS)} (int8 is the LiteRT arithmetic emulated in float32; "
        "other precisions run with --launch local)")
  return precision


class Calibration(NamedTuple):
  """The learner's newest sample's first `CALIBRATION_SIZE` observations (the int8
  payload's bias-correction set) and whether any sample was taken yet."""
  observations: jnp.ndarray  # float32 [CALIBRATION_SIZE, *input_shape]
  ready: jnp.ndarray  # bool scalar


def empty_calibration(input_shape) -> Calibration:
  return Calibration(jnp.zeros((CALIBRATION_SIZE,) + tuple(input_shape), jnp.float32),
                     jnp.zeros((), bool))


def calibrate(observations: jnp.ndarray, input_shape) -> Calibration:
  """The `Calibration` of a learner batch's observations (any leading axes), as
  `bias_correction.ObservationTap` keeps them: the first `CALIBRATION_SIZE` rows."""
  rows = observations.reshape((-1,) + tuple(input_shape)).astype(jnp.float32)
  n = rows.shape[0]
  if n < CALIBRATION_SIZE:  # static: fewer rows than the set, repeat them (same mean)
    rows = jnp.concatenate([rows] * (-(-CALIBRATION_SIZE // n)))
  return Calibration(rows[:CALIBRATION_SIZE], jnp.ones((), bool))


class PolicyNetwork:
  """The actors' policy network of `spec` at `precision`.

  `prepare(params, calibration)` makes what the actors run from the learner's float32
  params (int8: the payload arrays, biases corrected once a calibration is ready);
  `apply(prepared, observation [B, ...]) -> outputs [B, spec.output_size]` runs it.
  """

  def __init__(self, spec: ns.NetworkSpec, precision: str):
    self.spec = spec
    self.precision = check_precision(precision)

  def prepare(self, params: Any, calibration: Calibration) -> Any:
    if self.precision == "fp32":
      return params
    layers = emulation.quantize_params(params, self.spec)
    corrected = emulation.correct_biases(params, layers, self.spec, calibration.observations,
                                         anakin_layers.pre_activation)
    return jax.tree_util.tree_map(lambda c, u: jnp.where(calibration.ready, c, u),
                                  corrected, layers)

  def apply(self, prepared: Any, observation: jnp.ndarray) -> jnp.ndarray:
    if self.precision == "fp32":  # `forward_lib.forward`, its layers `anakin_layers`'
      return forward_lib.apply(
          self.spec.layers, forward_lib.scaled_input(self.spec, observation),
          lambda layer, x: anakin_layers.pre_activation(
              layer, x, prepared[layer.name]["w"], prepared[layer.name]["b"]))
    return emulation.forward(prepared, self.spec, observation,
                             linear=anakin_layers.pre_activation)


def tree_where(condition: jnp.ndarray, x: Any, y: Any) -> Any:
  """Leafwise `where(condition, x, y)`, `condition` [E] broadcast over trailing axes."""
  def pick(a, b):
    c = condition.reshape(condition.shape + (1,) * (a.ndim - condition.ndim))
    return jnp.where(c, a, b)
  return jax.tree_util.tree_map(pick, x, y)


class Episodes(NamedTuple):
  """Training-episode bookkeeping of E environments: the running episodes' returns and
  lengths [E], and since the last report: episodes ended, the sum of their returns and
  lengths (float32 scalars; the launcher reads and clears them)."""
  running_return: jnp.ndarray
  running_length: jnp.ndarray
  ended: jnp.ndarray
  return_sum: jnp.ndarray
  length_sum: jnp.ndarray
  total: jnp.ndarray  # int32: episodes ended in the run


def new_episodes(num_envs: int) -> Episodes:
  z = jnp.zeros((), jnp.float32)
  return Episodes(jnp.zeros((num_envs,), jnp.float32), jnp.zeros((num_envs,), jnp.float32),
                  z, z, z, jnp.zeros((), jnp.int32))


def record_steps(episodes: Episodes, reward: jnp.ndarray, last: jnp.ndarray,
                 counted: Any = True) -> Episodes:
  """`episodes` after one step of every environment (reward [E], last [E]); `counted`
  [E] or scalar: which environments really stepped (False: an acme terminal step)."""
  counted = jnp.broadcast_to(jnp.asarray(counted), reward.shape)
  ret = episodes.running_return + jnp.where(counted, reward, 0.0)
  length = episodes.running_length + counted.astype(jnp.float32)
  done = last & counted
  return Episodes(jnp.where(done, 0.0, ret), jnp.where(done, 0.0, length),
                  episodes.ended + jnp.sum(done), episodes.return_sum + jnp.sum(
                      jnp.where(done, ret, 0.0)),
                  episodes.length_sum + jnp.sum(jnp.where(done, length, 0.0)),
                  episodes.total + jnp.sum(done).astype(jnp.int32))


def clear_report(episodes: Episodes) -> Episodes:
  z = jnp.zeros((), jnp.float32)
  return episodes._replace(ended=z, return_sum=z, length_sum=z)


def evaluate(env, greedy_action: Callable[[jnp.ndarray], jnp.ndarray], key: jax.Array,
             num_episodes: int) -> Tuple[jnp.ndarray, jnp.ndarray]:
  """`num_episodes` greedy episodes run side by side until each ends (at most the
  environment's time limit), in one `lax.while_loop`.

  Args:
    env: a `gymnax_env.FunctionalEnvironment`.
    greedy_action: observations [N, ...] -> int32 actions [N].
    key: seeds the episodes' starts and the environment's randomness.

  Returns:
    float32 [N] undiscounted returns, float32 [N] lengths.
  """
  k_reset, k_run = jax.random.split(key)
  state, obs = jax.vmap(env.reset)(jax.random.split(k_reset, num_episodes))
  zeros = jnp.zeros((num_episodes,), jnp.float32)
  init = (state, obs, jnp.zeros((num_episodes,), bool), zeros, zeros, k_run,
          jnp.zeros((), jnp.int32))

  def cond(carry):
    done, t = carry[2], carry[6]
    return (~jnp.all(done)) & (t < env.max_episode_steps)

  def body(carry):
    state, obs, done, ret, length, key, t = carry
    key, k_step = jax.random.split(key)
    action = greedy_action(obs)
    state2, obs2, reward, _, last = jax.vmap(env.step)(
        jax.random.split(k_step, num_episodes), state, action)
    live = ~done
    ret = ret + jnp.where(live, reward, 0.0)
    length = length + live.astype(jnp.float32)
    state = tree_where(live, state2, state)
    obs = jnp.where(live.reshape((-1,) + (1,) * (obs.ndim - 1)), obs2, obs)
    return state, obs, done | last, ret, length, key, t + 1

  out = jax.lax.while_loop(cond, body, init)
  return out[3], out[4]
