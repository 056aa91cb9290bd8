#!/usr/bin/env bash
# SKELETON (issue 13, point 5): the GPU benchmark, at most 8 minutes on a machine with one NVIDIA
# GPU and ~16 cores. It has not run on a GPU yet.
#
#   OUT=/path/to/out scripts/gpu_bench.sh            # writes $OUT/*.json, $OUT/*.png, $OUT/*.log
#
# What it does: setup with the CUDA plugin (ACTORQ_GPU=1 ./dev setup), the machine's facts, a
# check that jax sees the GPU and that `--learner-device gpu` starts, placement of a local_mp run
# (every node but the learner CPU-only), then the distributed benchmark (`actorq bench --launch
# local_mp --num-actors N`, fp32 and int8 interleaved, same seed) with the learner on the GPU.
# The distributed bench runs on CPU machines (tests/benchmarks/test_distributed_bench.py); this
# script as a whole has not. Time budget per step is in seconds (`limit`), summed <= 480.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
out="${OUT:?set OUT to the folder the results go to}"
mkdir -p "$out"
start=$(date +%s)
actors="${ACTORQ_BENCH_ACTORS:-12}"        # actor processes (12-14 on a 16-core machine)
steps="${ACTORQ_BENCH_STEPS:-30000}"       # actor steps per run (shortened preset)
seed="${ACTORQ_BENCH_SEED:-0}"
log() { echo "gpu_bench: $*" | tee -a "$out/gpu_bench.log" >&2; }
limit() {  # limit SECONDS CMD...: the command, cut at SECONDS and at the 480 s budget
  local s=$1; shift
  local left=$((480 - ($(date +%s) - start)))
  [ "$left" -lt "$s" ] && s=$left
  [ "$s" -le 0 ] && { log "out of time before: $*"; exit 4; }
  timeout --signal=TERM --kill-after=25 "$s" "$@"
}

if ! nvidia-smi -L >"$out/nvidia-smi-L.txt" 2>&1; then
  log "nvidia-smi does not work here: this script is for a machine with an NVIDIA GPU"; exit 2
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv >"$out/gpu.csv" 2>&1 || true

log "setup (ACTORQ_GPU=1 ./dev setup)"
limit 240 env ACTORQ_GPU=1 ./dev setup 2>&1 | tee -a "$out/gpu_bench.log" >&2
py="$root/.venv/bin/python"

log "machine facts"
limit 60 "$py" - "$out/machine.json" <<'EOF'
import json, os, platform, sys, time
import jax
gpus = [d for d in jax.devices() if d.platform == "gpu"]
facts = {"time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "host": platform.node(),
         "cores": len(os.sched_getaffinity(0)), "jax": jax.__version__,
         "devices": [repr(d) for d in jax.devices()],
         "gpu_kind": gpus[0].device_kind if gpus else None}
json.dump(facts, open(sys.argv[1], "w"), indent=1)
print(json.dumps(facts))
sys.exit(0 if gpus else 5)
EOF

log "placement: a short local_mp run with the learner on the GPU (2 actors, DQN)"
limit 120 ./dev actorq train --launch local_mp --num-actors 2 --learner-device gpu --steps 3000 \
  --eval-every 3000 --eval-episodes 1 --no-progress --seed "$seed" --logdir "$out/placement_run" \
  >"$out/placement_run.log" 2>&1
grep -h "learner on" "$out/placement_run.log" | tee -a "$out/gpu_bench.log" >&2

if ! "$root/.venv/bin/actorq" bench --help 2>/dev/null | grep -q -- "--launch"; then
  log "actorq bench has no --launch yet (issue 13 point 3): the distributed fp32/int8 comparison"
  log "is not run; results so far are in $out"
  exit 3
fi

# The actorq preset shortened, fp32 and int8 interleaved, same seed, learner on the GPU:
log "distributed benchmark: $actors actors, $steps actor steps per precision"
limit 360 ./dev actorq bench --preset actorq --launch local_mp --num-actors "$actors" \
  --learner-device gpu --steps "$steps" --seeds "$seed" --precisions fp32,int8 \
  --logdir "$out/bench" 2>&1 | tee -a "$out/gpu_bench.log" >&2
log "scaling model: calibrated on this machine's run (its measured GPU learner step), checked on it"
limit 60 "$py" -m actorq.benchmarks.scaling --calibrate "$out/bench" --validate "$out/bench" \
  --cores "$(nproc)" --out "$out/scaling" 2>&1 | tee -a "$out/gpu_bench.log" >&2
log "done in $(( $(date +%s) - start )) s; results in $out"
