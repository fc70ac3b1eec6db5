#!/bin/bash
# Call 3 (session 32): CUDA suite at HEAD; e2e A/B old (b1523b9) / new (HEAD).
set -u
eval "$(bash scripts/gpu_check.sh libs)"
cd .gpu
tar -xJf old_bin.tar.xz
date -u
./replayssm_cuda_tests > $OUT/cuda_tests_head.log 2>&1; echo "cuda tests rc $?"
grep -E '^\[  PASSED|^\[  FAILED|FAILED  \]' $OUT/cuda_tests_head.log | head -20
xz -T2 $OUT/cuda_tests_head.log
date -u
e2e() { local v=$1; shift; local b=./replayssm_e2e_bench; [ $v != new ] && b=$v/replayssm_e2e_bench; echo "== e2e $v $*"; $b "$@" --prefill 0 --runs 3 2>&1 | grep -E "^ *[0-9]+ +(standard|replay) +[0-9]"; }
{ for v in old new new old; do e2e $v --batch 64,256; done; for v in old new; do e2e $v --batch 1,8; done; } > $OUT/e2e_ab.txt
cat $OUT/e2e_ab.txt
date -u
