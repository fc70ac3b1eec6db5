#!/usr/bin/env bash
# Session 36 call 1: GDN replay, several sequences a streaming block (seqs_per_block 1 / 2 / 4:
# each next sequence's first pass read during this one's sums and outputs), alternating rounds;
# and the GDN parity tests (the kernel restructured as a loop over sequences).
set -u
eval "$(bash scripts/gpu_check.sh libs)"; cd .gpu
tar -xJf bin.tar.xz 2>/dev/null || true
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
t0=$(date +%s)
timeout 200 ./replayssm_cuda_tests --gtest_filter='Gdn*' 2>&1 | grep -E '^\[  (PASSED|FAILED) |FAILED|Failure' | head -40
echo "=== tests t=$(( $(date +%s) - t0 )) s"
for round in 1 2; do
  for n in 0 2 4; do
    echo "=== seqs $n r$round (t=$(( $(date +%s) - t0 )) s)"
    timeout 120 ./replayssm_ssm_bench --only gdn --batches 8,64,256,512 --gdn-seqs $n 2>&1 | grep -E '^gdn |1-entry|last two|fold step|^ *\(|copy'
  done
done
echo "=== done t=$(( $(date +%s) - t0 )) s"
