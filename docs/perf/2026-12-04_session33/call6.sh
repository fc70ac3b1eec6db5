#!/bin/bash
# Call 6 (session 33): the norm tests that check which kernel ran
# (norm_pieces_launches), at HEAD + the change, and against a mutant whose
# pieces never run (it must fail them), plus the decoder tests that use norms.
set -u
eval "$(bash scripts/gpu_check.sh libs)"
cd .gpu
tar -xJf mut.tar.xz
./replayssm_cuda_tests --gtest_filter='*Norm*:*CudaDecoder.*' > $OUT/norm_tests.log 2>&1; echo "tests rc $?"
grep -E '^\[  PASSED|^\[  FAILED|FAILED  \]' $OUT/norm_tests.log | head
mut/replayssm_cuda_tests --gtest_filter='NormCuda.*' > $OUT/norm_tests_mutant.log 2>&1; echo "mutant rc $?"
grep -E '^\[  PASSED|^\[  FAILED|FAILED  \]|pieces expected' $OUT/norm_tests_mutant.log | sort | uniq -c | head
