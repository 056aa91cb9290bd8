"""A declarative description of a feed-forward policy network.

The spec is the single source of truth shared by the learner (which builds a Haiku
network from it, see `actorq.components.networks`) and by the actor-side policy
runtimes (`actorq.quantization.runtimes`), which build an fp32, fp16/bf16 or int8
executable of the *same* architecture once and then only load new parameters.

Parameters of a network built from a spec form a flat Haiku tree::

    {layer.name: {"w": float32[...], "b": float32[units]}}

with `w` of shape `[in_features, units]` for `Dense` and
`[kernel, kernel, in_channels, channels]` (HWIO) for `Conv2D`.

Activations, inputs and outputs are float32. The network maps a batch of
observations `float32[B, *input_shape]` to `float32[B, output_size]`.
"""
from __future__ import annotations

import dataclasses
from typing import Sequence, Tuple, Union

ACTIVATIONS = ("relu", "tanh", "none")


@dataclasses.dataclass(frozen=True)
class Dense:
  """Fully connected layer `y = act(x @ w + b)`."""
  name: str
  units: int
  activation: str = "relu"


@dataclasses.dataclass(frozen=True)
class Conv2D:
  """2-d convolution (NHWC input, HWIO kernel, VALID padding) then activation."""
  name: str
  channels: int
  kernel: int
  stride: int
  activation: str = "relu"


@dataclasses.dataclass(frozen=True)
class Flatten:
  """Reshape `[B, ...]` to `[B, -1]` (row-major, as `jnp.reshape`)."""
  name: str = "flatten"


Layer = Union[Dense, Conv2D, Flatten]


@dataclasses.dataclass(frozen=True)
class NetworkSpec:
  """A sequential network: `input_scale * observation` through `layers`.

  Attributes:
    input_shape: observation shape without the batch dimension.
    layers: the layers, applied in order.
    input_scale: multiplies the observation first (e.g. 1/255 for Atari frames).

  Raises:
    ValueError: repeated layer names, an unknown activation, no final Dense layer, or
      leading Conv2D layers that cannot take `input_shape` (see `check_input_shape`).
  """
  input_shape: Tuple[int, ...]
  layers: Tuple[Layer, ...]
  input_scale: float = 1.0

  def __post_init__(self):
    names = [l.name for l in self.layers]
    if len(set(names)) != len(names):
      raise ValueError(f"NetworkSpec layer names must be unique, got {names}")
    for layer in self.layers:
      act = getattr(layer, "activation", "none")
      if act not in ACTIVATIONS:
        raise ValueError(
            f"layer {layer.name!r}: activation {act!r} is not one of {ACTIVATIONS}")
    if not self.layers or not isinstance(self.layers[-1], Dense):
      raise ValueError("NetworkSpec must end with a Dense layer")
    check_input_shape(self.input_shape, self.layers)

  @property
  def output_size(self) -> int:
    return self.layers[-1].units

  @property
  def parameter_layers(self) -> Tuple[Layer, ...]:
    return tuple(l for l in self.layers if not isinstance(l, Flatten))


def smallest_input_hw(layers: Sequence[Layer]) -> Tuple[int, int]:
  """The smallest (H, W) that the leading `Conv2D` layers of `layers` accept.

  A VALID convolution with kernel k and stride s maps a side of n pixels to
  `floor((n - k) / s) + 1`, which is >= m exactly when n >= (m - 1) * s + k; walking the
  leading convolutions backwards from an output side of 1 gives the smallest input side
  (the kernels are square, so H and W have the same bound). For the Nature CNN
  (8/4, 4/2, 3/1): 3 -> (3 - 1) * 2 + 4 = 8 -> (8 - 1) * 4 + 8 = 36.

  Returns:
    (1, 1) when `layers` does not start with a `Conv2D` layer.
  """
  convs = []
  for layer in layers:
    if not isinstance(layer, Conv2D):
      break
    convs.append(layer)
  side = 1
  for conv in reversed(convs):
    side = (side - 1) * int(conv.stride) + int(conv.kernel)
  return side, side


