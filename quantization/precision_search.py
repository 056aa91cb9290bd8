"""A per-layer precision search under budgets measured on the runtime (HAQ-like).

The problem is HAQ's (Wang, Liu, Lin, Lin, Han 2019, "HAQ: Hardware-Aware Automated
Quantization with Mixed Precision", CVPR): choose, for every layer, one of a set of
precisions (here `mixed.LayerChoice`: fp32, fp16, int8 .. int2, each possibly pruned,
Han et al. 2015) so that the policy meets resource budgets *measured on the target*
(latency of the runtime that will execute it; optionally stored bytes), maximising the
quality of the compressed model without retraining. HAQ searches with a DDPG agent
and enforces the budget by lowering bit widths layer by layer until it is met (HAQ,
sec. 3.3). With a handful of layers and a dozen choices a learned searcher is not
needed; this is a deterministic greedy search (our own formulation, documented here):

1. **Descend**: start from all-fp32. While the budgets are violated, try every
   single-layer change that lowers the violation
   ``v(p) = max(0, latency(p) / latency_budget - 1) + max(0, bytes(p) / size_budget - 1)``
   and take the one with the largest score change per unit of violation removed
   ``(score(p') - score(p)) / (v(p) - v(p'))`` (the least quality lost per unit of
   resource, the marginal-utility rule of greedy knapsack heuristics); ties go to the
   smaller violation, then fewer bytes.
2. **Recover**: while some single-layer change keeps ``v = 0`` and raises the score
   (by more than `tolerance`), take the best one (ties: fewer bytes). This undoes
   steps of phase 1 that later steps made unnecessary.
3. **Explain**: for every layer of the result, score every other choice with the rest
   fixed; the layer's choice is explained by what its alternatives would cost (budget
   broken, score lost) or save.

`score(p)` is the caller's (agreement with the fp32 policy's greedy actions on
calibration observations, or the mean return of calibration episodes, see
`actorq quantize --search`), compared as `(score, -kl)`. `latency(p)` is the caller's
too: in the command, a table measured on LiteRT for every float/int8 layer pattern
(`LatencyTable`); in tests, a fake model. Everything evaluated is a `Trial`.
"""
from __future__ import annotations

import dataclasses
import itertools
import math
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from actorq.quantization import mixed


@dataclasses.dataclass(frozen=True)
class Score:
  """A policy's quality: `score` (higher is better), `agreement` and `kl` (reported;
  `kl` breaks ties, lower is better; NaN counts as 0)."""
  score: float
  agreement: float = float("nan")
  kl: float = float("nan")

  def key(self) -> Tuple[float, float]:
    return (self.score, -(0.0 if math.isnan(self.kl) else self.kl))


@dataclasses.dataclass
class Trial:
  """One evaluated policy.

  Attributes:
    trial: running number (0 is the starting policy).
    phase: "start", "descend", "recover", "explain" or "final".
    step: the search step it was tried in.
    layer, from_choice, to_choice: the single-layer change from the current policy.
    policy: the per-layer labels, comma-joined.
    latency_us, stored_bytes, violation: the resource figures (violation 0: meets the
      budgets).
    score, agreement, kl: `Score`.
    accepted: whether the search moved to it.
  """
  trial: int
  phase: str
  step: int
  layer: str
  from_choice: str
  to_choice: str
  policy: str
  latency_us: float
  stored_bytes: int
  violation: float
  score: float
  agreement: float
  kl: float
  accepted: bool = False


TRIAL_COLUMNS = tuple(f.name for f in dataclasses.fields(Trial))


@dataclasses.dataclass
class SearchResult:
  """The chosen policy, whether it meets the budgets, every trial and, per layer, the
  alternatives' figures and an explanation (`explanations[layer]`)."""
  policy: mixed.PrecisionPolicy
  meets_budget: bool
  score: Score
  latency_us: float
  stored_bytes: int
  trials: List[Trial]
  alternatives: Dict[str, List[Trial]]
  explanations: Dict[str, str]


def _policy_text(policy: mixed.PrecisionPolicy) -> str:
  return ",".join(c.label for c in policy.choices)


