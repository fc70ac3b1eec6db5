#!/bin/bash
# Call 2 (session 33): GDN dual-form replay at small batch, trials by
# environment (not landed): warps a block (REPLAYSSM_TRIAL_GDN_NW 4|2|1)
# and the older entries applied after the PDL wait (REPLAYSSM_TRIAL_GDN_LATE).
# Then attention under a 32,768-row bound with the second early exit.
set -u
eval "$(bash scripts/gpu_check.sh libs)"
cd .gpu
date -u
for cfg in "4 0" "2 0" "1 0" "4 1" "2 1"; do set -- $cfg
  REPLAYSSM_TRIAL_GDN_NW=$1 REPLAYSSM_TRIAL_GDN_LATE=$2 ./replayssm_cuda_tests --gtest_filter='*Gdn*:*Qwen*' > /tmp/t.log 2>&1
  echo "tests nw $1 late $2 rc $?: $(grep -E '^\[  PASSED|^\[  FAILED' /tmp/t.log | tr '\n' ' ')"; grep -E '^\[  FAILED  \] ' /tmp/t.log | head -5
done 2>&1 | tee $OUT/trial_tests.txt
date -u
{ for r in 1 2; do for cfg in "4 0" "2 0" "1 0" "4 1" "2 1"; do set -- $cfg
  echo "== round $r nw $1 late $2"
  REPLAYSSM_TRIAL_GDN_NW=$1 REPLAYSSM_TRIAL_GDN_LATE=$2 ./replayssm_ssm_bench --only gdn --batches 1,2,3,4,6 2>&1 | grep -E '^gdn +(ar|verify) '
done; done; } > $OUT/gdn_small_trials.txt
cat $OUT/gdn_small_trials.txt
date -u
{ for r in 1 2; do for s in 0 512; do
  echo "== round $r split-rows $s"
  ./replayssm_attn_bench --batches 1,64 --contexts 256,1024,4096 --max-context 32768 $( [ $s -gt 0 ] && echo --split-rows $s ) --runs 7 2>&1 | grep -vE '^#|^$'
done; done; } > $OUT/attn_bound_b64.txt
cat $OUT/attn_bound_b64.txt
date -u
