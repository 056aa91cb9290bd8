"""DQN networks: an MLP Q-network (vector observations) or the Nature CNN (images)."""
from __future__ import annotations

import dataclasses

import haiku as hk
from acme import specs

from actorq.components import networks as networks_lib
from actorq.quantization import network_spec as ns


@dataclasses.dataclass
class DQNNetworks:
  """`spec` describes the Q-network; `network.apply(params, obs[B, ...]) -> q[B, A]`."""
  spec: ns.NetworkSpec
  network: hk.Transformed


class UnsupportedEnvironmentError(ValueError):
  """The agent cannot act in this environment (e.g. continuous actions for DQN)."""


def make_networks(environment_spec: specs.EnvironmentSpec, hidden_sizes=(256, 256)) -> DQNNetworks:
  """Q-network for a discrete action spec.

  Raises:
    UnsupportedEnvironmentError: for a non-discrete action spec.
  """
  actions = environment_spec.actions
  if not isinstance(actions, specs.DiscreteArray):
    raise UnsupportedEnvironmentError(
        f"DQN needs discrete actions, but this environment's actions are continuous "
        f"(shape {actions.shape}, dtype {actions.dtype}); use a continuous-control agent "
        "or a Discrete-action environment such as gym:CartPole-v1")
  obs_shape = tuple(environment_spec.observations.shape)
  if len(obs_shape) == 3:
    spec = ns.nature_cnn(obs_shape, actions.num_values)
  elif len(obs_shape) == 1:
    spec = ns.mlp(obs_shape[0], hidden_sizes, actions.num_values)
  else:
    raise UnsupportedEnvironmentError(
        f"observation shape {obs_shape} is not supported: use a vector [D] or an image [H, W, C]")
  return DQNNetworks(spec=spec, network=networks_lib.haiku_network(spec))
