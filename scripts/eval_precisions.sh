#!/bin/bash
# Evaluates the final checkpoint of every run (seeds 0-4) of an `actorq sweep` directory at
# fp32 and at int8 with `actorq eval`: 20 greedy episodes on each run's own evaluation seed
# (seed + 10000). Separates what the int8 runtime costs a given policy from what training
# with int8 actors costs the learner (used for R2D2's and TD3's sweeps: agents/r2d2/README.md,
# agents/td3/README.md).
#   SWEEP=DIR [OUT=FILE.csv] [TRAINED="fp32 int8"] [EVALS="fp32 int8"] scripts/eval_precisions.sh
# TRAINED: the sweep's run-directory prefixes (<prefix>-s<seed>, e.g. mixed-bd5ac0d9 for a
# "mixed:..." precision); EVALS: the precisions to evaluate each checkpoint at.
set -euo pipefail
sweep=${SWEEP:?set SWEEP to a sweep directory (runs <precision>-s<seed>, seeds 0-4)}
out=${OUT:-$PWD/eval_20_episodes.csv}
actorq="$(cd "$(dirname "$0")/.." && pwd)/.venv/bin/actorq"
trained=${TRAINED:-fp32 int8}
evals=${EVALS:-fp32 int8}
echo "trained_with,seed,eval_precision,mean_return" > "$out"
for p in $trained; do for s in 0 1 2 3 4; do for e in $evals; do
  r=$("$actorq" eval --checkpoint "$sweep/$p-s$s" --episodes 20 --seed $((10000 + s)) \
      --precision "$e" 2>/dev/null | sed -n 's/^episode return: mean \([^,]*\),.*/\1/p')
  case $e in *,*) col="\"$e\"" ;; *) col=$e ;; esac  # CSV-quote a mixed:a,b,c name
  echo "$p,$s,$col,$r" >> "$out"
done; done; done
cat "$out"
