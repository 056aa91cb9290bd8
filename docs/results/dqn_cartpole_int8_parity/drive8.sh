#!/bin/bash
# v8 (session of 2026-12-07 22:50 UTC): one precision of one seed per stream (PREC, SEED), its
# own logdir and record, so the last runs of the 30-pair sweep run side by side.
set -u
cd /work/sweeps/parity
export PYTHONPATH=/work/sweeps/parity/code3
PY=/work/main/.venv/bin/python
REC=/work/sweeps/parity/rec
nice -n 15 $PY -m actorq.cli.main sweep --agent dqn --env gym:CartPole-v1 --seeds $SEED \
  --precisions "$PREC" --steps 100000 --eval-every 5000 \
  --eval-episodes 10 --target 475 --margin 50 --logdir /work/sweeps/parity/$LOGD \
  --record $REC/$LOGD
