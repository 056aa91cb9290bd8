"""Population-based training's pieces that depend on no agent: members' pytrees stacked on
a leading member axis, truncation selection, and the explore step of PBT (Jaderberg et
al. 2017, "Population Based Training of Neural Networks", section 3 and appendix A.1:
"truncation selection" exploit, "perturb" or "resample" explore).

    state = stack([member_0, member_1, ...])         # every leaf [N, ...]
    losers, winners = truncation_selection(fitness, 0.25, rng)
    state = copy_member(state, source=winners[0], target=losers[0])
    value = explore(space["learning_rate"], value, rng)

`PopulationLearner` is what every agent's population learner shares (the table of mutable
hyperparameters, the config's values as [N] arrays, a member's config, the jitted vmap of
the member step, the batched policy call); an agent's subclass keeps its own state, init,
member step and action selection. `BoxPopulationLearner` adds what the agents acting in a
finite box (TD3, SAC) share: the bounds and the warm-up and noise draws of acting.

Everything is a function of its inputs and the numpy generator passed in, so a population
run stays a function of its seed.
"""
from __future__ import annotations

import abc
import dataclasses
import math
from typing import Any, ClassVar, Dict, List, Mapping, Sequence, Tuple, Union

import jax
import jax.numpy as jnp
import numpy as np

from actorq.components.acting import continuous

# Jaderberg et al. 2017, appendix A.1: "perturb": multiply by 0.8 or 1.2.
PERTURB_FACTORS = (0.8, 1.2)


@dataclasses.dataclass(frozen=True)
class Hyperparameter:
  """A mutable hyperparameter's search range.

  Attributes:
    low, high: the values it may take (inclusive), low < high; perturbations are clipped
      to them and resampling draws from them.
    log: resample log-uniformly (needs low > 0), else uniformly.
    doc: one line for `--help` and the docs (what it is, its unit).
  """
  low: float
  high: float
  log: bool = False
  doc: str = ""

  def __post_init__(self):
    if not self.low < self.high or (self.log and self.low <= 0):
      raise ValueError(f"a Hyperparameter needs low < high (and low > 0 when log), got "
                       f"[{self.low}, {self.high}], log={self.log}")

  def clip(self, value: float) -> float:
    return float(min(max(value, self.low), self.high))

  def sample(self, rng: np.random.Generator) -> float:
    """A draw from the range (log-uniform when `log`)."""
    if self.log:
      return float(math.exp(rng.uniform(math.log(self.low), math.log(self.high))))
    return float(rng.uniform(self.low, self.high))

  def explore(self, value: float, rng: np.random.Generator,
              resample_probability: float) -> float:
    """With probability `resample_probability` a fresh `sample`, else `value` times 0.8
    or 1.2 (`PERTURB_FACTORS`, equally likely) clipped to the range (Jaderberg et al.
    2017, section 3 "explore"). Draws from `rng` in a fixed order: the branch, the
    factor, then the resample's value when resampling."""
    resample = rng.random() < resample_probability
    factor = PERTURB_FACTORS[int(rng.integers(len(PERTURB_FACTORS)))]
    if resample:
      return self.sample(rng)
    return self.clip(value * factor)


@dataclasses.dataclass(frozen=True)
class Choice:
  """A categorical mutable hyperparameter (e.g. the actors' precision).

  Attributes:
    choices: the values it may take (at least 2, distinct).
    doc: one line for `--help` and the docs.
  """
  choices: Tuple[Any, ...]
  doc: str = ""

  def __post_init__(self):
    if len(self.choices) < 2 or len(set(self.choices)) != len(self.choices):
      raise ValueError(f"a Choice needs at least 2 distinct values, got {self.choices}")

  def sample(self, rng: np.random.Generator) -> Any:
    """One of `choices`, uniformly."""
    return self.choices[int(rng.integers(len(self.choices)))]

  def explore(self, value: Any, rng: np.random.Generator, resample_probability: float) -> Any:
    """A categorical value has no perturbation: with probability `resample_probability`
    one of the OTHER choices (uniformly), else `value` (Jaderberg et al. 2017 resample
    categorical hyperparameters). Draws from `rng`: the branch, then the new value."""
    if rng.random() < resample_probability:
      others = [c for c in self.choices if c != value]
      return others[int(rng.integers(len(others)))]
    return value


def learning_rate(doc: str) -> Hyperparameter:
  """An Adam learning rate's search range, [1e-5, 1e-2] log-uniform, with its `doc` line."""
  return Hyperparameter(1e-5, 1e-2, log=True, doc=doc)


