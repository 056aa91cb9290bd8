#!/bin/bash
# Issue 53 driver v5: drive4.sh's first command only (fp32, fp16 placebo, int8; int8 + advantage
# learning waits), code of a622b53 (frozen in code3/), records in rec/main.
set -u
cd /work/sweeps/parity
export PYTHONPATH=/work/sweeps/parity/code3
PY=/work/main/.venv/bin/python
REC=/work/sweeps/parity/rec
for s in $(seq ${FIRST:-9} ${LAST:-29}); do
  nice -n 15 $PY -m actorq.cli.main sweep --agent dqn --env gym:CartPole-v1 --seeds $s \
    --precisions 'fp32;mixed:fp16,fp16,fp16;int8' --steps 100000 --eval-every 5000 \
    --eval-episodes 10 --target 475 --margin 50 --logdir /work/sweeps/parity/main4 \
    --record $REC/main || exit $?
done
