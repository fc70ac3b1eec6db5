#!/usr/bin/env bash
# Session 37 call 3: GDN at batch 1–8 under the per-launch rotation (ffa8936): each fast-replay
# variant forced (0 the launcher's, 1 streaming, 2 column slices, 3 the warps' sequential
# recurrence, 4 the warps' dual form), 3 alternating rounds.
set -u
eval "$(bash scripts/gpu_check.sh libs)"; cd .gpu
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
t0=$(date +%s)
for round in 1 2 3; do
  for v in 0 1 2 3 4; do
    echo "=== v$v r$round (t=$(( $(date +%s) - t0 )) s)"
    timeout 60 ./replayssm_ssm_bench --only gdn --batches 1,2,3,4,5,6,7,8 --gdn-variant $v 2>&1 | grep -E '^gdn |copy'
  done
done
echo "=== done t=$(( $(date +%s) - t0 )) s"
