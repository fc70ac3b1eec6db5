#!/usr/bin/env bash
# Session 37 call 7: the GDN append releasing the step / replay at its start (release_early in the
# decoder): the CUDA suite, then end to end at Qwen3.5-27B shapes, batch 1 and 8, fc5a5de's binary
# (old) against the change (new), 2 rounds alternating.
set -u
eval "$(bash scripts/gpu_check.sh libs)"; cd .gpu
xz -d -k e2e_old.xz && chmod +x e2e_old; cp replayssm_e2e_bench e2e_new
t0=$(date +%s)
./replayssm_cuda_tests > $OUT/cuda_tests.log 2>&1; grep -E '^\[  (PASSED|FAILED)|SKIPPED' $OUT/cuda_tests.log | tail -5
echo "=== tests t=$(( $(date +%s) - t0 )) s"
for round in 1 2; do
  for b in old new; do
    echo "=== $b r$round (t=$(( $(date +%s) - t0 )) s)"
    timeout 150 ./e2e_$b --preset qwen3.5-27b --batch 1,8 --runs 3 --prefill 0 2>&1 | grep -E "^ +[0-9]+ (standard|replay)" | head -4
  done
done
xz -9 $OUT/cuda_tests.log
echo "=== done t=$(( $(date +%s) - t0 )) s"
