"""Actor-side policy runtimes: `make_runtime(precision, spec)` and `choose_runtime`.

| precision | backend | payload shipped |
|---|---|---|
| "fp32", "fp16", "bf16" | jax.jit of `forward.forward` | same precision |
| "simulated-int8" | dequantize, jax fp32 (ACCURACY STUDIES ONLY, not fast) | "simulated-int8"/"int8" |
| "int8" | LiteRT/XNNPACK dynamic-range int8, patched flatbuffer | "int8" |
| "litert-fp32" | LiteRT/XNNPACK float32 kernels, the int8 path (int8's placebo) | fp32 arrays |
| "mixed" (`make_mixed_runtime`) | LiteRT: int8 / float32 kernels per layer | `mixed.make_payload` |
| "mixed:<choice>,..." (the family row "mixed:": a per-layer policy by name) | the same | the same |

The uniform precisions are one table, `RUNTIMES` (precision -> `PrecisionEntry(runtime
class, payload encoder)`): `make_runtime` builds the row's class
(`PolicyRuntime.for_precision`), `make_payload` encodes with the row's encoder (what the
learner's `PolicyServer` ships for ``policy/<precision>``). A new precision/runtime is one
`PolicyRuntime` subclass plus one entry (`register_precision`;
docs/guides/add-a-precision.md). ``"mixed:..."`` names are one family row (``"mixed:"``,
`PrecisionEntry.family`): each names its per-layer policy (`actorq.quantization.mixed`),
which the row's runtime (`LiteRTMixedRuntime.for_precision`) and encoder
(`LiteRTMixedRuntime.encode`) read.

Every question about a precision name is asked of the table, which asks the row's class
(`PolicyRuntime.check_name`, `check_fits`, `part_precision`; a uniform row answers with the
defaults): `check_precision` (is it a precision?), `check_name`, `check_fits`,
`precision_slug` (a file name), `parse_precision` and `precision_help` (an acting
precision given as text, e.g. a flag's: `actorq.cli.precision_arg`). So nothing above
this table branches on a family, and a new family is one class plus one entry.

A `network_spec.RecurrentSpec` (R2D2's LSTM Q-network) runs in `make_runtime`'s
`recurrent.RecurrentRuntime`: its torso, LSTM gate matmul and head at the precision
above (a ``"mixed:..."`` name: each part under its own layers' labels), the LSTM cell's
elementwise update and its state in float32 numpy.
"""
from __future__ import annotations

import collections.abc
import dataclasses
import hashlib
import os
import time
import warnings
from typing import Any, Callable, Dict, Optional, Tuple, Type

import numpy as np

from actorq import core
from actorq.quantization import mixed
from actorq.quantization import network_spec as ns
from actorq.quantization import payload as pl
from actorq.quantization.runtimes.base import PolicyRuntime
from actorq.quantization.runtimes.jax_runtime import JaxRuntime, SimulatedInt8Runtime
from actorq.quantization.runtimes.litert_runtime import (
    LiteRTFloatRuntime, LiteRTInt8Runtime, LiteRTMixedRuntime, encode_litert_fp32)
from actorq.quantization.runtimes.recurrent import RecurrentRuntime

RUNTIME_PRECISIONS = core.PRECISIONS  # the built-in rows of `RUNTIMES`, in order


@dataclasses.dataclass(frozen=True)
class PrecisionEntry:
  """One row of `RUNTIMES`: how a precision is executed and shipped.

  Attributes:
    runtime: the `PolicyRuntime` subclass executing it, built as
      ``runtime.for_precision(precision, spec, num_threads)``; its `payload_precision`
      names the payload it pulls (a row of this table) and `accepted_payloads` what its
      `load` takes.
    encode: the learner-side encoder of the payload:
      ``encode(params, spec, precision, version, per_channel) -> payload.Payload`` (params
      `{layer: {"w", "b"}}` float arrays matching `spec`; raises ValueError naming the layer
      for params that do not fit). Called once per parameter version (`PolicyServer`).
    acting: whether actors and evaluators may act with it (an agent config's
      `actor_precision`, `ExperimentConfig.actor_precision`: `ACTING_PRECISIONS`); False
      for a precision meant for studies only (``simulated-int8``).
    family: the row's key is a prefix naming a family of precisions, ``<key><parameter>``
      (``"mixed:"``: ``"mixed:<choice>,..."``, a per-layer policy by name); its runtime's
      `for_precision` and its encoder read the parameter from the whole name. A family
      is not itself a precision (`precisions`, `ACTING_PRECISIONS` leave it out). Its
      runtime class answers the table's questions about a name (`check_name`,
      `check_fits`, `part_precision`: `PolicyRuntime`'s defaults say a uniform precision
      has nothing to check or split).
    form: a family's names in one line, for the messages that list what is allowed
      (``"mixed:<choice>,... (one per layer, e.g. mixed:fp16,int8,int8)"``).
    help: a family's names as a command-line flag describes them (`precision_help`).
  """
  runtime: Type[PolicyRuntime]
  encode: Callable[..., pl.Payload]
  acting: bool = True
  family: bool = False
  form: str = ""
  help: str = ""


