#!/usr/bin/env bash
# Session 38 call 4: is there a band of batches where stepping the replay layout's plain tokens
# through the standard step pays end to end? Nemotron-H-4B shapes (96 Mamba2 heads of 80) at batch
# 1-4 and 8B shapes at batch 2-3, standard against replay:0 (output-only kernels) and replay:1.
set -u
o=/tmp/s38_c4; mkdir -p $o
eval "$(bash scripts/gpu_check.sh libs)"
t0=$(date +%s)
timeout 150 .gpu/replayssm_e2e_bench --preset nemotron-h-4b --batch 1,2,3,4 --runs 5 --prefill 0 --replay-step 0,1 \
  --json $o/e2e_ab_4b.json 2>&1 | tee $o/e2e_ab_4b.txt | sed -n 1,18p
timeout 150 .gpu/replayssm_e2e_bench --preset nemotron-h-8b --batch 2,3 --runs 5 --prefill 0 --replay-step 0,1 \
  --json $o/e2e_ab_8b.json 2>&1 | tee $o/e2e_ab_8b.txt | sed -n 1,12p
echo "t=$(( $(date +%s) - t0 )) s"
tar -cJf $OUT/call4.tar.xz -C $o .
