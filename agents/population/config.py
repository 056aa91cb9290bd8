"""`PopulationConfig`: what makes N members of one agent a population (issue 52).

The members share their agent's config (the run's `config`); the population adds how many
members there are, which of the agent's fields PBT's explore changes, and PBT's selection
and explore parameters (Jaderberg et al. 2017, appendix A.1). A run's `RunSpec.population`
holds these fields as JSON (run.json/pbt.json's "population" section).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Dict, Mapping, Tuple

DEFAULT_QUANTILE = 0.25
DEFAULT_RESAMPLE_PROBABILITY = 0.25


# The mutable field that is a member's actor precision (applied by the actor, not the
# learner), and the precision whose members act through the one batched inference.
PRECISION_FIELD = "actor_precision"
FULL_PRECISION = "fp32"


@dataclasses.dataclass(frozen=True)
class PopulationConfig:
  """A population's own settings.

  Attributes:
    size: members N >= 2 (1 only for measurements: no exploit then).
    mutate: config fields explore changes (the agent's population learner's
      HYPERPARAMETERS); empty: exploit only.
    quantile: fraction of the population in the top and in the bottom, in (0, 0.5]
      (truncation selection).
    resample_probability: chance that explore resamples a field instead of perturbing it
      (x0.8 / x1.2), in [0, 1].

  Raises:
    ValueError: size < 1, a repeated mutate field, quantile or resample probability out of
      range (naming the value and what is allowed).
  """
  size: int
  mutate: Tuple[str, ...] = ()
  quantile: float = DEFAULT_QUANTILE
  resample_probability: float = DEFAULT_RESAMPLE_PROBABILITY

  def __post_init__(self):
    object.__setattr__(self, "mutate", tuple(self.mutate))
    if isinstance(self.size, bool) or not isinstance(self.size, int) or self.size < 1:
      raise ValueError(f"population size must be an integer >= 1, got {self.size!r}")
    if len(set(self.mutate)) != len(self.mutate):
      raise ValueError(f"--mutate {','.join(self.mutate)} repeats a field")
    if not 0.0 < self.quantile <= 0.5:
      raise ValueError(f"quantile {self.quantile}: allowed (0, 0.5]")
    if not 0.0 <= self.resample_probability <= 1.0:
      raise ValueError(f"resample probability {self.resample_probability}: allowed [0, 1]")

  @property
  def actor_precision(self) -> str:
    """What a launcher names as the population's actor precision (`ExperimentConfig
    .precision`): each member acts at its own (its `actor_precision` value)."""
    return "per member"

  def to_json(self) -> Dict[str, Any]:
    """The JSON a run directory records (`RunSpec.population`)."""
    return {"size": self.size, "mutate": list(self.mutate), "quantile": self.quantile,
            "resample_probability": self.resample_probability}

  @classmethod
  def from_json(cls, info: Mapping[str, Any]) -> "PopulationConfig":
    """Back from `to_json` (missing keys take their defaults).

    Raises:
      ValueError / TypeError / KeyError: not such a mapping.
    """
    return cls(size=int(info["size"]), mutate=tuple(info.get("mutate", ())),
               quantile=float(info.get("quantile", DEFAULT_QUANTILE)),
               resample_probability=float(info.get("resample_probability",
                                                   DEFAULT_RESAMPLE_PROBABILITY)))