# The table: precision -> (runtime class, payload encoder), in `core.PRECISIONS`' order,
# then the families of precisions (keyed by their prefix).
RUNTIMES: Dict[str, PrecisionEntry] = {
    core.FP32: PrecisionEntry(JaxRuntime, pl.make_payload),
    core.FP16: PrecisionEntry(JaxRuntime, pl.make_payload),
    core.BF16: PrecisionEntry(JaxRuntime, pl.make_payload),
    core.INT8: PrecisionEntry(LiteRTInt8Runtime, pl.make_payload),
    core.LITERT_FP32: PrecisionEntry(LiteRTFloatRuntime, encode_litert_fp32),
    core.SIMULATED_INT8: PrecisionEntry(SimulatedInt8Runtime, pl.make_payload, acting=False),
    mixed.MIXED_PREFIX: PrecisionEntry(LiteRTMixedRuntime, LiteRTMixedRuntime.encode,
                                       family=True, form=mixed.MIXED_FORM,
                                       help=mixed.MIXED_HELP),
}


def family_of(precision: Any):
  """The key of the family row `precision` belongs to (``"mixed:"`` for
  ``"mixed:<choice>,..."``: the prefix and at least one character more), or None."""
  if not isinstance(precision, str):
    return None
  for key, entry in RUNTIMES.items():
    if entry.family and precision.startswith(key) and precision[len(key):].strip():
      return key
  return None


class PrecisionNames(collections.abc.Sequence):
  """The names of `RUNTIMES` (only its acting rows with `acting=True`), read from the table
  at every use: a check declared at import time (an agent config's `actor_precision`
  choices, `config_checks.precision_field`) accepts a precision registered later."""

  def __init__(self, acting: bool):
    self._acting = acting

  def _names(self) -> Tuple[str, ...]:
    return tuple(p for p, e in RUNTIMES.items()
                 if not e.family and (e.acting or not self._acting))

  def __getitem__(self, index):
    return self._names()[index]

  def __len__(self) -> int:
    return len(self._names())

  def __contains__(self, value) -> bool:
    return value in self._names()

  def __eq__(self, other) -> bool:
    return tuple(self) == (tuple(other) if isinstance(other, collections.abc.Sequence)
                           and not isinstance(other, str) else other)

  def __hash__(self) -> int:
    return hash((type(self), self._acting))

  def __repr__(self) -> str:
    return repr(self._names())


# What actors may act with: `core.ACTOR_PRECISIONS` and the acting precisions registered
# since (a live view of the table).
ACTING_PRECISIONS = PrecisionNames(acting=True)


def register_precision(name: str, entry: PrecisionEntry) -> None:
  """Adds precision `name`: `make_runtime(name, spec)` builds `entry.runtime`, and
  `make_payload(..., name, ...)` (so a `PolicyServer`'s ``policy/<name>``) uses
  `entry.encode`.

  Raises:
    ValueError: `name` is empty, has whitespace or ``,``, starts with ``mixed:``, or is
      already registered; `entry` is not a `PrecisionEntry` of a `PolicyRuntime` subclass.
  """
  families = [k for k, e in RUNTIMES.items() if e.family]
  if (not isinstance(name, str) or not name or name.split() != [name] or "," in name
      or any(name.startswith(k) for k in families)):
    raise ValueError(f"a precision name must be one word without ',' that does not start "
                     f"with {', '.join(map(repr, families))}, got {name!r}")
  if name in RUNTIMES:
    raise ValueError(f"precision {name!r} is already registered")
  if not (isinstance(entry, PrecisionEntry) and isinstance(entry.runtime, type)
          and issubclass(entry.runtime, PolicyRuntime) and callable(entry.encode)):
    raise ValueError(f"precision {name!r}: the entry must be a PrecisionEntry of a "
                     f"PolicyRuntime subclass and an encoder, got {entry!r}")
  RUNTIMES[name] = entry


