#!/bin/bash
# Call 1 (session 33): the CUDA suite and the kernel benches at HEAD
# (c660736, 1c709c9, 4961dbe first on the device); attention under a
# 32,768-row bound at batch 1 and 64, each sequence's split against 512 rows.
set -u
date -u
bash scripts/gpu_check.sh run $OUT tests,kernels > $OUT/gpu_check_part1.log 2>&1; echo "part1 rc $?"
tail -40 $OUT/gpu_check_part1.log
xz -T2 $OUT/cuda_tests.log
date -u
eval "$(bash scripts/gpu_check.sh libs)"
cd .gpu
{ for r in 1 2; do for s in 0 512; do
  echo "== round $r split-rows $s"
  ./replayssm_attn_bench --batches 1,64 --contexts 256,1024,4096 --max-context 32768 $( [ $s -gt 0 ] && echo --split-rows $s ) --runs 7 2>&1 | grep -vE '^#|^$'
done; done; } > $OUT/attn_bound_b64.txt
cat $OUT/attn_bound_b64.txt
date -u
