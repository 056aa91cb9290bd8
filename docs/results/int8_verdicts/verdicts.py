"""Parity verdicts (issue 53) for every row of the README's results table, from each row's
committed per-seed finals (its folder's seeds.csv), by one rule for all rows.

The rule, fixed on 2026-12-07 and applied to every row alike (issue 53's 50 for CartPole is
10% of its range): the equivalence margin is 10% of the environment's episode-return range
  gym/gymnax CartPole-v1 (and -po)  [0, 500]      -> 50 (the margin issue 53 declared)
  dmc: (DeepMind Control)           [0, 1000]     -> 100
  gym:Pendulum-v1                   [-3254, 0]    -> 325 (200 steps of reward in [-16.27, 0])
and the verdict is that of two one-sided paired t-tests at alpha 0.05 (the 90% paired t
interval of arm - fp32: `actorq.components.aggregate.tost`, as `actorq sweep --margin` writes).
The runs and their 95% bootstrap intervals were published before the rule (2026-12-01 to
-07): these verdicts are post hoc, which is why each row's folder keeps its own table.

    .venv/bin/python docs/results/int8_verdicts/verdicts.py   # writes table.md, verdicts.json
"""
import csv
import json
import os

from actorq.components import atomic
from actorq.components import aggregate

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.dirname(HERE)
MARGINS = {"cartpole": 50.0, "dmc": 100.0, "pendulum": 325.0}

# (results folder, what the README row calls it, environment, margin key)
ROWS = (
    ("dqn_cartpole_paired_10seeds_bias_corrected", "DQN, int8 bias-corrected (the default)",
     "gym:CartPole-v1, 100k", "cartpole"),
    ("dqn_cartpole_paired_10seeds", "DQN", "gym:CartPole-v1, 100k", "cartpole"),
    ("r2d2_cartpole_po_200k_paired", "R2D2", "gym:CartPole-v1-po, 200k", "cartpole"),
    ("r2d2_cartpole_po_200k_float_head_paired", "R2D2, int8 with a float32 head",
     "gym:CartPole-v1-po, 200k", "cartpole"),
    ("d4pg_cartpole_balance_paired", "D4PG", "dmc:cartpole-balance, 30k", "dmc"),
    ("ddpg_cartpole_balance_paired", "DDPG", "dmc:cartpole-balance, 60k", "dmc"),
    ("td3_pendulum_paired", "TD3", "gym:Pendulum-v1, 20k", "pendulum"),
    ("td3_cartpole_swingup_penalty_paired", "TD3, preactivation_penalty=0.1",
     "dmc:cartpole-swingup, 100k", "dmc"),
    ("sac_pendulum_paired", "SAC", "gym:Pendulum-v1, 20k", "pendulum"),
    ("sac_cartpole_swingup_ar8_paired", "SAC, action repeat 8",
     "dmc:cartpole-swingup@repeat=8, 12.5k", "dmc"),
    ("ppo_cartpole_paired", "PPO", "gym:CartPole-v1, 100k", "cartpole"),
    ("ppo_gymnax_cartpole_anakin_paired", "PPO, --launch anakin (int8 emulated)",
     "gymnax:CartPole-v1, 100k", "cartpole"),
    ("ppo_dmc_cartpole_balance_paired", "PPO", "dmc:cartpole-balance, 100k", "dmc"),
    ("a2c_cartpole_paired", "A2C", "gym:CartPole-v1, 100k", "cartpole"),
    ("impala_cartpole_paired", "IMPALA", "gym:CartPole-v1, 100k", "cartpole"),
)


def finals(folder):
  """{precision: {seed: final greedy return}} from RESULTS/folder/seeds.csv."""
  out = {}
  with open(os.path.join(RESULTS, folder, "seeds.csv"), encoding="utf-8") as f:
    for row in csv.DictReader(f):
      out.setdefault(row["precision"], {})[int(row["seed"])] = float(row["final_return"])
  return out


def verdict_row(folder, margin):
  """The arm (the one precision that is not fp32) against fp32, paired by seed."""
  by_precision = finals(folder)
  reference = by_precision.pop("fp32")
  (arm, scores), = by_precision.items()
  seeds = sorted(set(reference) & set(scores))
  result = aggregate.tost([scores[s] for s in seeds], [reference[s] for s in seeds], margin)
  return dict(result, arm=arm, seeds=seeds)


def main():
  rows, lines = [], [
      "| agent | environment, actor steps | arm | pairs | margin | int8 - fp32, mean [90% paired t] "
      "| verdict | pairs for 80% power |", "|---|---|---|---|---|---|---|---|"]
  for folder, name, env, key in ROWS:
    r = verdict_row(folder, MARGINS[key])
    rows.append(dict(r, folder=folder, agent=name, environment=env))
    lines.append(f"| {name} | {env} | `{r['arm']}` | {r['n']} | {r['margin']:g} | "
                 f"{r['mean_difference']:+.1f} [{r['ci_low']:.1f}, {r['ci_high']:.1f}] | "
                 f"**{r['verdict']}** | {r['pairs_needed']} |")
  with atomic.atomic_write(os.path.join(HERE, "table.md")) as f:
    f.write("\n".join(lines) + "\n")
  with atomic.atomic_write(os.path.join(HERE, "verdicts.json")) as f:
    json.dump({"margins": MARGINS, "rows": rows}, f, indent=1)
  print("\n".join(lines))


if __name__ == "__main__":
  main()
