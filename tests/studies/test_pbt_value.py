"""studies/pbt_value.py: the figures of a population, by hand."""
import pytest

from actorq.studies import pbt_value


def _write_pbt(path, rows):
  path.mkdir()
  lines = ["member,actor_steps,learner_steps,episode_return,learning_rate,copied_from"]
  lines += [f"{m},{s},0,{r},0.001," for m, s, r in rows]
  (path / "pbt.csv").write_text("\n".join(lines) + "\n")


def test_population_figures_by_hand():
  curves = [[(5, 100.0), (10, 480.0), (15, 500.0)],   # reaches 475 at 10
            [(5, 200.0), (10, 300.0), (15, 460.0)],   # never
            [(5, 475.0), (10, 20.0), (15, 490.0)]]    # at 5 (>= counts), dips, ends above
  fig = pbt_value.population_figures(curves, target=475)
  assert fig == {"members": 3, "best_final": 500.0, "median_final": 490.0,
                 "reached_final": pytest.approx(2 / 3), "first_any": 5, "median_first": 10.0}
  # Two of four never reach: the censored median is inf -> None.
  fig = pbt_value.population_figures(curves + [[(5, 0.0)]], target=475)
  assert fig["median_first"] is None and fig["first_any"] == 5
  assert fig["median_final"] == pytest.approx((460.0 + 490.0) / 2)
  with pytest.raises(ValueError, match="at least one evaluation"):
    pbt_value.population_figures([[(5, 1.0)], []], target=1)


def test_subsets_and_summary():
  curves = [[(1, 500.0)], [(1, 100.0)], [(2, 300.0), (3, 480.0)]]
  subs = pbt_value.subset_figures(curves, 2, target=475)
  assert [s["runs"] for s in subs] == [[0, 1], [0, 2], [1, 2]]
  assert [s["best_final"] for s in subs] == [500.0, 500.0, 480.0]
  assert [s["median_final"] for s in subs] == [300.0, 490.0, 290.0]
  assert [s["first_any"] for s in subs] == [1, 1, 3]
  # [0, 1]: 1 and inf -> inf; [0, 2]: (1 + 3) / 2; [1, 2]: inf.
  assert [s["median_first"] for s in subs] == [None, 2.0, None]
  summary = pbt_value.summarize(subs)
  assert summary["best_final"] == {"mean": pytest.approx(1480 / 3), "min": 480.0, "max": 500.0,
                                   "reached": 3, "populations": 3}
  assert summary["median_first"] == {"mean": 2.0, "min": 2.0, "max": 2.0, "reached": 1,
                                     "populations": 3}
  with pytest.raises(ValueError, match=r"subset size 4 must be in \[1, 3\]"):
    pbt_value.subset_figures(curves, 4, target=475)


def test_load_pbt_groups_members_in_step_order(tmp_path):
  _write_pbt(tmp_path / "p", [(1, 10, 5.0), (0, 10, 7.0), (1, 5, 3.0), (0, 5, 1.0)])
  assert pbt_value.load_pbt(tmp_path / "p") == {0: [(5, 1.0), (10, 7.0)], 1: [(5, 3.0), (10, 5.0)]}
  md = pbt_value.markdown({"p": pbt_value.population_figures(
      list(pbt_value.load_pbt(tmp_path / "p").values()), 6.0)},
      pbt_value.subset_figures([[(5, 9.0)], [(5, 1.0)]], 2, 6.0), 6.0)
  assert "| p | 7.0 | 6.0 | 0.50 | 10 | never |" in md
  assert "| independent seeds, mean [min, max] over 1 subsets of 2 | 9.0 [9.0, 9.0]" in md
  assert pbt_value.summarize([])["best_final"] == {"mean": None, "min": None, "max": None,
                                                   "reached": 0, "populations": 0}


def test_truncate_reads_a_run_at_a_shorter_budget():
  curve = [(5, 1.0), (10, 2.0), (15, 3.0)]
  assert pbt_value.truncate(curve, 10) == [(5, 1.0), (10, 2.0)]
  assert pbt_value.truncate(curve, None) == curve
  with pytest.raises(ValueError, match="no evaluation at or before 4 actor steps"):
    pbt_value.truncate(curve, 4)
