#!/bin/bash
# Call 1 (session 32): CUDA suite at the new build; e2e A/B old (b1523b9) vs new; attention bound/split sweeps.
set -u
eval "$(bash scripts/gpu_check.sh libs)"
cd .gpu
mkdir -p old && tar -xJf old_bin.tar.xz -C old
date -u
./replayssm_cuda_tests > $OUT/cuda_tests.log 2>&1; echo "cuda tests rc $?"
grep -E '^\[  PASSED|^\[  FAILED|FAILED  \]' $OUT/cuda_tests.log | head -20
xz -T2 $OUT/cuda_tests.log
date -u
for r in 1 2; do
  for v in old new; do
    b=./replayssm_e2e_bench; [ $v = old ] && b=old/replayssm_e2e_bench
    echo "== e2e $v round $r"; $b --batch 64,256 --prefill 0 --runs 3 2>&1 | grep -E "^ *[0-9]+ +(standard|replay)"
  done
done > $OUT/e2e_ab.txt
cat $OUT/e2e_ab.txt
date -u
for v in old new; do
  b=./replayssm_e2e_bench; [ $v = old ] && b=old/replayssm_e2e_bench
  echo "== e2e small $v"; $b --batch 1,8 --prefill 0 --runs 3 2>&1 | grep -E "^ *[0-9]+ +(standard|replay)"
  echo "== e2e 27b $v"; $b --preset qwen3.5-27b --batch 64 --new 32 --prefill 0 --runs 2 2>&1 | grep -E "^ *[0-9]+ +(standard|replay)"
done > $OUT/e2e_ab_small_27b.txt
cat $OUT/e2e_ab_small_27b.txt
date -u
# Attention: the bound. Per-sequence rows (new default) vs the bound's fixed rows (emulated by --split-rows).
{
echo "== per-sequence rows, bound 32768"; ./replayssm_attn_bench --preset nemotron-h-8b --batches 1,8,64 --contexts 256,1024,4096 --max-context 32768 --runs 5
echo "== bound's rows (512 at batch 1/8, as before)"; ./replayssm_attn_bench --preset nemotron-h-8b --batches 1,8 --contexts 256,1024,4096 --max-context 32768 --split-rows 512 --runs 5
echo "== batch 64 bound's rows (512)"; ./replayssm_attn_bench --preset nemotron-h-8b --batches 64 --contexts 256,1024,4096 --max-context 32768 --split-rows 512 --runs 5
for sr in 16 32 64 128 256; do echo "== split rows $sr, bound = context"; ./replayssm_attn_bench --batches 1,4 --contexts 1024,4096,16384 --split-rows $sr --runs 5 | grep -E "^(nemotron|qwen)"; done
echo "== default, bound = context"; ./replayssm_attn_bench --batches 1,4 --contexts 1024,4096,16384 --runs 5
echo "== old default"; old/replayssm_attn_bench --batches 1,4 --contexts 1024,4096,16384 --runs 5
} > $OUT/attn_sweeps.txt 2>&1
cat $OUT/attn_sweeps.txt
date -u
