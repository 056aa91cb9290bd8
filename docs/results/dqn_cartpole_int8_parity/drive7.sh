#!/bin/bash
# v7 (session of 2026-12-07 22:50 UTC): drive6 with ARM=main split into streams, each with its
# own logdir (LOGD) and record (RECN): seeds 19-21, 22-23, 24-26, 27, 28-29 as five streams
# (stopped at a seed another stream took: watchat.sh), merged into main/runs afterwards.
# Issue 53 driver v6 (session of 2026-12-07 19:35 UTC): the commands of drive4.sh, code of a622b53
# (frozen in code3/), records in rec/ (seeded from docs/results at the start). ARM=main runs
# fp32, the fp16 placebo and int8; ARM=al runs int8 + advantage learning. Two streams at once.
set -u
cd /work/sweeps/parity
export PYTHONPATH=/work/sweeps/parity/code3
PY=/work/main/.venv/bin/python
REC=/work/sweeps/parity/rec
for s in $(seq ${FIRST:-13} ${LAST:-29}); do
  if [ "${ARM:-main}" = main ]; then
  nice -n 15 $PY -m actorq.cli.main sweep --agent dqn --env gym:CartPole-v1 --seeds $s \
    --precisions 'fp32;mixed:fp16,fp16,fp16;int8' --steps 100000 --eval-every 5000 \
    --eval-episodes 10 --target 475 --margin 50 --logdir /work/sweeps/parity/${LOGD:-main4} \
    --record $REC/${RECN:-main} || exit $?
  else
  nice -n 15 $PY -m actorq.cli.main sweep --agent dqn --env gym:CartPole-v1 --seeds $s \
    --precisions int8 --set td_operator=advantage_learning --steps 100000 --eval-every 5000 \
    --eval-episodes 10 --target 475 --margin 50 --logdir /work/sweeps/parity/al4 \
    --record $REC/advantage_learning || exit $?
  fi
done