def check_input_shape(input_shape: Sequence[int], layers: Sequence[Layer],
                      network: str = "this network") -> None:
  """Checks that a network starting with `Conv2D` layers can take `input_shape`.

  Raises:
    ValueError: one line naming the observation shape and what the network accepts:
      ``observation shape (15, 15, 3) is too small for the Nature CNN: the smallest input
      it accepts is (36, 36, C)``, or that it needs an image [H, W, C].
  """
  if not layers or not isinstance(layers[0], Conv2D):
    return
  shape = tuple(int(s) for s in input_shape)
  h, w = smallest_input_hw(layers)
  if len(shape) != 3 or shape[2] < 1:
    raise ValueError(f"observation shape {shape} is not supported by {network}: it needs an "
                     f"image [H, W, C] of at least ({h}, {w}, C)")
  if shape[0] < h or shape[1] < w:
    raise ValueError(f"observation shape {shape} is too small for {network}: the smallest "
                     f"input it accepts is ({h}, {w}, C)")


def mlp(input_size: int, hidden: Sequence[int], output_size: int,
        activation: str = "relu", output_activation: str = "none",
        prefix: str = "dense") -> NetworkSpec:
  """An MLP spec `input_size -> hidden... -> output_size`."""
  layers = [Dense(f"{prefix}_{i}", int(h), activation) for i, h in enumerate(hidden)]
  layers.append(Dense(f"{prefix}_{len(hidden)}", int(output_size), output_activation))
  return NetworkSpec(input_shape=(int(input_size),), layers=tuple(layers))


def nature_cnn(input_shape: Tuple[int, int, int], output_size: int,
               input_scale: float = 1.0 / 255.0) -> NetworkSpec:
  """The DQN Nature CNN (Mnih et al., 2015): 3 conv layers, 512-unit dense, linear head.

  `input_shape` is (height, width, channels), e.g. (84, 84, 4), at least (36, 36, 1)
  (`smallest_input_hw` of its convolutions).

  Raises:
    ValueError: for an `input_shape` that is not [H, W, C] or is smaller than that, e.g.
      ``observation shape (15, 15, 3) is too small for the Nature CNN: the smallest input
      it accepts is (36, 36, C)``.
  """
  layers = (
      Conv2D("conv_0", 32, 8, 4),
      Conv2D("conv_1", 64, 4, 2),
      Conv2D("conv_2", 64, 3, 1),
      Flatten(),
      Dense("dense_0", 512),
      Dense("dense_1", int(output_size), "none"),
  )
  check_input_shape(input_shape, layers, "the Nature CNN")
  return NetworkSpec(
      input_shape=tuple(int(s) for s in input_shape),
      layers=layers,
      input_scale=input_scale,
  )


def minatar_cnn(input_shape: Tuple[int, int, int], output_size: int) -> NetworkSpec:
  """The MinAtar DQN network (Young and Tian 2019, "MinAtar: An Atari-Inspired Testbed for
  Thorough and Reproducible Reinforcement Learning Experiments", arXiv 1903.03176: the network
  of its DQN experiments, `QNetwork` of the MinAtar repository's examples/dqn.py): one Conv2D
  of 16 channels, 3x3, stride 1 (VALID, as PyTorch's unpadded `nn.Conv2d`) + ReLU, a 128-unit
  dense layer + ReLU, a linear head.

  `input_shape` is (height, width, channels), MinAtar's (10, 10, C) (C = 4 to 10 by game),
  at least (3, 3, C); observations are 0/1 so `input_scale` is 1. On (10, 10, C) the
  convolution gives 8 x 8 x 16 = 1,024 features.

  Raises:
    ValueError: for an `input_shape` that is not [H, W, C] or is smaller than (3, 3, C).
  """
  layers = (
      Conv2D("conv_0", 16, 3, 1),
      Flatten(),
      Dense("dense_0", 128),
      Dense("dense_1", int(output_size), "none"),
  )
  check_input_shape(input_shape, layers, "the MinAtar network")
  return NetworkSpec(input_shape=tuple(int(s) for s in input_shape), layers=layers)


