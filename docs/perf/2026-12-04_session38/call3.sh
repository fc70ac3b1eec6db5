#!/usr/bin/env bash
# Session 38 call 3: the kernels part of the check (the SSM bench's ar rows where the replay layout
# steps one token through the standard step, ar-kernel the output-only kernels there), then end to
# end at 8B and Qwen3.5-27B shapes at batch 1, 2, 4, 8: standard, replay through the output-only
# kernels (replay:0) and replay stepping every plain token (replay:1), side by side. One archive.
set -u
o=/tmp/s38_c3
t0=$(date +%s)
bash scripts/gpu_check.sh run $o kernels > $o.log 2>&1; echo "rc=$? t=$(( $(date +%s) - t0 )) s"
grep -A30 "== summary" $o.log | head -30
eval "$(bash scripts/gpu_check.sh libs)"
for p in nemotron-h-8b qwen3.5-27b; do
  timeout 200 .gpu/replayssm_e2e_bench --preset $p --batch 1,2,4,8 --runs 3 --prefill 0 --replay-step 0,1 \
    --json $o/e2e_ab_$p.json 2>&1 | tee $o/e2e_ab_$p.txt | sed -n 1,20p
  echo "t=$(( $(date +%s) - t0 )) s"
done
cp $o.log $o/run.log; tar -cJf $OUT/call3.tar.xz -C $o .
