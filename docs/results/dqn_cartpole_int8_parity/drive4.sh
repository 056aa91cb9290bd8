#!/bin/bash
# Issue 53 driver v4: the same commands as drive3.sh, code of a622b53 (frozen in code3/), record
# copies in rec/ (copied back into docs/results at the end of a session).
set -u
cd /work/sweeps/parity
export PYTHONPATH=/work/sweeps/parity/code3
PY=/work/main/.venv/bin/python
REC=/work/sweeps/parity/rec
for s in $(seq ${FIRST:-2} ${LAST:-29}); do
  nice -n 15 $PY -m actorq.cli.main sweep --agent dqn --env gym:CartPole-v1 --seeds $s \
    --precisions 'fp32;mixed:fp16,fp16,fp16;int8' --steps 100000 --eval-every 5000 \
    --eval-episodes 10 --target 475 --margin 50 --logdir /work/sweeps/parity/main4 \
    --record $REC/main || exit $?
  nice -n 15 $PY -m actorq.cli.main sweep --agent dqn --env gym:CartPole-v1 --seeds $s \
    --precisions int8 --set td_operator=advantage_learning --steps 100000 --eval-every 5000 \
    --eval-episodes 10 --target 475 --margin 50 --logdir /work/sweeps/parity/al4 \
    --record $REC/advantage_learning || exit $?
done
