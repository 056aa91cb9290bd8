#!/bin/bash
# Issue 53 item 5 (session of 2026-12-07 22:50 UTC): the int8 mechanism measurement for Munchausen DQN and QAT (8-bit fake
# quant of the online network), seed 0, 30k steps, code of a622b53 (code3), after the AL run.
set -u
cd /work/sweeps/parity
export PYTHONPATH=/work/sweeps/parity/code3 TF_CPP_MIN_LOG_LEVEL=2
PY=/work/main/.venv/bin/python
nice -n 15 $PY -m actorq.studies.actor_mechanism --precision int8 --set td_operator=munchausen \
  --seed 0 --steps 30000 --out /work/sweeps/parity/mechanism3/munchausen
nice -n 15 $PY -m actorq.studies.actor_mechanism --precision int8 --set qat_bits=8 \
  --seed 0 --steps 30000 --out /work/sweeps/parity/mechanism3/qat8
