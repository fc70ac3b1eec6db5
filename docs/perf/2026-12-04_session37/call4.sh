#!/usr/bin/env bash
# Session 37 call 4: the SSM bench's launches from the host against each timed run as one CUDA
# graph (--graph 1), the same kernels (ffa8936 + the bench's --graph), batches 1–8 and 64;
# 3 alternating rounds.
set -u
eval "$(bash scripts/gpu_check.sh libs)"; cd .gpu
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
t0=$(date +%s)
for round in 1 2 3; do
  for gr in 0 1; do
    for fam in mamba2 gdn; do
      echo "=== graph$gr $fam r$round (t=$(( $(date +%s) - t0 )) s)"
      timeout 120 ./replayssm_ssm_bench --only $fam --batches 1,2,3,4,6,8,64 --graph $gr 2>&1 | grep -E '^(gdn|mamba2) |copy|graph|rror'
    done
  done
done
echo "=== done t=$(( $(date +%s) - t0 )) s"
