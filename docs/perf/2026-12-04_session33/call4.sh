#!/bin/bash
# Call 4 (session 33): the register-resident warps with the dual form
# (--gdn-variant 4, today only where its blocks are one wave) at batch
# 8-512 against the launcher's choice (the streaming kernel there), 2 rounds;
# GDN and Qwen tests with the dual form's weights exponentiated once.
set -u
eval "$(bash scripts/gpu_check.sh libs)"
cd .gpu
date -u
./replayssm_cuda_tests --gtest_filter='*Gdn*:*Qwen*' > $OUT/gdn_tests.log 2>&1; echo "tests rc $?"
grep -E '^\[  PASSED|^\[  FAILED' $OUT/gdn_tests.log; xz -T2 $OUT/gdn_tests.log
date -u
{ for r in 1 2; do for v in 0 4; do
  echo "== round $r gdn-variant $v"
  ./replayssm_ssm_bench --only gdn --gdn-variant $v --batches 8,16,64,256,512 2>&1 | grep -E '^gdn +(ar|verify) |^  \(gdn (ar|verify) replay'
done; done; } > $OUT/gdn_warps_large_batch.txt
cat $OUT/gdn_warps_large_batch.txt
date -u
