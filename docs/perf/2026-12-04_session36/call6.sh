#!/usr/bin/env bash
# Session 36 call 6: GDN streaming replay, 3 alternating rounds: whole (Tile::load_whole) against div
# (+ the epilogue's divisions by constants: one token's key-dot coefficients, a whole slice's sums).
set -u
eval "$(bash scripts/gpu_check.sh libs)"; cd .gpu
xz -d -k bench_whole.xz && chmod +x bench_whole; cp replayssm_ssm_bench bench_div
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
t0=$(date +%s)
for round in 1 2 3; do
  for b in whole div; do
    echo "=== $b r$round (t=$(( $(date +%s) - t0 )) s)"
    timeout 120 ./bench_$b --only gdn --batches 8,64,256,512 2>&1 | grep -E '^gdn |1-entry|last two|fold step|^ *\(|copy'
  done
done
echo "=== done t=$(( $(date +%s) - t0 )) s"