def greedy_search(start: mixed.PrecisionPolicy, choices: Sequence[mixed.LayerChoice],
                  evaluate: Callable[[mixed.PrecisionPolicy], Score],
                  latency: Callable[[mixed.PrecisionPolicy], float],
                  size: Callable[[mixed.PrecisionPolicy], int],
                  latency_budget_us: Optional[float] = None,
                  size_budget_bytes: Optional[float] = None,
                  max_trials: int = 2000, tolerance: float = 1e-9,
                  explain: bool = True,
                  progress: Optional[Callable[[Trial], None]] = None) -> SearchResult:
  """The greedy search of the module docstring.

  Args:
    start: the starting policy (normally all fp32); fixes the layers and their order.
    choices: the choices every layer may take.
    evaluate: policy -> `Score` (called once per distinct policy; cached).
    latency: policy -> microseconds; size: policy -> stored bytes.
    latency_budget_us, size_budget_bytes: the budgets (at least one).
    max_trials: stop descending/recovering after this many evaluations.
    tolerance: a score gain below this does not count in the recover phase.
    explain: run phase 3.
    progress: called with every accepted trial (the start, each move, the final policy).

  Raises:
    ValueError: no budget, a non-positive budget, or no choices.
  """
  if latency_budget_us is None and size_budget_bytes is None:
    raise ValueError("the search needs a latency budget, a size budget or both")
  for name, b in (("latency budget", latency_budget_us), ("size budget", size_budget_bytes)):
    if b is not None and not (math.isfinite(b) and b > 0):
      raise ValueError(f"{name} must be a finite number > 0, got {b}")
  if not choices:
    raise ValueError("the search needs at least one choice per layer")
  choices = list(dict.fromkeys(choices))
  cache: Dict[mixed.PrecisionPolicy, Tuple[Score, float, int]] = {}
  trials: List[Trial] = []

  def figures(p):
    if p not in cache:
      cache[p] = (evaluate(p), float(latency(p)), int(size(p)))
    return cache[p]

  def violation(lat, nbytes):
    v = 0.0
    if latency_budget_us is not None:
      v += max(0.0, lat / latency_budget_us - 1.0)
    if size_budget_bytes is not None:
      v += max(0.0, nbytes / size_budget_bytes - 1.0)
    return v

  def record(p, phase, step, layer="", old="", new=""):
    s, lat, nb = figures(p)
    t = Trial(len(trials), phase, step, layer, old, new, _policy_text(p), lat, nb,
              violation(lat, nb), s.score, s.agreement, s.kl)
    trials.append(t)
    return t

  def best_neighbour(current, phase, step, admits, rank):
    """Evaluates every single-layer change of `current` whose violation `admits` accepts
    (cheap figures first: latency and bytes need no evaluation) and returns the
    `(policy, trial)` with the highest `rank(policy, trial)` (None: not a candidate)."""
    best, best_key = None, None
    for name, old in current.layers:
      for c in choices:
        if c == old or len(trials) >= max_trials:
          continue
        p = current.replace(name, c)
        _, lat, nb = figures(p) if p in cache else (None, float(latency(p)), int(size(p)))
        if not admits(violation(lat, nb)):
          continue
        t = record(p, phase, step, name, old.label, c.label)
        key = rank(p, t)
        if key is not None and (best_key is None or key > best_key):
          best, best_key = (p, t), key
    return best

  current = start
  cur = record(current, "start", 0)
  cur.accepted = True
  accept = progress or (lambda t: None)
  accept(cur)
  step = 0
  while len(trials) < max_trials:
    step += 1
    if cur.violation > 0:  # Phase 1: descend until the budgets are met.
      v0, s0 = cur.violation, cur.score
      best = best_neighbour(
          current, "descend", step, lambda v: v < v0,
          lambda p, t: ((t.score - s0) / (v0 - t.violation), -t.violation, -t.stored_bytes))
      # None: nothing lowers the violation, the budgets cannot be met with these choices.
    else:  # Phase 2: recover score within the budgets.
      k0 = figures(current)[0].key()
      best = best_neighbour(
          current, "recover", step, lambda v: v == 0,
          lambda p, t: ((figures(p)[0].key(), -t.stored_bytes)
                        if figures(p)[0].key()[0] > k0[0] + tolerance else None))
    if best is None:
      break
    current, cur = best
    cur.accepted = True
    accept(cur)
  final_score, final_lat, final_bytes = figures(current)
  alternatives: Dict[str, List[Trial]] = {}
  explanations: Dict[str, str] = {}
  if explain:
    for name, old in current.layers:
      alts = []
      for c in choices:
        if c != old:
          alts.append(record(current.replace(name, c), "explain", step, name, old.label,
                             c.label))
      alternatives[name] = alts
      explanations[name] = explain_choice(old.label, cur, alts, latency_budget_us,
                                          size_budget_bytes)
  final = record(current, "final", step)
  final.accepted = True
  accept(final)
  return SearchResult(current, cur.violation == 0, final_score, final_lat, final_bytes,
                      trials, alternatives, explanations)


