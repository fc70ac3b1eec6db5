#!/usr/bin/env bash
# Session 38 call 1: where the output-only AR replay kernels stop losing to the standard step at small
# batch, across head counts (the rule that sends a replay layout's one-token steps to the standard step
# is set from these). Each timed run is one CUDA graph, each launch its own slots and log (session 37).
set -u
eval "$(bash scripts/gpu_check.sh libs)"
t0=$(date +%s)
run() { echo "=== $* (t=$(( $(date +%s) - t0 )) s)"; timeout 120 .gpu/replayssm_ssm_bench "$@" 2>&1 | grep -E '^(gdn|mamba2) +ar '; }
for round in 1 2; do
  run --only gdn --gdn-heads 16,32 --batches 1,2,3,4,5,6,7,8,10,12,16,24,32
  run --only gdn --gdn-heads 16,48 --batches 1,2,3,4,5,6,8,10,12,16,24
  run --only gdn --gdn-heads 16,16 --batches 1,2,4,6,8,10,12,16,24,32
  run --only gdn --gdn-heads 8,64 --batches 1,2,3,4,6,8,12,16
  run --only mamba2 --mamba2-heads 128 --batches 1,2,3,4
  run --only mamba2 --mamba2-heads 64 --batches 1,2,3,4,6,8
  run --only mamba2 --mamba2-heads 256 --batches 1,2
done
echo "=== done t=$(( $(date +%s) - t0 )) s"
