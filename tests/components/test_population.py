"""PBT's agent-independent pieces (issue 43): ranking, truncation selection, exact member
copies and explore, with hand-computed values."""
import jax.numpy as jnp
import numpy as np
import pytest

from actorq.components import population as pop


def test_ranking_puts_nan_last_and_breaks_ties_by_index():
  assert pop.ranking([1.0, 3.0, float("nan"), 3.0, -2.0]) == [1, 3, 0, 4, 2]


def test_truncation_selection_bottom_copies_top():
  rng = np.random.default_rng(0)
  fitness = [10.0, 50.0, 20.0, 40.0, 30.0, 0.0, 60.0, 5.0]
  # N = 8, quantile 0.25 -> 2 each: top = [6, 1], bottom worst first = [5, 7].
  losers, winners = pop.truncation_selection(fitness, 0.25, rng)
  assert losers == [5, 7]
  assert set(winners) <= {6, 1}
  # N = 2: one each, whatever the quantile up to 0.5.
  assert pop.truncation_selection([1.0, 2.0], 0.5, rng) == ([0], [1])
  assert pop.quantile_size(4, 0.25) == 1 and pop.quantile_size(16, 0.25) == 4
  with pytest.raises(ValueError, match="at least 2 members"):
    pop.quantile_size(1, 0.25)
  with pytest.raises(ValueError, match=r"\(0, 0.5\]"):
    pop.quantile_size(4, 0.75)


def test_copy_member_is_exact_and_leaves_the_others():
  state = {"w": jnp.arange(12.0).reshape(3, 4), "count": jnp.array([1, 2, 3], jnp.int32)}
  out = pop.copy_member(state, source=2, target=0)
  np.testing.assert_array_equal(out["w"], [[8, 9, 10, 11], [4, 5, 6, 7], [8, 9, 10, 11]])
  np.testing.assert_array_equal(out["count"], [3, 2, 3])
  stacked = pop.stack([pop.member(state, i) for i in range(3)])
  np.testing.assert_array_equal(stacked["w"], state["w"])


def test_explore_perturbs_by_the_paper_factors_or_resamples_in_range():
  space = pop.Hyperparameter(1e-4, 1e-2, log=True)
  rng = np.random.default_rng(1)
  values = [pop.explore(space, 1e-3, rng, resample_probability=0.0) for _ in range(50)]
  assert set(np.round(values, 12)) == {0.0008, 0.0012}
  assert pop.explore(space, 9e-3, np.random.default_rng(0), 0.0) in (9e-3 * 0.8, 1e-2)
  resampled = [pop.explore(space, 1e-3, rng, resample_probability=1.0) for _ in range(50)]
  assert all(1e-4 <= v <= 1e-2 for v in resampled) and len(set(resampled)) == 50
  with pytest.raises(ValueError, match="low < high"):
    pop.Hyperparameter(1.0, 1.0)
