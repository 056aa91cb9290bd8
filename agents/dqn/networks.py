"""DQN networks: an MLP Q-network (vector observations) or an image network (the Nature
CNN, or the one the environment declares: `network_spec.image_network`, e.g. MinAtar's),
optionally with a dueling head (Wang et al. 2016)."""
from __future__ import annotations

import dataclasses

import haiku as hk
import numpy as np
from acme import specs

from actorq.components import networks as networks_lib
from actorq.core import UnsupportedEnvironmentError
from actorq.quantization import network_spec as ns


@dataclasses.dataclass
class DQNNetworks:
  """`spec` describes the network the actors run; `network.apply(params, obs[B, ...])
  -> q[B, A]` (for a dueling network, `dueling_q` of the spec's [B, A + 1] outputs)."""
  spec: ns.NetworkSpec
  network: hk.Transformed
  dueling: bool = False


# Dtypes whose np.mean is the plain sum divided by the count (float16 accumulates in float32).
_SUM_MEAN_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def dueling_q(outputs):
  """Q-values from a dueling head's outputs (Wang et al. 2016, eq. 9).

  Args:
    outputs: float [..., A + 1] = [V, A_1, ..., A_A] (numpy or JAX array).

  Returns:
    float [..., A]: Q_a = V + A_a - mean_b A_b (same array type), so
    argmax_a Q_a = argmax_a A_a.

  Raises:
    ValueError: when the last axis has fewer than 2 entries (no advantage).
  """
  if outputs.shape[-1] < 2:
    raise ValueError(f"a dueling head outputs [V, A_1..A_n] with n >= 1, got last axis "
                     f"{outputs.shape[-1]}")
  value, advantage = outputs[..., :1], outputs[..., 1:]
  if type(outputs) is np.ndarray and outputs.dtype in _SUM_MEAN_DTYPES:  # pylint: disable=unidiomatic-typecheck
    # np.mean's own float operations (the float32/64 sum, divided by the count in that
    # dtype) without its Python layer: 12 -> ~6 us per [32, A + 1] call (issue 40).
    mean = np.add.reduce(advantage, axis=-1, keepdims=True) / advantage.shape[-1]
    return value + advantage - mean
  return value + advantage - advantage.mean(axis=-1, keepdims=True)


def dueling_network(base: hk.Transformed) -> hk.Transformed:
  """`base` (outputs [B, A + 1]) with `dueling_q` applied: same params, Q [B, A]."""
  return hk.Transformed(init=base.init, apply=lambda params, x: dueling_q(base.apply(params, x)))


def discrete_actions(environment_spec: specs.EnvironmentSpec, agent: str,
                     advice: str) -> specs.DiscreteArray:
  """The spec's actions, which a Q-network agent (DQN's, R2D2's) needs discrete.

  Raises:
    actorq.core.UnsupportedEnvironmentError: continuous actions ("<agent> needs discrete
      actions, but ...; use <advice>", naming their shape and dtype).
  """
  actions = environment_spec.actions
  if not isinstance(actions, specs.DiscreteArray):
    raise UnsupportedEnvironmentError(
        f"{agent} needs discrete actions, but this environment's actions are continuous "
        f"(shape {actions.shape}, dtype {actions.dtype}); use {advice}")
  return actions


def make_networks(environment_spec: specs.EnvironmentSpec, hidden_sizes=(256, 256),
                  dueling: bool = False) -> DQNNetworks:
  """Q-network for a discrete action spec; with `dueling`, the spec's last Dense layer
  has A + 1 outputs [V, A_1..A_A] and `network` returns `dueling_q` of them.

  Images [H, W, C] get the network the environment declares through its observation
  spec's name (`network_spec.image_network`: ``"minatar_cnn"`` -> Young and Tian 2019's
  MinAtar network), else the Nature CNN; `hidden_sizes` shapes only the MLP of vector
  observations.

  Raises:
    actorq.core.UnsupportedEnvironmentError: for a non-discrete action spec, an
      observation that is neither a vector [D] nor an image [H, W, C], or an image
      smaller than its network accepts (naming both shapes, e.g. (15, 15, 3) and
      (36, 36, C) for the Nature CNN).
  """
  actions = discrete_actions(environment_spec, "DQN", "a continuous-control agent or a "
                             "Discrete-action environment such as gym:CartPole-v1")
  obs_shape = tuple(environment_spec.observations.shape)
  outputs = actions.num_values + 1 if dueling else actions.num_values
  if len(obs_shape) == 3:
    try:
      spec = ns.image_network(getattr(environment_spec.observations, "name", None), obs_shape,
                              outputs)
    except ValueError as e:  # the image is smaller than the convolutions accept (case B7)
      raise UnsupportedEnvironmentError(str(e)) from None
  elif len(obs_shape) == 1:
    spec = ns.mlp(obs_shape[0], hidden_sizes, outputs)
  else:
    raise UnsupportedEnvironmentError(
        f"observation shape {obs_shape} is not supported: use a vector [D] or an image [H, W, C]")
  network = networks_lib.haiku_network(spec)
  if dueling:
    network = dueling_network(network)
  return DQNNetworks(spec=spec, network=network, dueling=dueling)
