"""R2D2 networks: MLP torso -> `haiku.LSTM` -> linear (optionally dueling) head.

The learner unrolls the Haiku network over time; actors execute the same parameters
step by step through `RecurrentRuntime` (the `spec`, a `RecurrentSpec`).
"""
from __future__ import annotations

import dataclasses
from typing import Sequence, Tuple

import haiku as hk
import jax
import jax.numpy as jnp
from acme import specs

from actorq.agents.dqn.networks import discrete_actions, dueling_q
from actorq.core import UnsupportedEnvironmentError
from actorq.quantization import network_spec as ns


@dataclasses.dataclass
class R2D2Networks:
  """`spec` is what the actors execute; `unroll.apply(params, observations [T, B, D],
  state) -> (outputs [T, B, O], final state)` with `state` an `hk.LSTMState` of float32
  [B, H] arrays; `q_values(outputs)` -> Q [..., A] (`dueling_q` when `dueling`)."""
  spec: ns.RecurrentSpec
  unroll: hk.Transformed
  dueling: bool

  @property
  def lstm_size(self) -> int:
    return int(self.spec.lstm_size)

  def initial_state(self, batch_size: int) -> hk.LSTMState:
    """Zeros, float32 [batch_size, H] (`hk.LSTM.initial_state`)."""
    zeros = jnp.zeros((int(batch_size), self.lstm_size), jnp.float32)
    return hk.LSTMState(hidden=zeros, cell=zeros)

  def q_values(self, outputs: jnp.ndarray) -> jnp.ndarray:
    return dueling_q(outputs) if self.dueling else outputs

  def init(self, key: jax.Array) -> hk.Params:
    dummy = jnp.zeros((1, 1) + tuple(self.spec.input_shape), jnp.float32)
    return self.unroll.init(key, dummy, self.initial_state(1))


def recurrent_spec(observation_size: int, num_actions: int, torso_sizes: Sequence[int],
                   lstm_size: int, dueling: bool) -> ns.RecurrentSpec:
  """The actors' spec: torso Dense(ReLU) layers `torso_<i>`, the LSTM of `lstm_size`,
  head `head` with A (or A + 1 for a dueling head: [V, A_1..A_A]) outputs."""
  torso = ns.NetworkSpec(
      input_shape=(int(observation_size),),
      layers=tuple(ns.Dense(f"torso_{i}", int(u), "relu") for i, u in enumerate(torso_sizes)))
  outputs = int(num_actions) + 1 if dueling else int(num_actions)
  head = ns.NetworkSpec(input_shape=(int(lstm_size),), layers=(ns.Dense("head", outputs, "none"),))
  return ns.RecurrentSpec(torso, int(lstm_size), head)


def make_networks(environment_spec: specs.EnvironmentSpec, torso_sizes: Tuple[int, ...] = (64,),
                  lstm_size: int = 64, dueling: bool = True) -> R2D2Networks:
  """The recurrent Q-network for a discrete action spec and a vector observation.

  Raises:
    actorq.core.UnsupportedEnvironmentError: continuous actions, or an observation that
      is not a vector [D] (naming what is allowed).
  """
  actions = discrete_actions(environment_spec, "R2D2",
                             "a Discrete-action environment such as gym:CartPole-v1-po")
  obs_shape = tuple(environment_spec.observations.shape)
  if len(obs_shape) != 1:
    raise UnsupportedEnvironmentError(
        f"R2D2 here takes vector observations [D] (MLP torso), got shape {obs_shape}; "
        "allowed: e.g. gym:CartPole-v1, gym:CartPole-v1-po")
  spec = recurrent_spec(obs_shape[0], actions.num_values, torso_sizes, lstm_size, dueling)

  def unroll_fn(observations, state):
    x = observations.astype(jnp.float32) * spec.torso.input_scale
    for layer in spec.torso.layers:
      x = jax.nn.relu(hk.Linear(layer.units, name=layer.name)(x))
    core = hk.LSTM(spec.lstm_size, name="lstm")
    hidden, final = hk.dynamic_unroll(core, x, state)
    return hk.Linear(spec.output_size, name="head")(hidden), final

  return R2D2Networks(spec=spec, unroll=hk.without_apply_rng(hk.transform(unroll_fn)),
                      dueling=bool(dueling))
