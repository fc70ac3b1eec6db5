#!/usr/bin/env bash
# Session 37 call 6: the kernels part of the check with the SSM bench's timed runs as CUDA graphs
# (its new default) and every replay launch on the next rotation of slots; then end to end at
# Qwen3.5-27B shapes (GDN layers) at batch 1 and 8. The run's folder comes back as one archive.
set -u
o=/tmp/s37_kernels
bash scripts/gpu_check.sh run $o kernels > $o.log 2>&1; echo "rc=$?"; tail -45 $o.log
eval "$(bash scripts/gpu_check.sh libs)"
timeout 240 .gpu/replayssm_e2e_bench --preset qwen3.5-27b --batch 1,8 --runs 3 --json $o/e2e_qwen.json 2>&1 | tee $o/e2e_qwen.txt
cp $o.log $o/run.log; tar -cJf $OUT/kernels_run.tar.xz -C $o .