def precisions() -> Tuple[str, ...]:
  """Every precision a runtime exists for: the built-in `RUNTIME_PRECISIONS` and those
  registered since."""
  return tuple(p for p, e in RUNTIMES.items() if not e.family)


def entry_for(precision: str) -> PrecisionEntry:
  """The `RUNTIMES` row of `precision`: its own, or its family's (`family_of`).

  Raises:
    ValueError: an unknown precision (the message lists the known ones).
  """
  family = family_of(precision)
  if family is not None:
    return RUNTIMES[family]
  entry = RUNTIMES.get(precision) if isinstance(precision, str) else None
  if entry is None or entry.family:
    raise ValueError(f"precision {precision!r} unknown; allowed: {precisions()}")
  return entry


def family_forms() -> Tuple[str, ...]:
  """The `PrecisionEntry.form` of every family row (what a message lists after the
  uniform precisions)."""
  return tuple(e.form for e in RUNTIMES.values() if e.family)


def check_precision(value: Any, name: str = "actor_precision", acting: bool = True,
                    optional: bool = False) -> Any:
  """Returns `value` if it names a row of the table: one of `ACTING_PRECISIONS` (every
  uniform precision, `precisions()`, when not `acting`), a family's name (`family_of`;
  its parameter is not parsed here: `check_name`), or None when `optional`.

  Raises:
    ValueError: one line naming the field, the value and what is allowed, e.g.
      ``actor_precision must be one of fp32, ..., litert-fp32 or mixed:<choice>,... (one
      per layer, e.g. mixed:fp16,int8,int8); got 'int4'`` (`core.check_precision`).
  """
  if family_of(value) is not None:
    return value
  return core.check_precision(value, name, ACTING_PRECISIONS if acting else precisions(),
                              optional, also=family_forms())


def check_name(precision: str) -> None:
  """Checks a precision name without a network: a family's parameter must parse (the
  row's `PolicyRuntime.check_name`, e.g. a ``"mixed:..."`` name's labels).

  Raises:
    ValueError: an unknown precision, or the row's one-line refusal.
  """
  entry_for(precision).runtime.check_name(precision)


def check_fits(precision: str, spec: ns.NetworkSpec, policy_file: Optional[str] = None,
               what: Optional[str] = None) -> None:
  """Checks `precision` against the network `spec` (the row's `PolicyRuntime.check_fits`:
  a per-layer policy's layer count) and the precision policy file it was read from, if any
  (its layers' `w_shape`s against `spec`, `mixed.load`). A uniform precision fits.

  Raises:
    ValueError: one line; prefixed by ``"<what> <policy_file or precision>: "`` when `what`
      (a flag, e.g. ``--actor-precision``) is given.
  """
  try:
    entry_for(precision).runtime.check_fits(precision, spec)
    if policy_file is not None:
      mixed.load(policy_file, spec)
  except ValueError as e:
    if what is None:
      raise
    raise ValueError(f"{what} {policy_file or precision}: {e}") from None


def precision_slug(precision: str) -> str:
  """`precision` as a file or directory name: itself for a uniform precision; a family's
  name, which may hold any character (a ``"mixed:..."`` one has ':' and ','), becomes
  ``<family>-<first 8 hex digits of its SHA-1>`` (e.g. the sweep's run
  ``mixed-1a2b3c4d-s0``, the export ``policy-mixed-1a2b3c4d.tflite``). The file's own
  metadata keeps the whole name."""
  family = family_of(precision)
  if family is None:
    return precision
  return (family.rstrip(":") + "-"
          + hashlib.sha1(precision.encode("utf-8")).hexdigest()[:8])


def precision_help() -> str:
  """What an acting-precision flag (`actorq train --actor-precision`, `actorq eval
  --precision`) takes, in words: the uniform actor precisions and each family's
  `PrecisionEntry.help`."""
  return ", ".join(core.ACTOR_PRECISIONS + family_helps())


def family_helps() -> Tuple[str, ...]:
  """The `PrecisionEntry.help` of every family row."""
  return tuple(e.help for e in RUNTIMES.values() if e.family)


def is_policy_file(text: str) -> bool:
  """Whether `text` names a precision policy file (``*.json`` or an existing file), read
  as a per-layer policy's name by `parse_precision`."""
  return text.endswith(".json") or os.path.isfile(text)


