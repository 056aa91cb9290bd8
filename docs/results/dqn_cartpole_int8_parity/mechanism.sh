#!/bin/bash
# Issue 53 item 4: the mechanism measured (code of 09c76cd in code3/): DQN CartPole seed 0,
# the first 30k actor steps (identical to the sweep's runs of seed 0: the recorder changes
# nothing), per arm.
set -u
cd /work/sweeps/parity
export PYTHONPATH=/work/sweeps/parity/code3 TF_CPP_MIN_LOG_LEVEL=2
PY=/work/wt-parity/.venv/bin/python
for p in int8 litert-fp32 fp32; do
  nice -n 15 $PY -m actorq.studies.actor_mechanism --precision $p --seed 0 --steps 30000 \
    --out /work/sweeps/parity/mechanism
done
nice -n 15 $PY -m actorq.studies.actor_mechanism --precision int8 --seed 0 --steps 30000 \
  --set td_operator=advantage_learning --out /work/sweeps/parity/mechanism_al
