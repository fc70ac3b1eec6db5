#!/usr/bin/env bash
# Session 37 call 2: the bench's rotation fix, A/B over the same kernels (ffa8936's library):
# oldrot = 1b47369's bench (a replay cycle's 15–16 launches on one rotation of slots),
# newrot = ffa8936's (every launch on the next rotation). 3 alternating rounds.
set -u
eval "$(bash scripts/gpu_check.sh libs)"; cd .gpu
xz -d -k bench_oldrot.xz && chmod +x bench_oldrot; cp replayssm_ssm_bench bench_newrot
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
t0=$(date +%s)
for round in 1 2 3; do
  for b in oldrot newrot; do
    for fam in mamba2 gdn; do
      echo "=== $b $fam r$round (t=$(( $(date +%s) - t0 )) s)"
      timeout 120 ./bench_$b --only $fam --batches 1,2,4,8,64,256,512 2>&1 | grep -E '^(gdn|mamba2) |staggered|copy'
    done
  done
done
echo "=== done t=$(( $(date +%s) - t0 )) s"