# The image networks an environment can declare by naming its observation spec after one of
# them (`image_network`): name -> ``builder(input_shape [H, W, C], output_size) ->
# NetworkSpec``. An image observation under any other name gets `DEFAULT_IMAGE_NETWORK`.
IMAGE_NETWORKS = {
    "nature_cnn": nature_cnn,
    "minatar_cnn": minatar_cnn,
}
DEFAULT_IMAGE_NETWORK = "nature_cnn"


def image_network(observation_name: str, input_shape: Tuple[int, int, int],
                  output_size: int) -> NetworkSpec:
  """The image network an environment declared for its observations: the `IMAGE_NETWORKS`
  entry named `observation_name` (the observation spec's ``name``, e.g. ``"minatar_cnn"``
  for `actorq.components.envs.minatar`), else `DEFAULT_IMAGE_NETWORK` (the Nature CNN; an
  observation spec named ``"observation"``, as Gymnasium's and Atari's are, gets it).

  Raises:
    ValueError: `input_shape` is smaller than that network accepts (case B7), naming both.
  """
  name = observation_name if observation_name in IMAGE_NETWORKS else DEFAULT_IMAGE_NETWORK
  return IMAGE_NETWORKS[name](tuple(input_shape), int(output_size))


@dataclasses.dataclass(frozen=True)
class RecurrentSpec:
  """A recurrent Q-network in three parts: `torso` (a `NetworkSpec`, observation ->
  features [F]), an LSTM cell of `lstm_size` units H, and `head` (a `NetworkSpec` whose
  input is the LSTM's output [H]).

  Params tree (Haiku's, see `actorq.agents.r2d2.networks`): the torso's and the head's
  `{layer: {"w", "b"}}` plus `{LSTM_LAYER: {"w": [F + H, 4H], "b": [4H]}}`, the one
  matmul of `haiku.LSTM` over `concat([x_t, h_{t-1}])` with the gates in the order
  (i, g, f, o) and +1 added to the forget gate's pre-activation (Haiku 0.0.10's cell).

  Runtimes (`actorq.quantization.runtimes.recurrent`) execute the three matmul parts
  (torso, gates, head) as three sequential specs at the actor's precision and the
  cell's elementwise update (sigmoid, tanh, c and h) in float32 numpy.

  Raises:
    ValueError: a head whose input is not [lstm_size], lstm_size < 1, or layer names
      shared between the parts.
  """
  torso: NetworkSpec
  lstm_size: int
  head: NetworkSpec

  LSTM_LAYER = "lstm/linear"   # Haiku's module path of hk.LSTM(name="lstm")'s matmul
  GATES_LAYER = "lstm_gates"   # the same layer in the gates' sequential spec

  def __post_init__(self):
    if int(self.lstm_size) < 1:
      raise ValueError(f"lstm_size must be >= 1, got {self.lstm_size}")
    if tuple(self.head.input_shape) != (int(self.lstm_size),):
      raise ValueError(f"the head's input shape must be ({self.lstm_size},) (the LSTM's "
                       f"output), got {tuple(self.head.input_shape)}")
    names = [l.name for l in self.torso.layers + self.head.layers] + [self.LSTM_LAYER]
    if len(set(names)) != len(names):
      raise ValueError(f"RecurrentSpec layer names must be unique across torso, LSTM and "
                       f"head, got {names}")

  @property
  def input_shape(self) -> Tuple[int, ...]:
    return tuple(self.torso.input_shape)

  @property
  def output_size(self) -> int:
    return self.head.output_size

  @property
  def features(self) -> int:
    """F, the torso's output size."""
    return self.torso.output_size

  @property
  def gates(self) -> NetworkSpec:
    """The LSTM's matmul as a sequential spec: [F + H] -> Dense(4H, no activation)."""
    return NetworkSpec(input_shape=(self.features + int(self.lstm_size),),
                       layers=(Dense(self.GATES_LAYER, 4 * int(self.lstm_size), "none"),))

  @property
  def layers(self) -> Tuple[Layer, ...]:
    """Every parameter layer, torso first, then the LSTM matmul, then the head."""
    return (self.torso.layers + (Dense(self.LSTM_LAYER, 4 * int(self.lstm_size), "none"),)
            + self.head.layers)

  @property
  def parameter_layers(self) -> Tuple[Layer, ...]:
    return tuple(l for l in self.layers if not isinstance(l, Flatten))