# The ranges several agents' tables share (Jaderberg et al. 2017 perturb within and
# resample from them).
DISCOUNT = Hyperparameter(0.9, 0.999, doc="per-step discount gamma")
# The actors' numerical precision: executed by the member's own policy runtime
# (`quantization.runtimes`), not a learner input.
ACTOR_PRECISION = Choice(("fp32", "int8"), doc="the member's actors' precision")


def stack(members: Sequence[Any]) -> Any:
  """One pytree whose leaves are the members' leaves stacked on a new leading axis [N, ...].

  Raises:
    ValueError: no members, or members of different tree structures.
  """
  if not members:
    raise ValueError("stack needs at least one member")
  return jax.tree_util.tree_map(lambda *leaves: jnp.stack(leaves), *members)


def member(stacked: Any, index: int) -> Any:
  """Member `index`'s pytree (every leaf `leaf[index]`)."""
  return jax.tree_util.tree_map(lambda leaf: leaf[index], stacked)


def copy_member(stacked: Any, source: int, target: int) -> Any:
  """`stacked` with member `target`'s leaves replaced by member `source`'s (exact copies:
  the exploit of PBT); the other members are unchanged."""
  return jax.tree_util.tree_map(lambda leaf: leaf.at[target].set(leaf[source]), stacked)


def quantile_size(population: int, quantile: float) -> int:
  """Members in a `quantile` fraction of the population: floor(N * q), at least 1.

  Raises:
    ValueError: population < 2 or quantile outside (0, 0.5].
  """
  if population < 2:
    raise ValueError(f"a population needs at least 2 members, got {population}")
  if not 0.0 < quantile <= 0.5:
    raise ValueError(f"quantile must be in (0, 0.5], got {quantile}")
  return max(1, int(population * quantile))


def ranking(fitness: Sequence[float]) -> List[int]:
  """Member indices from best to worst: higher fitness first; NaN (never evaluated) last;
  ties broken by the lower index (so a ranking is a function of the values alone)."""
  def key(i):
    f = float(fitness[i])
    return (math.isnan(f), -f if not math.isnan(f) else 0.0, i)
  return sorted(range(len(fitness)), key=key)


def truncation_selection(fitness: Sequence[float], quantile: float,
                         rng: np.random.Generator) -> Tuple[List[int], List[int]]:
  """PBT's truncation selection (Jaderberg et al. 2017, appendix A.1): each member of the
  bottom `quantile` (by `ranking`) copies one member drawn uniformly from the top
  `quantile`.

  Args:
    fitness: float [N], e.g. each member's latest evaluation return.
    quantile: fraction of the population in the top and in the bottom, in (0, 0.5].
    rng: draws the top members the bottom ones copy (one draw per bottom member, in
      bottom order).

  Returns:
    `(losers, winners)`: equal-length lists of member indices; losers[i] copies winners[i].
    Losers are listed worst first.

  Raises:
    ValueError: as `quantile_size`.
  """
  k = quantile_size(len(fitness), quantile)
  order = ranking(fitness)
  top, bottom = order[:k], order[-k:][::-1]
  winners = [int(top[int(rng.integers(len(top)))]) for _ in bottom]
  return [int(b) for b in bottom], winners


def explore(space, value, rng: np.random.Generator, resample_probability: float = 0.25):
  """PBT's explore of one hyperparameter: `space.explore(value, rng,
  resample_probability)` (`Hyperparameter`: perturb x0.8/x1.2 or resample; `Choice`:
  keep or switch)."""
  return space.explore(value, rng, resample_probability)


def as_dicts(hyper: Any) -> List[dict]:
  """[N] dicts field -> float of stacked hyperparameters (a NamedTuple of [N] arrays; for
  pbt.csv and configs), each the shortest decimal that reads back as the same float32
  (0.001, not 0.0010000000474974513)."""
  values = {k: np.asarray(v, np.float32) for k, v in hyper._asdict().items()}
  n = len(next(iter(values.values())))
  return [{k: float(str(values[k][m])) for k in values} for m in range(n)]


def with_member(hyper: Any, index: int, values: dict) -> Any:
  """`hyper` (a NamedTuple of [N] arrays) with member `index`'s fields in `values` set
  (float32); keys that are not its fields are ignored."""
  return hyper._replace(**{k: getattr(hyper, k).at[index].set(jnp.float32(v))
                           for k, v in values.items() if k in hyper._fields})


def no_priorities(transitions: Any) -> jax.Array:
  """float32 zeros [B] for a batch of transitions (rewards [B]): the td a member step
  returns when its agent samples uniformly and writes no priorities."""
  return jnp.zeros(transitions.reward.shape, jnp.float32)