def explain_choice(label: str, chosen: Trial, alternatives: Sequence[Trial],
                   latency_budget_us: Optional[float],
                   size_budget_bytes: Optional[float]) -> str:
  """One sentence on why a layer holds `label`, from its alternatives' trials: the
  better-scoring alternatives that break a budget (and by how much), and the cheaper
  feasible alternatives that lose score (and how much)."""
  parts = [f"{label}: policy score {chosen.score:.4f}, {chosen.latency_us:.1f} us, "
           f"{chosen.stored_bytes} B"]
  over = [t for t in alternatives if t.violation > 0]
  better_over = [t for t in over if t.score > chosen.score + 1e-12]
  if better_over:  # the least violating of them says most about the budget
    t = min(better_over, key=lambda t: (t.violation, -t.score))
    why = []
    if latency_budget_us is not None and t.latency_us > latency_budget_us:
      why.append(f"latency {t.latency_us:.1f} us > budget {latency_budget_us:.1f} us")
    if size_budget_bytes is not None and t.stored_bytes > size_budget_bytes:
      why.append(f"{t.stored_bytes} B > budget {size_budget_bytes:.0f} B")
    parts.append(f"{t.to_choice} would score {t.score - chosen.score:+.4f} but breaks the "
                 f"budget ({', '.join(why)})")
  feasible = [t for t in alternatives if t.violation == 0]
  cheaper = [t for t in feasible if t.stored_bytes < chosen.stored_bytes]
  if cheaper:
    t = max(cheaper, key=lambda t: (t.score, -t.stored_bytes))
    parts.append(f"the best cheaper choice {t.to_choice} saves "
                 f"{chosen.stored_bytes - t.stored_bytes} B but scores "
                 f"{t.score - chosen.score:+.4f}")
  else:
    parts.append("no alternative within the budgets stores fewer bytes")
  better_in = [t for t in feasible if t.score > chosen.score + 1e-12]
  if better_in:
    t = max(better_in, key=lambda t: t.score)
    parts.append(f"{t.to_choice} would score {t.score - chosen.score:+.4f} within the budgets "
                 "(the search stopped at its trial cap or this needs two changes)")
  return "; ".join(parts)


# ----------------------------------------------------------------------------------------
# Latency measured on the runtime, per float/int8 layer pattern.


@dataclasses.dataclass
class LatencyTable:
  """Batch-1 latency of a network on LiteRT for float/int8 layer patterns.

  On LiteRT a layer's latency depends only on whether it runs float32 kernels (fp32,
  fp16 and bf16 choices) or int8 kernels (every integer width; pruning does not change
  dense kernels), so a policy's latency is the measured latency of its pattern. With
  at most `exhaustive_layers` layers every pattern is measured; with more, the all-int8
  network and each single-float-layer network are measured and a pattern's latency is
  estimated as ``all_int8 + sum over its float layers of (single_float_i - all_int8)``
  (an additive model; `measured[pattern]` says which figures were measured).

  Attributes:
    layers: the parameter layers, in order.
    latency_us: `{pattern: us}`, pattern a tuple of bools (True: float layer).
    measured: `{pattern: bool}`.
  """
  layers: Tuple[str, ...]
  latency_us: Dict[Tuple[bool, ...], float]
  measured: Dict[Tuple[bool, ...], bool]

  @staticmethod
  def patterns(layers: Sequence[str], exhaustive_layers: int = 6):
    n = len(layers)
    if n <= exhaustive_layers:
      return list(itertools.product((False, True), repeat=n))
    out = [tuple([False] * n), tuple([True] * n)]
    for i in range(n):
      out.append(tuple(j == i for j in range(n)))
    return out

  @classmethod
  def build(cls, layers: Sequence[str], measure: Callable[[Tuple[bool, ...]], float],
            exhaustive_layers: int = 6) -> "LatencyTable":
    pats = cls.patterns(layers, exhaustive_layers)
    lat = {p: float(measure(p)) for p in pats}
    return cls(tuple(layers), lat, {p: True for p in pats})

  def pattern(self, policy: mixed.PrecisionPolicy) -> Tuple[bool, ...]:
    return tuple(policy.choice(n).is_float for n in self.layers)

  def __call__(self, policy: mixed.PrecisionPolicy) -> float:
    p = self.pattern(policy)
    if p not in self.latency_us:
      base = self.latency_us[tuple([False] * len(p))]
      single = [self.latency_us[tuple(j == i for j in range(len(p)))] - base
                for i in range(len(p))]
      self.latency_us[p] = base + sum(s for s, f in zip(single, p) if f)
      self.measured[p] = False
    return self.latency_us[p]


def stored_bytes_fn(cache: mixed.LayerCache) -> Callable[[mixed.PrecisionPolicy], int]:
  """policy -> stored bytes (`mixed.storage_report`), from a `mixed.LayerCache`."""
  sizes: Dict[Tuple[str, mixed.LayerChoice], int] = {}

  def size(policy: mixed.PrecisionPolicy) -> int:
    total = 0
    for name, c in policy.layers:
      if (name, c) not in sizes:
        sizes[(name, c)] = cache.layer(name, c).storage["bytes"]
      total += sizes[(name, c)]
    return total

  return size
