#!/usr/bin/env bash
# Session 37 call 9 (c800f09: the bench's machinery moved to ssm_bench_cycle.h): the rows still run.
set -u
eval "$(bash scripts/gpu_check.sh libs)"
for fam in mamba2 gdn; do timeout 60 .gpu/replayssm_ssm_bench --only $fam --batches 1,8,64 2>&1 | grep -E '^(gdn|mamba2) |graph'; done
