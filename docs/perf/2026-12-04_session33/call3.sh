#!/bin/bash
# Call 3 (session 33): the dual form's products from zero, S <- decay*S + them
# after (the tensor cores while the state loads): GDN and Qwen tests, SASS
# order, A/B against d02e924's kernel (old/) at batch 1-6, 3 rounds.
set -u
eval "$(bash scripts/gpu_check.sh libs)"
cd .gpu
tar -xJf old_bin.tar.xz
date -u
./replayssm_cuda_tests --gtest_filter='*Gdn*:*Qwen*' > $OUT/gdn_tests.log 2>&1; echo "tests rc $?"
grep -E '^\[  PASSED|^\[  FAILED' $OUT/gdn_tests.log; xz -T2 $OUT/gdn_tests.log
date -u
{ for v in old new new old old new; do
  b=./replayssm_ssm_bench; [ $v = old ] && b=old/replayssm_ssm_bench
  echo "== $v"
  $b --only gdn --batches 1,2,3,4,6 2>&1 | grep -E '^gdn +(ar|verify) '
done; } > $OUT/gdn_dual_ab.txt
cat $OUT/gdn_dual_ab.txt
date -u
cuobjdump -sass replayssm_ssm_bench 2>/dev/null | awk '/Function : /{on = ($0 ~ /gdn_step_warps_kernelILi16ELb1ELb1ELb1E/)} on' \
  | grep -E '^\s+/\*[0-9a-f]+\*/' | sed -E 's@^\s+/\*[0-9a-f]+\*/\s+@@; s@\s*/\*.*@@; s@ ;$@@' > $OUT/dual_kernel.sass
wc -l $OUT/dual_kernel.sass
grep -nE 'LDG|HMMA|BAR|ACQ|FFMA' $OUT/dual_kernel.sass | awk -F: '$1 < 700' | cut -c1-60 | head -150
