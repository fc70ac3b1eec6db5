#!/bin/bash
# Call 7 (session 33): the CUDA suite at the session's last code commit; the
# GDN dual form with the shared hi+lo split against bfe41b9's (old/), 2 rounds.
set -u
eval "$(bash scripts/gpu_check.sh libs)"
cd .gpu
tar -xJf old_bin.tar.xz
date -u
./replayssm_cuda_tests > $OUT/cuda_tests.log 2>&1; echo "tests rc $?"
grep -E '^\[  PASSED|^\[  FAILED|FAILED  \]' $OUT/cuda_tests.log | head; xz -T4 $OUT/cuda_tests.log
date -u
{ for v in old new new old; do b=./replayssm_ssm_bench; [ $v = old ] && b=old/replayssm_ssm_bench
  echo "== $v"; $b --only gdn --batches 1,2,4,6 2>&1 | grep -E '^gdn +(ar|verify) '; done; } > $OUT/gdn_split_ab.txt
cat $OUT/gdn_split_ab.txt
date -u
