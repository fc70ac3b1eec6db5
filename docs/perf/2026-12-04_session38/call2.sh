#!/usr/bin/env bash
# Session 38 call 2: the CUDA tests and the kernels part of the check with the replay layout's
# one-token steps through the standard step where the kernels' rule says it is faster
# (DecoderOptions::replay_step, the bench's "ar" rows there, "ar-kernel" the output-only kernels);
# then end to end at 8B and Qwen3.5-27B shapes at small batches. Back as one archive.
set -u
o=/tmp/s38_c2
t0=$(date +%s)
bash scripts/gpu_check.sh run $o tests,kernels > $o.log 2>&1; echo "rc=$? t=$(( $(date +%s) - t0 )) s"
grep -E "FAILED|PASSED" $o/cuda_tests.log | tail -8; tail -30 $o.log
eval "$(bash scripts/gpu_check.sh libs)"
timeout 150 .gpu/replayssm_e2e_bench --batch 1,2,8 --runs 3 --json $o/e2e_8b.json 2>&1 | tee $o/e2e_8b.txt | tail -12
timeout 150 .gpu/replayssm_e2e_bench --preset qwen3.5-27b --batch 1,2,8 --runs 3 --json $o/e2e_qwen.json 2>&1 | tee $o/e2e_qwen.txt | tail -12
echo "t=$(( $(date +%s) - t0 )) s"
cp $o.log $o/run.log; tar -cJf $OUT/call2.tar.xz -C $o .
