#!/usr/bin/env bash
# Session 36 call 2 (at 0ed4a48): the GDN block shapes at batch 64 and 512; the SASS of the one-token
# replay instance without a fold; ncu (full set) of one no-fold replay step and one standard step at batch 64.
set -u
eval "$(bash scripts/gpu_check.sh libs)"; cd .gpu
export PATH=$PATH:/usr/local/cuda/bin
which ncu cuobjdump nvdisasm
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
t0=$(date +%s)
timeout 120 ./replayssm_ssm_bench --gdn-shapes --batches 64,512 > $OUT/gdn_shapes.txt 2>&1; tail -20 $OUT/gdn_shapes.txt
echo "=== shapes t=$(( $(date +%s) - t0 )) s"
fn=_ZN9replayssm3ops4cuda46_GLOBAL__N__c0165718_13_gdn_replay_cu_cc2605df17gdn_replay_kernelINS1_4TileILi4ELi1ELi4EEELi2ELb0ELb0ELb0EEEvNS1_13GdnDecodeArgsE
cuobjdump -sass -fun "$fn" ./replayssm_ssm_bench > $OUT/ar_nofold.sass 2>&1; wc -l $OUT/ar_nofold.sass
timeout 200 ncu --kernel-name regex:gdn_replay_kernel --launch-skip 8 --launch-count 1 --set full \
  ./replayssm_ssm_bench --profile gdn ar 64 > $OUT/ncu_replay_ar64.txt 2>&1; tail -5 $OUT/ncu_replay_ar64.txt
echo "=== ncu replay t=$(( $(date +%s) - t0 )) s"
timeout 150 ncu --kernel-name regex:gdn_step_kernel --launch-count 1 --set full \
  ./replayssm_ssm_bench --profile gdn ar 64 > $OUT/ncu_step_ar64.txt 2>&1; tail -5 $OUT/ncu_step_ar64.txt
echo "=== done t=$(( $(date +%s) - t0 )) s"
