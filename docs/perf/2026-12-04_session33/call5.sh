#!/bin/bash
# Call 5 (session 33): the whole gpu_check.sh run at HEAD; its folder comes
# back as one archive (the device tool returns at most 8 files).
set -u
date -u
timeout 570 bash scripts/gpu_check.sh run /tmp/r > /tmp/r.log 2>&1; echo "gpu_check rc $?"
date -u
cp /tmp/r.log /tmp/r/gpu_check.log
grep -E '^\[  PASSED|^\[  FAILED|FAILED  \]' /tmp/r/cuda_tests.log | head -5
xz -T4 /tmp/r/cuda_tests.log
tar -cJf $OUT/gpu_check_run.tar.xz -C /tmp r
cp /tmp/r/summary.txt $OUT/ 2>/dev/null
cat /tmp/r/summary.txt 2>/dev/null || tail -30 /tmp/r.log