def where_active(active: Any, new: Any, old: Any) -> Any:
  """`new` where `active` (a bool scalar) is True, else `old`, leaf by leaf (`jnp.where`):
  a member that owes no learner step this round keeps its state exactly."""
  return jax.tree_util.tree_map(lambda n, o: jnp.where(active, n, o), new, old)


class PopulationLearner(abc.ABC):
  """What every agent's population learner shares: N members' training states on a
  leading member axis, updated in ONE jitted, vmapped step (Flajolet et al. 2022, "Fast
  Population-Based Reinforcement Learning on a Single Machine", section 3), with the
  mutable hyperparameters as float32 arrays [N] so PBT's exploit/explore changes them
  without recompiling.

  An agent's subclass (e.g. `agents.td3.population.TD3Population`) declares the class
  attributes below and writes what is its own: `__init__` (calling this one first),
  `init(keys)`, `member_step(state, transitions, probabilities, table_size, hyper,
  active)`, `policy_params(state)`, `select_actions(values, actor_steps, hyper, rng,
  explore)`, and `constrain(values)` where its fields depend on each other.
  The agent's builder declares it (`population_learner()`, read by
  `agents.population.learner_class`).

  Class attributes:
    CONFIG: the agent's config dataclass; a member's config is the shared one with its
      values replaced (`member_config`).
    MEMBER_HYPERPARAMETERS: the NamedTuple of the per-member learner (and action
      selection) inputs, float32 scalars ([N] each when stacked); its fields are CONFIG
      fields.
    LEARNER_FIELDS: MEMBER_HYPERPARAMETERS' fields (set from it for every subclass).
    HYPERPARAMETERS: config field -> `Hyperparameter` or `Choice`, the fields `--mutate`
      may name; those not in LEARNER_FIELDS (actor_precision) are the launcher's to apply.
    LOSS_METRICS: the step's metrics that must stay finite (the launcher stops on a
      non-finite one).
    POLICY_NETWORK: the attribute of `networks` whose `apply(params, observations)` the
      actors run (`policy_values`).

  Args:
    config: the population's shared config, a CONFIG: everything but
      MEMBER_HYPERPARAMETERS is common to the members.
    networks: the agent's networks (its builder's `make_networks(spec)`).

  Raises:
    ValueError: `config` is not a CONFIG (e.g. "TD3Population needs a TD3Config, got
      object").
  """
  CONFIG: ClassVar[type]
  MEMBER_HYPERPARAMETERS: ClassVar[type]
  LEARNER_FIELDS: ClassVar[Tuple[str, ...]] = ()
  HYPERPARAMETERS: ClassVar[Mapping[str, Union[Hyperparameter, Choice]]] = {}
  LOSS_METRICS: ClassVar[Tuple[str, ...]] = ()
  POLICY_NETWORK: ClassVar[str] = "policy"

  def __init_subclass__(cls, **kwargs):
    super().__init_subclass__(**kwargs)
    if "MEMBER_HYPERPARAMETERS" in cls.__dict__:
      cls.LEARNER_FIELDS = tuple(cls.MEMBER_HYPERPARAMETERS._fields)

  def __init__(self, config: Any, networks: Any):
    if not isinstance(config, self.CONFIG):
      raise ValueError(f"{type(self).__name__} needs a {self.CONFIG.__name__}, got "
                       f"{type(config).__name__}")
    self.config = config
    self.networks = networks
    self.step = jax.jit(jax.vmap(self.member_step))
    self._policy = jax.jit(jax.vmap(getattr(networks, self.POLICY_NETWORK).apply))

  # -- the agent's own (abstract) ------------------------------------------------------
  @abc.abstractmethod
  def init(self, keys: jax.Array) -> Any:
    """The members' initial training states from their keys [N, 2]; leaves [N, ...]."""

  @abc.abstractmethod
  def member_step(self, state: Any, transitions: Any, probabilities: Any, table_size: Any,
                  hyper: Any, active: Any) -> Tuple[Any, Any, Dict[str, Any]]:
    """One member's update, pure (`step` is its jitted vmap over the member axis):
    `(state, td float32 [B], metrics of float32 scalars)`; `active` False returns
    `state` unchanged (`where_active`)."""

  @staticmethod
  @abc.abstractmethod
  def policy_params(state: Any) -> Any:
    """The parameters the actors run, out of a (stacked) training state."""

  @abc.abstractmethod
  def select_actions(self, values: np.ndarray, actor_steps: np.ndarray, hyper: Any,
                     rng: np.random.Generator, explore: bool = True) -> np.ndarray:
    """[N, B, ...] actions from the members' `policy_values` [N, B, ...]: greedy, or
    with `explore` each member's own exploration at its `actor_steps[m]`."""

  # -- members ------------------------------------------------------------------------
  def hyperparameters(self, population: int) -> Any:
    """The config's values for every member: a MEMBER_HYPERPARAMETERS of float32
    [population] arrays."""
    return self.MEMBER_HYPERPARAMETERS(*(
        jnp.full((population,), getattr(self.config, name), jnp.float32)
        for name in self.LEARNER_FIELDS))

  @staticmethod
  def constrain(values: Dict[str, Any]) -> Dict[str, Any]:
    """`values` (field -> value of one member, after an independent explore of each
    field) made valid for the config; here unchanged (a copy): independent fields, each
    range valid. A subclass whose fields depend on each other overrides it."""
    return dict(values)

  def member_config(self, hyper: Mapping[str, Any]) -> Any:
    """The CONFIG of one member: the shared config with its values (a mapping field ->
    value, e.g. `dict(zip(fields, values))`; LEARNER_FIELDS as Python floats), e.g. for
    the run.json of its checkpoint (`actorq eval` rebuilds the networks from it).

    Raises:
      ValueError: a value the config refuses (CONFIG's checks).
    """
    return dataclasses.replace(self.config, **{
        k: float(v) if k in self.LEARNER_FIELDS else v for k, v in hyper.items()})

  # -- acting ---------------------------------------------------------------------------
  def policy_values(self, params: Any, observations: np.ndarray) -> np.ndarray:
    """float32 [N, B, ...]: every member's policy outputs on its own observations [N, B,
    ...] in one batched (vmapped) call of the POLICY_NETWORK's apply; `params` has leaves
    [N, ...] (what the outputs are: the subclass's docstring)."""
    return np.asarray(self._policy(params, observations))

  as_dicts = staticmethod(as_dicts)
  with_member = staticmethod(with_member)


