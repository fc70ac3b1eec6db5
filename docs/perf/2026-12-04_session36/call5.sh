#!/usr/bin/env bash
# Session 36 call 5: GDN streaming replay, 3 alternating rounds of 4 builds: old (0ed4a48), whole
# (Tile::load_whole), unroll (+ the pass loop unrolled by 2 without a fold: no tile copies), new (+ the
# epilogue's divisions by constants); the new build's GDN tests and AR instance SASS.
set -u
eval "$(bash scripts/gpu_check.sh libs)"; cd .gpu
export PATH=$PATH:/usr/local/cuda/bin
tar -xJf benches.tar.xz; cp replayssm_ssm_bench bench_new
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
t0=$(date +%s)
fn=_ZN9replayssm3ops4cuda46_GLOBAL__N__c0165718_13_gdn_replay_cu_cc2605df17gdn_replay_kernelINS1_4TileILi4ELi1ELi4EEELi2ELb0ELb0ELb0EEEvNS1_13GdnDecodeArgsE
cuobjdump -sass -fun "$fn" ./bench_new > $OUT/ar_nofold_new.sass 2>&1
for round in 1 2 3; do
  for b in old whole unroll new; do
    echo "=== $b r$round (t=$(( $(date +%s) - t0 )) s)"
    timeout 120 ./bench_$b --only gdn --batches 8,64,256,512 2>&1 | grep -E '^gdn |1-entry|last two|fold step|^ *\(|copy'
  done
done
echo "=== bench t=$(( $(date +%s) - t0 )) s"
timeout 300 ./replayssm_cuda_tests --gtest_filter='*Gdn*:*Rows*' 2>&1 | grep -E '^\[  (PASSED|FAILED) |FAILED|Failure' | head -40
echo "=== done t=$(( $(date +%s) - t0 )) s"
