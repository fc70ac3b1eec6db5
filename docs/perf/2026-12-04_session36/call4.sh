#!/usr/bin/env bash
# Session 36 call 4: Tile::load_whole for the GDN streaming replay's whole passes (no bounds, one add a row)
# against 0ed4a48's bench (bench_old), 3 alternating rounds; the new AR instance's SASS; the GDN tests.
set -u
eval "$(bash scripts/gpu_check.sh libs)"; cd .gpu
export PATH=$PATH:/usr/local/cuda/bin
xz -d -k bench_old.xz && chmod +x bench_old
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
t0=$(date +%s)
fn=_ZN9replayssm3ops4cuda46_GLOBAL__N__c0165718_13_gdn_replay_cu_cc2605df17gdn_replay_kernelINS1_4TileILi4ELi1ELi4EEELi2ELb0ELb0ELb0EEEvNS1_13GdnDecodeArgsE
cuobjdump -sass -fun "$fn" ./replayssm_ssm_bench > $OUT/ar_nofold_whole.sass 2>&1; grep -c "LDG.E.128" $OUT/ar_nofold_whole.sass
for round in 1 2 3; do
  for b in old new; do
    bin=./replayssm_ssm_bench; [ $b = old ] && bin=./bench_old
    echo "=== $b r$round (t=$(( $(date +%s) - t0 )) s)"
    timeout 120 $bin --only gdn --batches 8,64,256,512 2>&1 | grep -E '^gdn |1-entry|last two|fold step|^ *\(|copy'
  done
done
echo "=== bench t=$(( $(date +%s) - t0 )) s"
timeout 300 ./replayssm_cuda_tests --gtest_filter='*Gdn*' 2>&1 | grep -E '^\[  (PASSED|FAILED) |FAILED|Failure|tests ran' | head -40
echo "=== done t=$(( $(date +%s) - t0 )) s"
