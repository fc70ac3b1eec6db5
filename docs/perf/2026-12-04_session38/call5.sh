#!/usr/bin/env bash
# Session 38 call 5: the CUDA tests and the kernels part of the check with the replay layout's
# default (replay_step -1: Mamba2 layers stepped through the standard step where
# mamba2_replay_steps_faster, at 8B shapes batch 2; GDN layers never), then end to end at the
# default against the output-only kernels (replay:0), 8B and Qwen3.5-27B shapes. One archive.
set -u
o=/tmp/s38_c5
t0=$(date +%s)
bash scripts/gpu_check.sh run $o tests,kernels > $o.log 2>&1; echo "rc=$? t=$(( $(date +%s) - t0 )) s"
grep -E "^\[  (PASSED|FAILED) " $o/cuda_tests.log | tail -6; grep -A34 "== summary" $o.log | head -34
eval "$(bash scripts/gpu_check.sh libs)"
timeout 150 .gpu/replayssm_e2e_bench --batch 1,2,8,64 --runs 3 --prefill 0 --replay-step -1,0 \
  --json $o/e2e_8b.json 2>&1 | tee $o/e2e_8b.txt | sed -n 4,16p
timeout 150 .gpu/replayssm_e2e_bench --preset qwen3.5-27b --batch 1,8 --runs 3 --prefill 0 \
  --json $o/e2e_qwen.json 2>&1 | tee $o/e2e_qwen.txt | sed -n 4,10p
echo "t=$(( $(date +%s) - t0 )) s"
cp $o.log $o/run.log; tar -cJf $OUT/call5.tar.xz -C $o .