def parse_precision(text: Optional[str], what: str = "precision"
                    ) -> Tuple[Optional[str], Optional[str]]:
  """An acting precision given as text (a flag's or a study's value) as
  `(precision, policy_file)`.

  `text` is one of `ACTING_PRECISIONS` (policy_file None), a family's name (its parameter
  checked: `check_name`), or the path of a precision policy file (read with `mixed.load`;
  the precision is its `mixed.precision_name`, the file is returned so the caller can
  check its layer shapes against the network: `check_fits`). None gives `(None, None)`.

  Raises:
    ValueError: anything else, or a policy file that cannot be read or is not one; one
      line starting with `what` (e.g. the flag ``--actor-precision``), naming the value
      and what is allowed (`precision_help`).
  """
  if text is None or text in ACTING_PRECISIONS:
    return text, None
  if family_of(text) is not None:
    try:
      check_name(text)
    except ValueError as e:
      raise ValueError(f"{what}: {e}") from None
    return text, None
  if is_policy_file(text):
    try:
      return mixed.precision_name(mixed.load(text)), text
    except ValueError as e:
      raise ValueError(f"{what} {text}: {e}") from None
  raise ValueError(f"{what} {text!r} not allowed; allowed: {precision_help()}"
                   f"{uniform_hint(text)}")


def parse_precisions(text: str, what: str = "precisions") -> Tuple[str, ...]:
  """A list of acting precisions given as text (`actorq sweep --precisions`), one precision
  string per item.

  Items are separated by ``;`` when `text` has one, else by ``,`` (``fp32,int8``). An item is
  one of `ACTING_PRECISIONS`, a family's name (``"mixed:<choice>,..."``) or a precision
  policy file, read as `parse_precision` reads it and returned as its ``mixed:`` name (so
  runs name the policy itself, not the path). A single family name or policy file needs no
  ``;``: ``"fp32;mixed:fp16,int8,int8"`` or ``"policy.json"``.

  Raises:
    ValueError: no items, an item `parse_precision` refuses, a family name cut by commas
      (the message says to separate with ``;``), or the same precision twice; one line
      starting with `what`.
  """
  text = text.strip()
  family = lambda t: family_of(t) is not None
  if ";" in text:
    items = [t.strip() for t in text.split(";")]
  elif family(text) or is_policy_file(text):
    items = [text]
  else:
    items = [t.strip() for t in text.split(",")]
    if any(family(t) for t in items):
      raise ValueError(f"{what} {text!r}: a mixed:<choice>,... name has commas of its "
                       "own; separate the precisions with ';' (e.g. "
                       "'fp32;mixed:fp16,int8,int8')")
  items = [t for t in items if t]
  if not items:
    raise ValueError(f"{what} {text!r}: no precisions; allowed: {precision_help()}")
  names = []
  for item in items:
    if not (item in ACTING_PRECISIONS or family(item) or is_policy_file(item)):
      raise ValueError(f"{what} {text!r}: allowed precisions are "
                       f"{', '.join(ACTING_PRECISIONS)}, a precision policy file or "
                       "a mixed:<choice>,... name (separated by ';')"
                       f"{uniform_hint(item)}")
    names.append(parse_precision(item, what)[0])
  if len(set(names)) != len(names):
    raise ValueError(f"{what} {text!r} repeats a precision")
  return tuple(names)


def uniform_hint(text: str) -> str:
  """For a layer choice that is not a uniform actor precision (``int4``, ``int8+p0.5``):
  how to ask for it on every layer (a ``mixed:`` name with one label per layer, since the
  layer count is the network's); else ''."""
  try:
    label = mixed.parse_choice(text).label
  except ValueError:
    return ""
  return (f" ({label} on every layer is the per-layer policy mixed:{label},{label},...: "
          "one label per parameter layer of the policy network)")


def make_payload(params, spec: ns.NetworkSpec, precision: str, version: int = 0,
                 per_channel: bool = True) -> pl.Payload:
  """`params` encoded for `make_runtime(precision, spec)`: the table row's encoder
  (`payload.make_payload` for the built-in precisions), or `mixed.make_payload` of the
  policy a ``"mixed:<choice>,..."`` precision names (`per_channel` does not apply: each
  layer's label says).

  Raises:
    ValueError: an unknown precision or params/policy that do not fit `spec`.
  """
  return entry_for(precision).encode(params, spec, precision, int(version), per_channel)


