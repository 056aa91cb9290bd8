#!/bin/bash
# watchat.sh LOGD SEED: stops the stream whose sweep uses --logdir /work/sweeps/parity/LOGD
# when it starts seed SEED (another stream runs that seed and the rest of its range).
while true; do
  p=$(pgrep -f "seeds $2 .*logdir /work/sweeps/parity/$1( |$)" | head -1)
  if [ -n "$p" ]; then
    pg=$(ps -o pgid= -p $p | tr -d ' '); kill -- -$pg
    echo "$(date +%T) stopped the $1 stream at seed $2 (pgid $pg)"; exit 0
  fi
  sleep 10
done
