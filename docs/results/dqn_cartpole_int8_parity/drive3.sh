#!/bin/bash
# Issue 53 experiment driver v3 (code of 09e75d9 in code2/). After the measurement showed the
# litert-fp32 placebo acting exactly as fp32 (0 differing greedy actions in 30k steps, the
# same episodes), the placebo arm is fp16 weights on the same LiteRT path
# (mixed:fp16,fp16,fp16: float kernels, every layer's weights rounded to fp16).
set -u
cd /work/sweeps/parity
while pgrep -f "logdir /work/sweeps/parity/" > /dev/null; do sleep 10; done
export PYTHONPATH=/work/sweeps/parity/code2
PY=/work/wt-parity/.venv/bin/python
REC=/work/wt-parity/docs/results/dqn_cartpole_int8_parity
for s in $(seq ${FIRST:-0} ${LAST:-29}); do
  nice -n 15 $PY -m actorq.cli.main sweep --agent dqn --env gym:CartPole-v1 --seeds $s \
    --precisions 'fp32;mixed:fp16,fp16,fp16;int8' --steps 100000 --eval-every 5000 \
    --eval-episodes 10 --target 475 --margin 50 --logdir /work/sweeps/parity/main \
    --record $REC/main || exit $?
  nice -n 15 $PY -m actorq.cli.main sweep --agent dqn --env gym:CartPole-v1 --seeds $s \
    --precisions int8 --set td_operator=advantage_learning --steps 100000 --eval-every 5000 \
    --eval-episodes 10 --target 475 --margin 50 --logdir /work/sweeps/parity/al \
    --record $REC/advantage_learning || exit $?
done