def make_runtime(precision: str, spec: ns.NetworkSpec, num_threads: int = 1) -> PolicyRuntime:
  """A runtime executing `spec` at `precision`; feed it `make_payload(...,
  runtime.payload_precision, ...)` through `load`. A `RecurrentSpec` gets a
  `RecurrentRuntime` (stateful: `step(observation, state)`). A ``"mixed:<choice>,..."``
  precision (`mixed.precision_name`) gets the `LiteRTMixedRuntime` of that per-layer
  policy, whose `payload_precision` is the name itself (so a `PolicyServer` knows which
  policy to publish) and which loads `mixed.make_payload` payloads.

  Raises:
    ValueError: an unknown precision, or a ``"mixed:..."`` one `mixed.policy_of` refuses
      for `spec` (bad labels, another layer count than the spec's parameter layers).
  """
  if isinstance(spec, ns.RecurrentSpec):
    check_precision(precision, "precision", acting=False)
    return RecurrentRuntime(precision, spec, make_runtime, num_threads,
                            row=entry_for(precision).runtime)
  return entry_for(precision).runtime.for_precision(precision, spec, num_threads)


def make_mixed_runtime(policy, spec: ns.NetworkSpec, num_threads: int = 1) -> PolicyRuntime:
  """The LiteRT runtime executing a per-layer `mixed.PrecisionPolicy` (float layers with
  float32 kernels, integer layers of any width with int8 kernels); feed it
  `mixed.make_payload(params, spec, policy, version)`.

  Raises:
    ValueError: a policy for other layers than the spec's.
  """
  policy.check_against(spec)
  return LiteRTMixedRuntime(spec, policy.float_layers, num_threads)


def median_call_us(fn: Callable[[int], Any], repeats: int = 50, warmup: int = 5) -> float:
  """Median wall time of `fn(i)` over the calls i = 0..repeats-1, in microseconds, after
  `warmup` untimed calls `fn(0)` (`fn` may vary its input with the call's index i)."""
  for _ in range(warmup):
    fn(0)
  times = []
  for i in range(repeats):
    t0 = time.perf_counter()
    fn(i)
    times.append(time.perf_counter() - t0)
  return float(np.median(times) * 1e6)


def median_latency_us(runtime: PolicyRuntime, observation: np.ndarray,
                      repeats: int = 50, warmup: int = 5) -> float:
  """Median wall time of `runtime(observation)` in microseconds (`median_call_us`)."""
  return median_call_us(lambda i: runtime(observation), repeats, warmup)


_WARNED = set()


def choose_runtime(spec: ns.NetworkSpec, batch_size: int = 1, precision: str = "int8",
                   baseline: str = "fp32", num_threads: int = 1, params=None,
                   repeats: int = 30) -> Tuple[str, Dict[str, float]]:
  """Measures `precision` against `baseline` for this spec and batch size (case Q4).

  Returns `(chosen_precision, {"<precision>_us", "<baseline>_us", "ratio"})`, where
  ratio = precision latency / baseline latency. If the low-precision path is slower,
  warns ONCE per (spec, batch size, precision) and chooses the baseline: a slower
  low-precision path is never chosen silently.
  """
  if params is None:
    rng = np.random.default_rng(0)
    params = {n: {k: rng.normal(0, 0.1, s).astype(np.float32) for k, s in shp.items()}
              for n, shp in pl.expected_shapes(spec).items()}
  obs = np.random.default_rng(1).normal(
      size=(batch_size,) + tuple(spec.input_shape)).astype(np.float32)
  lat = {}
  for prec in (precision, baseline):
    rt = make_runtime(prec, spec, num_threads)
    rt.load(make_payload(params, spec, rt.payload_precision, 0))
    lat[prec] = median_latency_us(rt, obs, repeats)
  ratio = lat[precision] / lat[baseline]
  info = {f"{precision}_us": lat[precision], f"{baseline}_us": lat[baseline], "ratio": ratio}
  if ratio > 1.0:
    key = (spec, batch_size, precision, baseline)
    if key not in _WARNED:
      _WARNED.add(key)
      warnings.warn(
          f"{precision} runtime is slower than {baseline} for this network at batch "
          f"{batch_size} ({lat[precision]:.1f} us vs {lat[baseline]:.1f} us, ratio "
          f"{ratio:.2f}); using {baseline}", RuntimeWarning, stacklevel=2)
    return baseline, info
  return precision, info


__all__ = ["PolicyRuntime", "RecurrentRuntime", "make_runtime", "make_mixed_runtime",
           "choose_runtime",
           "median_call_us", "median_latency_us",
           "ACTING_PRECISIONS", "PrecisionEntry", "PrecisionNames", "RUNTIMES",
           "RUNTIME_PRECISIONS", "check_fits", "check_name", "check_precision", "entry_for",
           "family_forms", "family_of", "make_payload", "parse_precision", "parse_precisions",
           "precision_help", "precision_slug", "precisions", "register_precision"]
