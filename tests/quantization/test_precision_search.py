"""The greedy per-layer precision search (quantization/precision_search.py) on hand-made
cases: a fake latency model, hand-set layer sensitivities, known answers."""
import numpy as np
import pytest

from actorq.quantization import mixed
from actorq.quantization import network_spec as ns
from actorq.quantization import precision_search as ps

C = mixed.parse_choice
LAYERS = ("a", "b", "c")
WEIGHTS = {"a": 100, "b": 1000, "c": 100}
# Score lost per layer and choice: "a" is sensitive, "b" is not, "c" in between.
PENALTY = {"a": {"int8": 0.001, "int4": 0.2, "int2": 0.5},
           "b": {"int8": 0.0, "int4": 0.001, "int2": 0.002},
           "c": {"int8": 0.0, "int4": 0.01, "int2": 0.3}}


def fake_latency(policy):
  """10 us per float layer, 1 us per integer layer (any width)."""
  return sum(10.0 if c.is_float else 1.0 for c in policy.choices)


def fake_size(policy):
  return sum(WEIGHTS[n] * c.bits // 8 for n, c in policy.layers)


def fake_score(policy):
  lost = sum(PENALTY[n].get(c.label, 0.0) for n, c in policy.layers)
  return ps.Score(1.0 - lost, 1.0 - lost, lost)


def start():
  return mixed.PrecisionPolicy(tuple((n, C("fp32")) for n in LAYERS))


def test_meets_latency_and_size_budgets_with_the_expected_choices():
  """All layers must be integer (latency <= 3.5 us) and fit 420 bytes: the best such
  policy keeps the sensitive layer at int8, the insensitive one at int2, "c" at int4."""
  calls = []
  result = ps.greedy_search(start(), [C(t) for t in ("fp32", "int8", "int4", "int2")],
                            lambda p: calls.append(p) or fake_score(p), fake_latency,
                            fake_size, latency_budget_us=3.5, size_budget_bytes=420)
  assert [c.label for c in result.policy.choices] == ["int8", "int2", "int4"]
  assert result.meets_budget and result.latency_us == 3.0 and result.stored_bytes == 400
  assert result.score.score == pytest.approx(1 - 0.013)
  assert len(calls) == len(set(calls))  # each distinct policy evaluated once
  accepted = [(t.layer, t.to_choice) for t in result.trials if t.accepted and t.phase == "descend"]
  assert accepted == [("b", "int8"), ("c", "int8"), ("a", "int8"), ("b", "int4"),
                      ("b", "int2"), ("c", "int4")]
  assert result.trials[-1].phase == "final" and result.trials[-1].violation == 0
  for name in LAYERS:
    label = result.policy.choice(name).label
    assert result.explanations[name].startswith(f"{label}:")
  assert "int8 would score +0.0100 but breaks the budget (450 B > budget 420 B)" in \
      result.explanations["c"]
  assert set(ps.TRIAL_COLUMNS) == set(vars(result.trials[0]))


def test_latency_only_budget_keeps_the_sensitive_layer_in_float():
  score = lambda p: ps.Score(1.0 - sum(
      (0.05 if n == "a" else 0.001) for n, c in p.layers if not c.is_float))
  result = ps.greedy_search(start(), [C("fp32"), C("int8")], score, fake_latency, fake_size,
                            latency_budget_us=12.5)
  assert [c.label for c in result.policy.choices] == ["fp32", "int8", "int8"]
  assert result.meets_budget and result.latency_us == 12.0


def test_recover_phase_takes_back_an_unneeded_downgrade():
  """Descending first takes a -> int4 (least score lost per unit of violation), then
  b -> int2 (here b's int4 is worse than its int2), which overshoots the 1300-byte budget
  enough for a to go back to int8: the recover phase does that."""
  weights = {"a": 1000, "b": 1000}
  size = lambda p: sum(weights[n] * c.bits // 8 for n, c in p.layers)
  pen = {"a": {"int4": 0.001, "int2": 0.1}, "b": {"int4": 0.01, "int2": 0.002}}
  score = lambda p: ps.Score(1.0 - sum(pen[n].get(c.label, 0.0) for n, c in p.layers))
  begin = mixed.PrecisionPolicy((("a", C("int8")), ("b", C("int8"))))
  result = ps.greedy_search(begin, [C("int8"), C("int4"), C("int2")], score, lambda p: 1.0,
                            size, size_budget_bytes=1300)
  moves = [(t.phase, t.layer, t.to_choice) for t in result.trials if t.accepted and t.layer]
  assert moves == [("descend", "a", "int4"), ("descend", "b", "int2"), ("recover", "a", "int8")]
  assert [c.label for c in result.policy.choices] == ["int8", "int2"]
  assert result.meets_budget and result.stored_bytes == 1250


def test_infeasible_budget_returns_the_closest_policy():
  result = ps.greedy_search(start(), [C("fp32"), C("int8")], fake_score, fake_latency,
                            fake_size, latency_budget_us=2.0)
  assert not result.meets_budget
  assert [c.label for c in result.policy.choices] == ["int8", "int8", "int8"]
  assert result.trials[-1].violation == pytest.approx(3.0 / 2.0 - 1.0)


def test_bad_arguments():
  with pytest.raises(ValueError, match="needs a latency budget"):
    ps.greedy_search(start(), [C("int8")], fake_score, fake_latency, fake_size)
  with pytest.raises(ValueError, match="latency budget must be"):
    ps.greedy_search(start(), [C("int8")], fake_score, fake_latency, fake_size, -1.0)


def test_latency_table_exhaustive_and_additive():
  measured = []

  def measure(pattern):
    measured.append(pattern)
    return 5.0 + 10.0 * sum(pattern) + (3.0 if all(pattern) else 0.0)

  small = ps.LatencyTable.build(["x", "y"], measure)
  assert len(measured) == 4 and all(small.measured.values())
  p = mixed.PrecisionPolicy((("x", C("fp16")), ("y", C("int2+p0.9"))))
  assert small(p) == 15.0
  assert small(mixed.PrecisionPolicy((("x", C("fp32")), ("y", C("fp32"))))) == 28.0
  measured.clear()
  names = [f"l{i}" for i in range(8)]
  big = ps.LatencyTable.build(names, measure, exhaustive_layers=6)
  assert len(measured) == 2 + 8  # all-int8, all-float, one float layer at a time
  two = mixed.PrecisionPolicy(tuple((n, C("fp32") if i < 2 else C("int8"))
                                    for i, n in enumerate(names)))
  assert big(two) == 5.0 + 10.0 + 10.0 and big.measured[big.pattern(two)] is False


def test_stored_bytes_fn_matches_storage_report():
  spec = ns.mlp(4, [8], 2)
  rng = np.random.default_rng(0)
  params = {"dense_0": {"w": rng.normal(size=(4, 8)).astype(np.float32),
                        "b": np.zeros(8, np.float32)},
            "dense_1": {"w": rng.normal(size=(8, 2)).astype(np.float32),
                        "b": np.zeros(2, np.float32)}}
  policy = mixed.PrecisionPolicy((("dense_0", C("int3+p0.5")), ("dense_1", C("fp16"))))
  want = mixed.storage_report(mixed.compress(params, spec, policy))["bytes"]
  assert ps.stored_bytes_fn(mixed.LayerCache(params, spec))(policy) == want
