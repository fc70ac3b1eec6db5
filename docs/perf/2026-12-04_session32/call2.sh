#!/bin/bash
# Call 2 (session 32): CUDA suite at 22196db; e2e A/B old (b1523b9) / mid (norm pieces v2, 16-row min split) / new (22196db); attention.
set -u
eval "$(bash scripts/gpu_check.sh libs)"
cd .gpu
tar -xJf old_bin.tar.xz
date -u
./replayssm_cuda_tests > $OUT/cuda_tests_22196db.log 2>&1; echo "cuda tests rc $?"
grep -E '^\[  PASSED|^\[  FAILED|FAILED  \]' $OUT/cuda_tests_22196db.log | head -20
xz -T2 $OUT/cuda_tests_22196db.log
date -u
e2e() { local v=$1; shift; local b=./replayssm_e2e_bench; [ $v != new ] && b=$v/replayssm_e2e_bench; echo "== e2e $v $*"; $b "$@" --prefill 0 --runs 3 2>&1 | grep -E "^ *[0-9]+ +(standard|replay) +[0-9]"; }
{ for v in old mid new mid new old; do e2e $v --batch 1,8; done; } > $OUT/e2e_ab_small.txt
cat $OUT/e2e_ab_small.txt
date -u
{ for v in old new new old; do e2e $v --batch 64,256; done; } > $OUT/e2e_ab_large.txt
cat $OUT/e2e_ab_large.txt
date -u
{
for v in mid new; do b=./replayssm_attn_bench; [ $v = mid ] && b=mid/replayssm_attn_bench
  echo "== attn $v default"; $b --batches 1,8 --contexts 128,256,1024,4096 --runs 5 | grep -E "^(nemotron|qwen)"; done
for r in 1 2; do
  echo "== attn new per-sequence rows, bound 32768"; ./replayssm_attn_bench --preset nemotron-h-8b --batches 1,8,64 --contexts 256,1024,4096 --max-context 32768 --runs 5 | grep -E "^(nemotron|qwen)"
  echo "== attn new bound's rows (512)"; ./replayssm_attn_bench --preset nemotron-h-8b --batches 1,8,64 --contexts 256,1024,4096 --max-context 32768 --split-rows 512 --runs 5 | grep -E "^(nemotron|qwen)"
done
} > $OUT/attn_ab.txt 2>&1
cat $OUT/attn_ab.txt
date -u
