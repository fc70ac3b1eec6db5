#!/usr/bin/env bash
# Session 38 call 8: the CUDA suite at the review's mends (the replay-step test's bit-for-bit check
# against the standard layout until the first verify, and its one-log-only folds).
set -u
o=/tmp/s38_c8
bash scripts/gpu_check.sh run $o tests > $o.log 2>&1; echo "rc=$?"
grep -E "^\[  (PASSED|FAILED) " $o/cuda_tests.log | tail -6
grep -E "EveryPlainStep" -A2 $o/cuda_tests.log | head -12
xz -k $o/cuda_tests.log && cp $o/cuda_tests.log.xz $OUT/