class BoxPopulationLearner(PopulationLearner):
  """A `PopulationLearner` whose members act in a finite action box (TD3, SAC): it keeps
  the box (`continuous.bounds`) and a float32 observation of the task's shape for `init`,
  and frames exploration the same way for every such agent: Gaussian noise after the
  config's `random_warmup_steps` of uniform actions (`continuous.uniform_warmup`).

  `select_actions(values, actor_steps, hyper, rng, explore)`: float32 [N, B, A] actions
  in the box from the members' `policy_values` [N, B, ...]. Greedy: the subclass's
  `greedy_actions(values)`. With `explore`: eps [N, B, A] standard normal, then uniforms
  [N, B, A] in the box, drawn from `rng` in that order on every call (the stream does not
  depend on the hyperparameters or on the warm-up); member m acts `explore_actions(values,
  hyper, eps)[m]`, except while `actor_steps[m] < config.random_warmup_steps`, when it
  acts its uniforms.

  Args:
    config, networks: as `PopulationLearner`.
    environment_spec: the task's spec (bounded continuous actions [A]; one observation
      initialises the networks).

  Raises:
    ValueError: as `PopulationLearner`; `continuous.UnboundedActionSpecError` (a
      ValueError) for actions that are not a finite box.
  """

  def __init__(self, config: Any, networks: Any, environment_spec: Any):
    super().__init__(config, networks)
    self._lo, self._hi = continuous.bounds(environment_spec.actions)
    self._action_size = int(np.prod(self._lo.shape))
    self._dummy = np.zeros(environment_spec.observations.shape, np.float32)

  @abc.abstractmethod
  def greedy_actions(self, values: np.ndarray) -> np.ndarray:
    """float32 [N, B, A] greedy actions in the box from `policy_values` [N, B, ...]."""

  @abc.abstractmethod
  def explore_actions(self, values: np.ndarray, hyper: Any, eps: np.ndarray) -> np.ndarray:
    """float32 [N, B, A] exploring actions in the box from `policy_values` [N, B, ...],
    the members' hyperparameters ([N] each) and standard normal eps [N, B, A]."""

  def select_actions(self, values: np.ndarray, actor_steps: np.ndarray, hyper: Any,
                     rng: np.random.Generator, explore: bool = True) -> np.ndarray:
    """See the class docstring; `actor_steps` int [N], `hyper` [N] each, and `rng` are
    read only with `explore`."""
    if not explore:
      return self.greedy_actions(values)
    shape = np.shape(values)[:-1] + (self._action_size,)
    eps = rng.standard_normal(shape).astype(np.float32)
    uniform = rng.uniform(self._lo, self._hi, shape).astype(np.float32)
    actions = self.explore_actions(values, hyper, eps)
    warm = (np.asarray(actor_steps) < self.config.random_warmup_steps)[:, None, None]
    return np.where(warm, uniform, actions)
