#!/bin/bash
# The fp16-on-LiteRT placebo's mechanism measurement (code3 = 09c76cd), after mechanism.sh.
set -u
cd /work/sweeps/parity
while pgrep -f "mechanism.sh" > /dev/null; do sleep 10; done
export PYTHONPATH=/work/sweeps/parity/code3 TF_CPP_MIN_LOG_LEVEL=2
nice -n 15 /work/wt-parity/.venv/bin/python -m actorq.studies.actor_mechanism \
  --precision 'mixed:fp16,fp16,fp16' --seed 0 --steps 30000 --out /work/sweeps/parity/mechanism
