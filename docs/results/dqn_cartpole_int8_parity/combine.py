"""The four arms of issue 53's DQN CartPole parity experiment in one table (table.md,
aggregate.json), from the two sweeps' recorded runs (`actorq sweep --record`), whatever seeds each arm has:

  main/runs/<run>/               fp32, litert-fp32 (the runtime-path placebo),
                                 mixed:fp16,fp16,fp16 (fp16 weights on the same LiteRT path:
                                 the perturbation placebo), int8 (the default)
  advantage_learning/runs/<run>/ int8 actors, td_operator=advantage_learning

paired by seed with main's fp32 arm, verdicts at the margin both sweeps declared (50,
their protocol.json), the 2x2 of each run's final policy at fp32 and at its own precision.
Also the same verdict for the committed 10-seed sweep of 2026-12-06
(../dqn_cartpole_paired_10seeds_bias_corrected/seeds.csv), which had none.

    python docs/results/dqn_cartpole_int8_parity/combine.py
"""
import json
import os

from actorq.components import aggregate as ag
from actorq.studies import cross_eval
from actorq.studies import sweep
from actorq.studies import tables

HERE = os.path.dirname(os.path.abspath(__file__))
AL = "int8 + advantage_learning"
ARMS = ("fp32", "litert-fp32", "mixed:fp16,fp16,fp16", "int8", AL)


def recorded_runs(folder, rename=None):
  """The runs a sweep's record holds (FOLDER/runs/<run>/: run.json, eval.csv,
  final_eval.json) as `sweep.seed_rows` rows, whatever seeds and arms they are."""
  out = []
  base = os.path.join(HERE, folder, "runs")
  for name in sorted(os.listdir(base)) if os.path.isdir(base) else []:
    with open(os.path.join(base, name, "run.json"), encoding="utf-8") as f:
      info = json.load(f)
    precision = info["config"]["actor_precision"]
    out.append({"precision": rename or precision, "seed": int(info["seed"]), "run_dir": name,
                "evaluations": sweep.read_evaluations(os.path.join(base, name)),
                "final_eval": cross_eval.read(os.path.join(base, name))})
  return out


def rows():
  # The advantage-learning arm is renamed after `seed_rows`, which reads each run's 2x2
  # evaluation at the run's own precision (int8) from its final_eval.json.
  al = sweep.seed_rows(recorded_runs("advantage_learning"), 475.0)
  for r in al:
    r["precision"] = AL
  order = {p: i for i, p in enumerate(ARMS)}
  return sorted(sweep.seed_rows(recorded_runs("main"), 475.0) + al,
                key=lambda r: (order.get(r["precision"], 99), r["seed"]))


def margin():
  with open(os.path.join(HERE, "main", sweep.PROTOCOL_JSON), encoding="utf-8") as f:
    return json.load(f)["margin"]


def verdict_table(result):
  header = ["arm", "seeds", "final IQM [95% CI]", "P(X > fp32), final [95% CI]",
            f"final: verdict at margin {result['margin']:g} (90% paired t)", "last-3: verdict",
            "pairs needed at the measured sd"]
  out = []
  for p, e in result["precisions"].items():
    c = result["comparisons"].get(p)
    cells = ["(reference)"] * 4 if c is None else [
        sweep._ci_cell(c["final_return"]["probability_of_improvement"], 2),  # pylint: disable=protected-access
        sweep._verdict_cell(c["final_return"]["tost"]),  # pylint: disable=protected-access
        sweep._verdict_cell(c["last3_return"]["tost"]),  # pylint: disable=protected-access
        str(c["final_return"]["tost"].get("pairs_needed", "-"))]
    out.append([p, str(e["n"]), sweep._ci_cell(e["final_return"]["iqm"])] + cells)  # pylint: disable=protected-access
  return tables.markdown_table(header, out)


def main():
  m = margin()
  all_rows = rows()
  result = ag.aggregate(all_rows, target=475.0, reference="fp32", margin=m)
  cross = [r for r in all_rows if all(r[k] == r[k] for k in sweep.CROSS_METRICS)]
  if cross:
    result["cross_precision"] = sweep.cross_precision(cross, "fp32", m)
  text = "## Verdicts against fp32\n\n" + verdict_table(result)
  if cross:
    text += "\n\n## The 2x2\n\n" + sweep.format_cross_table(result["cross_precision"])
  old = sweep.read_seeds_csv(os.path.join(
      HERE, "..", "dqn_cartpole_paired_10seeds_bias_corrected", "seeds.csv"))
  old_result = ag.aggregate(old, target=475.0, reference="fp32", margin=m)
  result["earlier_10_seeds_bias_corrected"] = old_result["comparisons"]
  text += ("\n\n## The committed 10 seeds of 2026-12-06 under the same protocol\n\n"
           + verdict_table(old_result))
  with open(os.path.join(HERE, "aggregate.json"), "w", encoding="utf-8") as f:
    json.dump(result, f, indent=1)
  with open(os.path.join(HERE, "table.md"), "w", encoding="utf-8") as f:
    f.write(text + "\n")
  print(text)


if __name__ == "__main__":
  main()
